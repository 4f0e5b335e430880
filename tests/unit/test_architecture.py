"""The import rules of docs/architecture.md, checked on the source with ``ast``.

Each rule is about what a layer may *know*: an import under ``if TYPE_CHECKING:`` counts too.
The rules for pure and inner layers follow imports transitively inside ``actwheel`` (importing
``actwheel.bus.routing`` runs ``actwheel/bus/__init__.py`` first, so a parent package counts as
imported); the faces rule is about the face's own imports, because the service it calls may use
the store.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "actwheel"

#: Third-party packages that do IO: a pure layer must not load them.
IO_LIBRARIES = frozenset({"aio_pika", "aiormq", "asyncpg", "aiosqlite", "httpx", "starlette", "uvicorn"})
#: The layers above the pure ones (they do IO or drive those that do).
OUTER_LAYERS = ("actwheel.bus", "actwheel.storage", "actwheel.actors", "actwheel.api", "actwheel.mcp", "actwheel.ui",
                "actwheel.actions", "actwheel.service", "actwheel.engine", "actwheel.commands", "actwheel.cli")
#: The faces: REST (+ OpenAPI), MCP and the dashboard. They call the service layer only.
FACES = ("actwheel.api", "actwheel.mcp", "actwheel.ui")
#: The pure part of ``actwheel.auth``: the key format and the scope algebra (the package loads only these).
PURE_AUTH = ("actwheel.auth", "actwheel.auth.keys", "actwheel.auth.scopes")
#: The small modules of the pure core (docs/architecture.md's diagram, beside the wheel and the triggers).
PURE_MODULES = ("actwheel.clock", "actwheel.errors", "actwheel.policy", "actwheel.messages", "actwheel.topics",
                "actwheel.run_context", "actwheel.backoff", "actwheel.redact", "actwheel.batching",
                "actwheel.cancellation")
#: The modules of ``actwheel.service`` an actor may take anything from: the caller and the checks every use case
#: shares. From the others it takes the use cases only (the ``…Service`` classes the bus commands call).
SERVICE_SEAM_MODULES = ("actwheel.service.caller", "actwheel.service.authorize")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return _modules()[module].name == "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if _is_package(module) else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


@cache
def direct_imports(module: str) -> frozenset[str]:
    """Every module ``module`` names in an import statement (``from a import b`` names ``a.b`` when it is one)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(_modules()[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, node)
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in _modules())
    return frozenset(found)


def _with_parents(module: str) -> Iterator[str]:
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


@cache
def imported_closure(module: str) -> frozenset[str]:
    """What importing ``module`` loads: its imports and theirs, parent packages included, within actwheel."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        for name in direct_imports(current):
            for loaded in _with_parents(name):
                if loaded in seen:
                    continue
                seen.add(loaded)
                if loaded in _modules():
                    todo.append(loaded)
    return frozenset(seen)


def modules_of(*layers: str) -> list[str]:
    return [name for name in _modules() if any(_within(name, layer) for layer in layers)]


def _within(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _breaches(modules: Iterable[str], imports_of: Callable[[str], frozenset[str]],
              allowed: Callable[[str], bool], forbidden: Callable[[str], bool]) -> list[str]:
    """``module → name`` for each forbidden, not allowed name among ``imports_of(module)``."""
    return sorted(f"{module} → {name}" for module in modules for name in imports_of(module)
                  if forbidden(name) and not allowed(name))


def test_the_rules_see_the_package() -> None:
    assert "actwheel.wheel.timing_wheel" in _modules()
    assert modules_of("actwheel.triggers")
    assert modules_of("actwheel.actions.executors")
    assert modules_of("actwheel.api")
    assert modules_of("actwheel.mcp")
    assert modules_of("actwheel.ui")
    assert {"actwheel.bus", "actwheel.bus.base", "aio_pika"} <= imported_closure("actwheel.bus.amqp")


def _io_or_outer(name: str) -> bool:
    return name.split(".")[0] in IO_LIBRARIES or any(_within(name, layer) for layer in OUTER_LAYERS)


def test_the_wheel_loads_nothing_that_does_io() -> None:
    assert _breaches(modules_of("actwheel.wheel"), imported_closure, lambda _: False, _io_or_outer) == []


def test_the_triggers_load_nothing_that_does_io() -> None:
    assert _breaches(modules_of("actwheel.triggers"), imported_closure, lambda _: False, _io_or_outer) == []


def test_the_keys_and_the_scope_algebra_load_nothing_that_does_io() -> None:
    assert _breaches(PURE_AUTH, imported_closure, lambda _: False, _io_or_outer) == []


@pytest.mark.parametrize("package", ["actwheel.triggers", "actwheel.wheel"])
def test_importing_a_pure_package_in_a_fresh_interpreter_loads_no_io_library(package: str) -> None:
    probe = f"import sys, {package}; print(sorted(m for m in {sorted(IO_LIBRARIES)!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert loaded.stdout.strip() == "[]"


def test_the_small_pure_modules_load_nothing_that_does_io() -> None:
    assert _breaches(PURE_MODULES, imported_closure, lambda _: False, _io_or_outer) == []


def test_storage_knows_no_actor_face_or_bus() -> None:
    def above_storage(name: str) -> bool:
        return any(_within(name, layer) for layer in ("actwheel.actors", "actwheel.api", "actwheel.bus",
                                                      "actwheel.service", "actwheel.engine"))

    assert _breaches(modules_of("actwheel.storage"), imported_closure, lambda _: False, above_storage) == []


def test_the_service_knows_no_actor_engine_or_face() -> None:
    """The actors, the engine and the faces call the service; it loads none of them."""

    def above_the_service(name: str) -> bool:
        return any(_within(name, layer) for layer in ("actwheel.actors", "actwheel.engine", *FACES,
                                                      "actwheel.commands", "actwheel.cli"))

    assert _breaches(modules_of("actwheel.service"), imported_closure, lambda _: False, above_the_service) == []


def test_executors_cannot_reach_what_moves_run_state() -> None:
    """An executor returns a result; the router moves the run.

    Executors get everything as arguments (the context, the ontology and secrets ports) and import
    nothing from ``actwheel.storage``, not even its records: importing ``actwheel.storage.records``
    runs ``actwheel/storage/__init__.py``, which loads both adapters.
    """

    def run_state_writer(name: str) -> bool:
        return any(_within(name, layer) for layer in ("actwheel.storage", "actwheel.actors", "actwheel.service",
                                                      "actwheel.bus", "actwheel.engine", "actwheel.events",
                                                      "actwheel.actions.storage_ontology",
                                                      "actwheel.actions.storage_secrets"))

    executors = modules_of("actwheel.actions.executors")
    assert _breaches(executors, imported_closure, lambda _: False, run_state_writer) == []


def _store_access(module: str) -> list[str]:
    """``….store`` attributes and ``….transaction()`` calls: a face holding a store transaction of its own."""
    tree = ast.parse(_modules()[module].read_text(encoding="utf-8"))
    return sorted({f"{module}:{node.lineno} .{node.attr}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr in {"store", "transaction"}})


def test_faces_call_the_service_only() -> None:
    def behind_the_service(name: str) -> bool:
        return any(_within(name, layer) for layer in ("actwheel.storage", "actwheel.actors", "actwheel.bus",
                                                      "actwheel.engine", "actwheel.actions.storage_ontology",
                                                      "actwheel.actions.storage_secrets"))

    faces = modules_of(*FACES)
    assert _breaches(faces, direct_imports, lambda name: _within(name, "actwheel.storage.records"),
                     behind_the_service) == []
    assert [access for face in faces for access in _store_access(face)] == []


def _service_names(module: str) -> Iterator[tuple[str, str]]:
    """``(service module, name)`` for each name ``module`` takes from ``actwheel.service`` (``""``: the module)."""
    for node in ast.walk(ast.parse(_modules()[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, "") for alias in node.names if _within(alias.name, "actwheel.service"))
        elif isinstance(node, ast.ImportFrom) and _within(target := _absolute(module, node), "actwheel.service"):
            yield from ((target, alias.name) for alias in node.names)


def _service_seam(service_module: str, name: str) -> bool:
    """A use case (a ``…Service`` class), or anything of the caller and the shared checks."""
    if service_module in SERVICE_SEAM_MODULES or f"{service_module}.{name}" in SERVICE_SEAM_MODULES:
        return True
    return name.endswith("Service") or name == "Caller"


@pytest.mark.parametrize(("service_module", "name", "allowed"), [
    ("actwheel.service", "AutomationService", True),
    ("actwheel.service", "Caller", True),
    ("actwheel.service.caller", "Caller", True),
    ("actwheel.service", "caller", True),
    ("actwheel.service.authorize", "require", True),
    ("actwheel.service", "cancel_transient_runs", False),
    ("actwheel.service.payload", "first_fire", False),
    ("actwheel.service.transient", "", False),
])
def test_the_service_seam_rule_tells_use_cases_from_helpers(service_module: str, name: str, allowed: bool) -> None:
    assert _service_seam(service_module, name) is allowed


def test_actors_take_use_cases_not_helpers_from_the_service() -> None:
    """An actor that serves a bus command calls a use case, as a face does; a helper both need (a rule on
    runs, a cancel cascade) sits below both, where the service and the actors may import it."""
    breaches = sorted(f"{actor} → {service_module}" + (f".{name}" if name else "")
                      for actor in modules_of("actwheel.actors")
                      for service_module, name in _service_names(actor) if not _service_seam(service_module, name))
    assert breaches == []
