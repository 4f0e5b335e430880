"""The scope algebra: known scopes, validation where scopes enter, and grants that only narrow."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actwheel.auth.scopes import KNOWN_SCOPES, SCOPE_NOUNS, Grant, scopes_of, validate_scopes
from actwheel.errors import InvalidInput

_WRITTEN = sorted(KNOWN_SCOPES) + [f"{n}:*" for n in sorted(SCOPE_NOUNS)] + ["*"]
grants = st.lists(st.sampled_from(_WRITTEN), max_size=8).map(Grant.of)
concrete = st.sampled_from(sorted(KNOWN_SCOPES))


def test_the_known_scopes_are_the_documented_ones() -> None:
    assert {
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
        "function:invoke",
        "webhook:call",
        "notification:send",
    } == KNOWN_SCOPES


def test_a_noun_wildcard_means_every_scope_of_that_noun() -> None:
    assert Grant.of(["automation:*"]).expanded() == {"automation:read", "automation:write"}
    assert Grant.of(["ontology:*"]).expanded() == {"ontology:read", "ontology:write", "ontology:schema"}
    assert scopes_of("run") == {"run:read", "run:write"}


def test_all_allows_every_known_scope_and_nothing_unknown() -> None:
    everything = Grant.of(["*"])
    assert everything.expanded() == KNOWN_SCOPES
    assert all(everything.allows(s) for s in KNOWN_SCOPES)
    assert not everything.allows("acme:deploy")
    assert not everything.allows("automation:*")


def test_allows_and_missing() -> None:
    grant = Grant.of(["automation:*", "run:read"])
    assert grant.allows("automation:write")
    assert not grant.allows("secret:read")
    assert grant.missing(["webhook:call", "run:read", "secret:read", "webhook:call"]) == ["secret:read", "webhook:call"]
    assert grant.missing([]) == []


def test_the_written_form_is_canonical() -> None:
    grant = Grant.of(["run:read", "automation:read", "automation:*", "run:read"])
    assert grant.to_list() == ["automation:*", "run:read"]
    assert Grant.of(["run:read", "*"]).to_list() == ["*"]
    assert Grant.of([]).to_list() == []
    assert repr(grant) == "Grant(['automation:*', 'run:read'])"


def test_intersection_examples() -> None:
    assert Grant.of(["*"]).intersect(Grant.of(["run:read"])) == Grant.of(["run:read"])
    assert Grant.of(["automation:*"]).intersect(Grant.of(["automation:read"])) == Grant.of(["automation:read"])
    assert Grant.of(["automation:*", "run:read"]).intersect(Grant.of(["automation:*"])) == Grant.of(["automation:*"])
    assert Grant.of(["secret:read"]).intersect(Grant.of(["secret:write"])) == Grant.none()


def test_a_concrete_grant_does_not_cover_the_wildcard_it_happens_to_equal_today() -> None:
    concrete_pair = Grant.of(["automation:read", "automation:write"])
    wildcard = Grant.of(["automation:*"])
    assert concrete_pair.expanded() == wildcard.expanded()
    assert wildcard.covers(concrete_pair)
    assert not concrete_pair.covers(wildcard)
    assert not Grant.of([f"{n}:*" for n in SCOPE_NOUNS]).covers(Grant.all())
    assert Grant.all().covers(Grant.of([f"{n}:*" for n in SCOPE_NOUNS]))


@given(grants, grants)
def test_intersection_is_commutative(a: Grant, b: Grant) -> None:
    assert a.intersect(b) == b.intersect(a)


@given(grants, grants, grants)
def test_intersection_is_associative(a: Grant, b: Grant, c: Grant) -> None:
    assert a.intersect(b).intersect(c) == a.intersect(b.intersect(c))


@given(grants)
def test_intersection_is_idempotent_and_all_is_its_identity(a: Grant) -> None:
    assert a.intersect(a) == a
    assert a.intersect(Grant.all()) == a == Grant.all().intersect(a)
    assert a.intersect(Grant.none()) == Grant.none()


@given(grants, grants, concrete)
def test_the_intersection_allows_a_scope_iff_both_do(a: Grant, b: Grant, scope: str) -> None:
    assert a.intersect(b).allows(scope) == (a.allows(scope) and b.allows(scope))


@given(grants, grants)
def test_the_intersection_allows_exactly_the_common_scopes(a: Grant, b: Grant) -> None:
    assert a.intersect(b).expanded() == a.expanded() & b.expanded()


@given(grants, grants)
def test_covers_is_consistent_with_intersect(a: Grant, b: Grant) -> None:
    assert a.covers(b) == (a.intersect(b) == b)
    if a.covers(b):
        assert b.expanded() <= a.expanded()


@given(grants, grants)
def test_an_intersection_is_covered_by_both_sides(a: Grant, b: Grant) -> None:
    both = a.intersect(b)
    assert a.covers(both)
    assert b.covers(both)


@given(grants)
def test_the_written_form_round_trips(a: Grant) -> None:
    assert Grant.of(a.to_list()) == a
    assert a.to_list() == sorted(a.to_list())


@given(grants, st.lists(concrete, max_size=6))
def test_missing_lists_exactly_the_scopes_not_allowed(a: Grant, required: list[str]) -> None:
    missing = a.missing(required)
    assert missing == sorted(set(missing))
    assert set(missing) == {s for s in required if s not in a.expanded()}


def test_validate_scopes_accepts_known_scopes_and_noun_wildcards() -> None:
    assert validate_scopes(["run:read", "automation:*", "run:read"], "scopes") == {"run:read", "automation:*"}
    assert validate_scopes([], "scopes") == frozenset()


@pytest.mark.parametrize(
    ("values", "field", "value"),
    [
        ("run:read", "scopes", "run:read"),
        ({"run:read": True}, "scopes", {"run:read": True}),
        (None, "scopes", None),
        (["run:read", "run:delete"], "scopes[1]", "run:delete"),
        (["acme:*"], "scopes[0]", "acme:*"),
        (["automation"], "scopes[0]", "automation"),
        (["*"], "scopes[0]", "*"),
        ([7], "scopes[0]", 7),
        (["Run:read"], "scopes[0]", "Run:read"),
    ],
)
def test_validate_scopes_names_the_field_and_the_bad_value(values: Any, field: str, value: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_scopes(values, "scopes")
    assert (caught.value.field, caught.value.value) == (field, value)
    assert field in str(caught.value)


def test_validate_scopes_reports_every_bad_entry() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_scopes(["bad:one", "run:read", "bad:two"], "body.scopes")
    assert [e.field for e in caught.value.errors] == ["body.scopes[0]", "body.scopes[2]"]
    assert "run:read" in caught.value.expected


def test_all_is_accepted_only_when_allowed() -> None:
    assert validate_scopes(["*"], "scopes", allow_all=True) == {"*"}
    assert Grant.of(["*"]) == Grant.all()


def test_a_grant_refuses_an_unknown_scope() -> None:
    with pytest.raises(InvalidInput) as caught:
        Grant.of(["run:read", "run:delete"], field="ceiling")
    assert caught.value.field == "ceiling[1]"


def test_grants_are_frozen_and_hashable() -> None:
    grant = Grant.of(["run:read"])
    with pytest.raises(AttributeError):
        grant.everything = True  # type: ignore[misc]
    assert {grant, Grant.of(["run:read"])} == {grant}


def test_the_auth_package_is_pure() -> None:
    drivers = ("aio_pika", "asyncpg", "aiosqlite", "httpx")
    code = f"import actwheel.auth, sys; print(sorted(m for m in {drivers!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"
