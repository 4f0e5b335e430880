"""AMQP topic matching, exactly as RabbitMQ's topic exchange does it, and actwheel's own namespaces.

Pure (no IO, no driver imports) so that both the bus and the event trigger use this
one matcher without ``actwheel.triggers`` loading aio-pika.

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

__all__ = ["RESERVED_NAMESPACES", "is_reserved_pattern", "topic_matches"]

#: Routing-key prefixes actwheel publishes under itself. A user's event pattern must not
#: listen there (an automation firing on its own run events would loop), and a user's
#: message must not be published there (it would impersonate actwheel).
RESERVED_NAMESPACES: tuple[str, ...] = ("automation.", "run.", "action.", "command.", "cdc.")


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


def is_reserved_pattern(pattern: str) -> bool:
    """True when ``pattern`` lies in, or could reach into, :data:`RESERVED_NAMESPACES`.

    A pattern that starts with a wildcard (``#.created``, ``*.x``) can match a reserved
    key, so it counts as reserved too.
    """
    return pattern.startswith(RESERVED_NAMESPACES) or pattern[:1] in ("#", "*")
