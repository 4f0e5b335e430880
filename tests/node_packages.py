"""The Node packages the suite runs (the MCP Inspector's CLI, the official AsyncAPI schemas), installed
once into ``.devdata/npm`` rather than downloaded by every run.

Two xdist workers may want them at the same moment, and ``npm install`` into one prefix is not safe
run twice at once: each rewrites the prefix's package.json and lock file and prunes what they do not
list, so one install removed the other's package under CI. Every install here therefore holds an
exclusive lock on the prefix, and looks under it whether the package is there already (so that it never
reads one half installed).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

__all__ = ["NPM_PREFIX", "installed_version", "npm_install"]

NPM_PREFIX = Path(__file__).resolve().parents[1] / ".devdata" / "npm"


def installed_version(name: str) -> str | None:
    """The version of ``name`` (``@scope/pkg``) installed in the prefix, or None."""
    manifest = NPM_PREFIX / "node_modules" / name / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def npm_install(spec: str, *, present: Callable[[], bool], timeout_s: float = 300.0) -> str | None:
    """Install ``spec`` (``name@version``) into the prefix unless ``present()`` says it is there.

    Returns None once it is there, or why it is not (no npm; npm's exit code and the end of what it
    said), for the caller to skip loudly or, under CI, fail with.
    """
    NPM_PREFIX.mkdir(parents=True, exist_ok=True)
    with (NPM_PREFIX / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes; looked at under it, never half-installed
        if present():  # installed already, perhaps by another worker while this one waited
            return None
        npm = shutil.which("npm")
        if npm is None:
            return "npm not found"
        done = subprocess.run([npm, "install", "--prefix", str(NPM_PREFIX), "--no-audit", "--no-fund",
                               "--loglevel=error", spec],
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0 or not present():
            said = (done.stderr.strip() or done.stdout.strip())[-600:]
            return f"npm install {spec} failed (exit {done.returncode}): {said or 'it said nothing'}"
    return None
