# actwheel — the two commands: `make run` and `make test`.
PY        ?= python3
VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed

.PHONY: run test lint typecheck pytest services services-stop bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## run: start the engine on the embedded default (SQLite + in-process bus)
run: $(STAMP)
	$(BIN)/actwheel run

## test: lint, type-check and the whole test suite (starts local services)
test: $(STAMP) lint typecheck services pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict actwheel

services:
	@ops/dev-services start || { if [ -n "$$CI" ]; then echo "dev-services failed and CI is set" >&2; exit 1; else echo "WARNING: local services unavailable; tests that need them will skip" >&2; fi; }

services-stop:
	ops/dev-services stop

# Two phases: every test that does not restart the shared services runs on two xdist workers (each
# test has its own schema, queue prefix and ports; an xdist_group, such as tests/faults on its own
# throwaway servers, stays on one worker and is dealt first, being the largest); the `restart` ones
# then run alone, one at a time.
pytest: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadgroup -m "not restart"
	$(BIN)/pytest -q -m restart || [ $$? -eq 5 ]  # 5: none selected

bench: $(STAMP)
	$(BIN)/python bench/wheel.py

clean:
	rm -rf $(VENV) .devdata .pytest_cache .mypy_cache .ruff_cache
