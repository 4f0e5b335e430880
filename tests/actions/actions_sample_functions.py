"""Functions for function.invoke tests; module-level so a fresh process can import them.

``ACTWHEEL_FUNCTIONS=actions_sample_functions`` loads them through :func:`register`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

from actwheel.actions.executors.function import FunctionRegistry

CALLS: list[tuple[str, Any]] = []


def add(a: int, b: int) -> int:
    return a + b


def thread_name() -> str:
    return threading.current_thread().name


async def greet(name: str, punctuation: str = "!") -> dict[str, str]:
    await asyncio.sleep(0)
    return {"greeting": f"hello {name}{punctuation}"}


async def hang_async() -> None:
    await asyncio.Event().wait()


def boom(message: str) -> None:
    raise ValueError(message)


def pid_then_hang(pid_file: str) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(60)


def shout(text: str) -> str:
    print("noise on stdout must not break the reply")
    return text.upper()


def reserve(item: str) -> str:
    CALLS.append(("reserve", item))
    return f"reservation-{item}"


def release(args: dict[str, Any], value: Any) -> None:
    CALLS.append(("release", (args["item"], value)))


def register(registry: FunctionRegistry) -> None:
    registry.register("add", add)
    registry.register("greet", greet)
