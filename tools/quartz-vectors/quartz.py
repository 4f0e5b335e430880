"""Run the QuartzVectors Java program (compiling it when needed) over many cases at once."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUILD = Path("/tmp/actwheel-quartz-vectors")
JARS = ("/usr/share/java/quartz2.jar", "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-nop.jar")


def _compile() -> None:
    source = HERE / "QuartzVectors.java"
    target = BUILD / "QuartzVectors.class"
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return
    BUILD.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-cp", JARS[0], "-d", str(BUILD), str(source)], check=True)


def run(cases: Iterable[tuple[str, str, int]], fires: int) -> list[dict[str, Any]]:
    """Quartz's answer for each (expression, zone, start_ms): one JSON object per case."""
    _compile()
    lines = "".join(f"{e}\t{z}\t{s}\t{fires}\n" for e, z, s in cases)
    classpath = ":".join((str(BUILD), *JARS))
    out = subprocess.run(["java", "-cp", classpath, "QuartzVectors"], input=lines, capture_output=True,
                         text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]
