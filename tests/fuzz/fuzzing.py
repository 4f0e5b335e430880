"""Schemathesis against a running engine: ``actwheel run`` in a child process on a loopback port, the
bootstrap admin's key from ``ACTWHEEL_ADMIN_KEY_FILE``, the Schemathesis CLI over ``/openapi.json``
with its settings in ``schemathesis.toml`` beside this file, and the engine's log read afterwards.

Used by ``tests/fuzz/test_fuzz.py`` (a bounded run per stack) and ``bench/fuzz.py`` (a larger one).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

CONFIG = Path(__file__).resolve().parent / "schemathesis.toml"
ROOT = Path(__file__).resolve().parents[2]
_BIN = Path(sys.executable).parent
#: Lines of the engine's log that mean a request crashed or a 5xx left it (uvicorn's and structlog's).
_CRASH = re.compile(r"Traceback \(most recent call last\)|Exception in ASGI application|\" 5\d\d "
                    r"|\"level\": ?\"(error|critical)\"")


@dataclass
class FuzzResult:
    """One Schemathesis run: its figures, its failures as the CLI printed them, and the engine's crashes."""

    stack: str
    command: list[str]
    exit_code: int
    operations: int
    cases: int
    failures: int
    seconds: float
    output: str
    crash_lines: list[str] = field(default_factory=list)
    key_still_works: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"stack": self.stack, "operations": self.operations, "cases": self.cases, "failures": self.failures,
                "engine_crash_lines": len(self.crash_lines), "exit_code": self.exit_code,
                "seconds": round(self.seconds, 1), "key_still_works": self.key_still_works}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RunningEngine:
    """``actwheel run --http 127.0.0.1:<port>`` over ``database`` (and ``broker``), logging to a file."""

    def __init__(self, workdir: Path, *, database: str | None = None, broker: str | None = None) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key_file = workdir / "admin.key"
        self.log = workdir / "engine.log"
        self._database = database or f"sqlite:///{workdir / 'actwheel.db'}"
        self._broker = broker
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RunningEngine:
        command = [str(_BIN / "actwheel"), "run", "--http", f"127.0.0.1:{self.port}", "--database", self._database]
        if self._broker:
            command += ["--broker", self._broker]
        env = {**os.environ, "ACTWHEEL_ADMIN_KEY_FILE": str(self.key_file),
               "ACTWHEEL_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()}
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(command, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        """Until /readyz answers 200: a readiness probe with a deadline, the way a load balancer waits."""
        deadline = time.monotonic() + timeout_s
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the engine exited {self._process.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the engine was not ready within {timeout_s} s:\n{self.log.read_text()[-3000:]}")

    @property
    def token(self) -> str:
        return self.key_file.read_text().strip()

    def __exit__(self, *exc: object) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def crash_lines(self) -> list[str]:
        return [line for line in self.log.read_text(errors="replace").splitlines() if _CRASH.search(line)]


def fuzz(engine: RunningEngine, *, stack: str, max_examples: int, seed: int, workers: int = 1,
         phases: str = "examples,coverage,fuzzing,stateful", max_time_s: int | None = None) -> FuzzResult:
    """The Schemathesis CLI against ``engine``, authenticated as the bootstrap admin."""
    report = engine.workdir / "schemathesis.json"
    command = [str(_BIN / "schemathesis"), "--config-file", str(CONFIG), "run", f"{engine.url}/openapi.json",
               "--header", f"Authorization: Bearer {engine.token}", "--max-examples", str(max_examples),
               "--seed", str(seed), "--workers", str(workers), "--phases", phases, "--report", "json",
               "--report-json-path", str(report), "--no-color"]
    if max_time_s is not None:
        command += ["--max-time", str(max_time_s)]
    started = time.monotonic()
    done = subprocess.run(command, cwd=engine.workdir, capture_output=True, text=True, timeout=1800, check=False)
    seconds = time.monotonic() - started
    operations, cases, failures = _figures(report, done.stdout)
    shown = [c if not c.startswith("Authorization:") else "Authorization: Bearer <admin key>" for c in command]
    key_works = httpx.get(f"{engine.url}/v1/whoami", headers={"Authorization": f"Bearer {engine.token}"},
                          timeout=5).status_code == 200
    return FuzzResult(stack=stack, command=shown, exit_code=done.returncode, operations=operations, cases=cases,
                      failures=failures, seconds=seconds, output=done.stdout + done.stderr,
                      crash_lines=engine.crash_lines(), key_still_works=key_works)


def _figures(report: Path, stdout: str) -> tuple[int, int, int]:
    """(operations tested, cases generated, unique failures) from the JSON report, else the printed summary."""
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        data = None
    summary = _summary_from_report(data) if isinstance(data, dict) else None  # the CLI's text is the fallback
    if summary is not None:
        return summary
    tested = re.search(r"Tested:\s+(\d+)", stdout)
    generated = re.search(r"(\d+) generated", stdout)
    found = re.search(r"found (\d+) unique failures", stdout)
    return (int(tested.group(1)) if tested else 0, int(generated.group(1)) if generated else 0,
            int(found.group(1)) if found else (0 if "No issues found" in stdout or tested else -1))


def _summary_from_report(data: dict[str, Any]) -> tuple[int, int, int] | None:
    """Schemathesis 4's JSON report: ``operations.tested``, ``test_cases.generated``, ``test_cases.unique_failures``
    (plus ``errors``: an operation the run could not test counts as a failure here)."""
    try:
        operations = data["operations"]["tested"]
        cases = data["test_cases"]["generated"]
        failures = data["test_cases"]["unique_failures"] + len(data.get("errors") or [])
    except (KeyError, TypeError):
        return None
    return int(operations), int(cases), int(failures)
