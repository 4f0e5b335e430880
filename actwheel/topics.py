"""AMQP topic matching, exactly as RabbitMQ's topic exchange does it.

A routing key is a list of words separated by ``.``; the empty key has zero words.
In a binding pattern ``*`` matches exactly one word (which may be empty) and ``#``
matches zero or more words, anywhere: ``a.#.b`` matches ``a.b``, ``a.x.b`` and
``a.x.y.b``. The match is a dynamic programme over words, linear in
``len(pattern) * len(key)``, so no pattern can make it backtrack exponentially.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import accumulate
from operator import or_

__all__ = ["topic_matches"]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split(".")) if text else ()


@lru_cache(maxsize=4096)
def topic_matches(pattern: str, routing_key: str) -> bool:
    """True when ``routing_key`` matches the binding ``pattern`` under AMQP topic rules."""
    key = _words(routing_key)
    # reach[j]: the pattern words seen so far can consume exactly the first j key words
    reach = [True] + [False] * len(key)
    for word in _words(pattern):
        reach = _step(word, reach, key)
    return reach[-1]


def _step(word: str, reach: list[bool], key: tuple[str, ...]) -> list[bool]:
    if word == "#":
        return list(accumulate(reach, or_))
    return [False] + [reach[j] and word in ("*", key[j]) for j in range(len(key))]
