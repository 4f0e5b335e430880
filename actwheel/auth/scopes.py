"""The scope algebra: which scopes exist, what a grant allows, how grants combine.

A scope is ``noun:verb`` (``automation:read``). A grant is a set of scopes, where
``noun:*`` stands for every scope of that noun and ``*`` for every scope at all (the
bootstrap admin only). A request is allowed what its key, its user's ceiling and its
agent's ceiling all allow: the :meth:`Grant.intersect` of the three.

Wildcards are kept as written, not expanded into today's scopes, because they mean
"this noun, whatever it grows into": ``automation:*`` is broader than
``automation:read automation:write`` the day a third automation scope is added. So
:meth:`Grant.covers` is structural: a key holding the two concrete scopes may mint a key
with those two, but not one with ``automation:*``. ``a.covers(b)`` holds exactly when
``a.intersect(b) == b``.

Unknown scopes are never allowed, not even to ``*``: a scope nobody can grant is a bug
in whoever requires it, and failing closed makes it show.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from actwheel.errors import FieldError, InvalidInput

__all__ = [
    "ALL",
    "KNOWN_SCOPES",
    "SCOPE_NOUNS",
    "Grant",
    "grant_of",
    "scopes_of",
    "validate_scopes",
]

ALL = "*"
_WILDCARD_VERB = "*"

#: Scopes on the control plane's resources.
RESOURCE_SCOPES = frozenset(
    {
        "automation:read",
        "automation:write",
        "run:read",
        "run:write",
        "action:request",
        "ontology:read",
        "ontology:write",
        "ontology:schema",
        "secret:read",
        "secret:write",
        "key:read",
        "key:write",
        "admin:read",
        "admin:write",
        "metrics:read",
        "bus:publish",
    }
)
#: Scopes an action type may require to run (``ontology:write`` is both kinds).
ACTION_SCOPES = frozenset({"ontology:write", "function:invoke", "webhook:call", "notification:send"})
KNOWN_SCOPES: frozenset[str] = RESOURCE_SCOPES | ACTION_SCOPES


def _noun(scope: str) -> str:
    return scope.partition(":")[0]


SCOPE_NOUNS: frozenset[str] = frozenset(_noun(s) for s in KNOWN_SCOPES)


def scopes_of(noun: str) -> frozenset[str]:
    """Every known scope of ``noun`` (what ``noun:*`` allows today)."""
    return frozenset(s for s in KNOWN_SCOPES if _noun(s) == noun)


def _wildcard_noun(scope: str) -> str | None:
    """The noun of a ``noun:*`` wildcard over a known noun, else ``None``."""
    noun, _, verb = scope.partition(":")
    return noun if verb == _WILDCARD_VERB and noun in SCOPE_NOUNS else None


def _problem(value: Any, allow_all: bool) -> str | None:
    """What is wrong with one granted scope, or ``None`` when it is fine."""
    if not isinstance(value, str):
        return "a scope string"
    if value in KNOWN_SCOPES or _wildcard_noun(value) is not None:
        return None
    if value == ALL and allow_all:
        return None
    known = ", ".join(sorted(KNOWN_SCOPES))
    return f"a known scope ({known}) or noun:* for one of {', '.join(sorted(SCOPE_NOUNS))}"


def validate_scopes(values: Any, field: str, *, allow_all: bool = False) -> frozenset[str]:
    """The granted scopes in ``values`` (a list of strings), refused where they enter.

    ``*`` is refused unless ``allow_all``: only the bootstrap admin is created with it.

    :raises InvalidInput: not a list (field ``field``), or an unknown scope (field
        ``field[i]``, every bad entry reported at once)
    """
    if not isinstance(values, list | tuple):
        raise InvalidInput(field, values, "a list of scope strings")
    errors = [
        FieldError(f"{field}[{index}]", value, problem)
        for index, value in enumerate(values)
        if (problem := _problem(value, allow_all)) is not None
    ]
    if errors:
        raise InvalidInput.collect(errors)
    return frozenset(values)


@dataclass(frozen=True, slots=True, init=False)
class Grant:
    """An immutable set of granted scopes, wildcards kept.

    Build one with :meth:`of`. The fields are normalised: with ``everything`` the other two
    are empty, and no concrete scope lies under a held ``noun:*``. So two grants are equal
    exactly when they are written the same way, up to order and redundancy.

    :ivar everything: ``*`` was granted
    :ivar nouns: the nouns granted as ``noun:*``
    :ivar scopes: the concrete scopes granted beyond those
    """

    everything: bool
    nouns: frozenset[str]
    scopes: frozenset[str]

    def __init__(self, everything: bool, nouns: Iterable[str] = (), scopes: Iterable[str] = ()) -> None:
        held = frozenset() if everything else frozenset(nouns)
        concrete = frozenset() if everything else frozenset(s for s in scopes if _noun(s) not in held)
        object.__setattr__(self, "everything", everything)
        object.__setattr__(self, "nouns", held)
        object.__setattr__(self, "scopes", concrete)

    @classmethod
    def of(cls, granted: Iterable[str], field: str = "scopes") -> Grant:
        """The grant a list of scopes (``*`` and ``noun:*`` included) describes.

        :raises InvalidInput: an unknown scope (named by ``field``)
        """
        values = validate_scopes(list(granted), field, allow_all=True)
        nouns = {noun for s in values if (noun := _wildcard_noun(s)) is not None}
        return cls(ALL in values, nouns, values & KNOWN_SCOPES)

    @classmethod
    def all(cls) -> Grant:
        """``*``: every scope."""
        return cls(True)

    @classmethod
    def none(cls) -> Grant:
        """No scope at all."""
        return cls(False)

    def allows(self, scope: str) -> bool:
        """True when this grant allows the concrete ``scope`` (an unknown scope: never)."""
        if scope not in KNOWN_SCOPES:
            return False
        return self.everything or scope in self.scopes or _noun(scope) in self.nouns

    def missing(self, required: Iterable[str]) -> list[str]:
        """The scopes of ``required`` this grant does not allow, sorted (empty = allowed)."""
        return sorted({s for s in required if not self.allows(s)})

    def intersect(self, other: Grant) -> Grant:
        """What both grants allow: ``* ∩ X = X``, ``automation:* ∩ automation:read = automation:read``."""
        if self.everything:
            return other
        if other.everything:
            return self
        scopes = (
            (self.scopes & other.scopes)
            | {s for s in self.scopes if _noun(s) in other.nouns}
            | {s for s in other.scopes if _noun(s) in self.nouns}
        )
        return Grant(False, self.nouns & other.nouns, scopes)

    def covers(self, other: Grant) -> bool:
        """True when ``other`` is no broader than this grant, wildcards included.

        A key may mint only keys its effective grant covers, so a key can never widen
        itself, not even through a wildcard that grows later.
        """
        if self.everything:
            return True
        if other.everything:
            return False
        return other.nouns <= self.nouns and all(self.allows(s) for s in other.scopes)

    def expanded(self) -> frozenset[str]:
        """The concrete scopes this grant allows today."""
        if self.everything:
            return KNOWN_SCOPES
        return self.scopes.union(*(scopes_of(n) for n in self.nouns))

    def to_list(self) -> list[str]:
        """The canonical, sorted written form; ``Grant.of(g.to_list()) == g``."""
        if self.everything:
            return [ALL]
        return sorted([f"{n}:{_WILDCARD_VERB}" for n in self.nouns] + list(self.scopes))

    def __repr__(self) -> str:
        return f"Grant({self.to_list()!r})"


@functools.lru_cache(maxsize=4096)
def _grant(scopes: frozenset[str]) -> Grant:
    return Grant.of(s for s in scopes if s == ALL or s in KNOWN_SCOPES or s.endswith(":*"))


def grant_of(scopes: Iterable[str]) -> Grant:
    """The grant of written scopes, leniently: unknown ones grant nothing (a message, a stored snapshot or
    an older ceiling may carry anything), where :meth:`Grant.of` refuses them."""
    written = frozenset(scopes)
    try:
        return _grant(written)
    except ValueError:  # an unknown noun:* — drop what Grant refuses, keep the rest
        return _grant(frozenset(s for s in written if s == ALL or s in KNOWN_SCOPES))
