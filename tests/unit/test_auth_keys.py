"""API keys: the awk_<id>_<secret><checksum> format, parsing before IO, hashes, reprs without secrets."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actwheel.auth.keys import KEY_LENGTH, MalformedKey, hash_key, keys_equal, new_key, parse_key

_FORMAT = re.compile(r"awk_(?P<id>[0-9a-f]{12})_(?P<secret>[0-9A-Za-z]{43})(?P<crc>[0-9A-Za-z]{6})")
_MESSAGE = re.compile(r"^malformed API key: bad (prefix|id|secret|checksum) \(token of \d+ characters, expected 66\)$")


def test_a_new_key_has_the_documented_format() -> None:
    issued = new_key()
    match = _FORMAT.fullmatch(issued.token)
    assert match is not None
    assert match["id"] == issued.key_id
    assert len(issued.token) == KEY_LENGTH


def test_the_stored_hash_is_sha256_hex_of_the_whole_token() -> None:
    issued = new_key()
    assert issued.key_hash == hashlib.sha256(issued.token.encode()).hexdigest() == hash_key(issued.token)


def test_a_new_key_parses_back_to_its_id_and_hash() -> None:
    issued = new_key()
    parsed = parse_key(issued.token)
    assert (parsed.key_id, parsed.key_hash) == (issued.key_id, issued.key_hash)


def test_keys_are_unique_in_id_and_secret() -> None:
    issued = [new_key() for _ in range(200)]
    assert len({k.key_id for k in issued}) == 200
    assert len({k.token[17:60] for k in issued}) == 200


def test_no_repr_or_str_holds_the_token_or_its_hash() -> None:
    issued = new_key()
    for text in (repr(issued), str(issued), repr(parse_key(issued.token))):
        assert issued.key_id in text
        assert issued.token not in text
        assert issued.token[17:60] not in text
        assert issued.key_hash not in text


@pytest.mark.parametrize(
    ("mangle", "part"),
    [
        (lambda t: "awx_" + t[4:], "prefix"),
        (lambda t: "AWK_" + t[4:], "prefix"),
        (lambda t: "", "prefix"),
        (lambda t: t[:16] + "X" + t[17:], "id"),  # the separator after the id
        (lambda t: t[:4] + "G" + t[5:], "id"),  # not hex
        (lambda t: t[:4] + t[5:], "id"),  # an id one character short
        (lambda t: t[:-1], "secret"),  # truncated
        (lambda t: t + "0", "secret"),
        (lambda t: t[:20] + "_" + t[21:], "secret"),
        (lambda t: t + "\n", "secret"),
    ],
)
def test_a_malformed_token_names_the_failing_part_but_never_the_token(mangle: object, part: str) -> None:
    token = mangle(new_key().token)  # type: ignore[operator]
    with pytest.raises(MalformedKey) as caught:
        parse_key(token)
    assert caught.value.part == part
    assert caught.value.length == len(token)
    assert str(len(token)) in str(caught.value)
    if token:
        assert token not in str(caught.value)
        assert token[17:60] not in str(caught.value)


def test_malformed_key_is_a_value_error() -> None:
    assert issubclass(MalformedKey, ValueError)


@given(st.integers(min_value=17, max_value=KEY_LENGTH - 1), st.sampled_from("0123456789ABCDEFabcdefXYZxyz"))
def test_changing_any_one_secret_or_checksum_character_is_refused_by_the_checksum(index: int, char: str) -> None:
    token = new_key().token
    if token[index] == char:
        return
    changed = token[:index] + char + token[index + 1 :]
    with pytest.raises(MalformedKey) as caught:
        parse_key(changed)
    assert caught.value.part == "checksum"


@given(st.integers(min_value=4, max_value=15), st.sampled_from("0123456789abcdef"))
def test_changing_the_id_is_refused_by_the_checksum(index: int, char: str) -> None:
    token = new_key().token
    if token[index] == char:
        return
    with pytest.raises(MalformedKey) as caught:
        parse_key(token[:index] + char + token[index + 1 :])
    assert caught.value.part == "checksum"


@given(st.text(max_size=80))
def test_arbitrary_text_is_refused_or_is_a_well_formed_key(text: str) -> None:
    if _FORMAT.fullmatch(text) is None:
        with pytest.raises(MalformedKey, match=_MESSAGE):  # only the part and the length, nothing of the text
            parse_key(text)
    else:  # a well-shaped text: it parses exactly when its checksum holds
        try:
            assert parse_key(text).key_hash == hash_key(text)
        except MalformedKey as exc:
            assert exc.part == "checksum"  # noqa: PT017


def test_keys_equal_compares_hashes() -> None:
    one, two = new_key(), new_key()
    assert keys_equal(one.key_hash, parse_key(one.token).key_hash)
    assert not keys_equal(one.key_hash, two.key_hash)
    assert not keys_equal(one.key_hash, one.key_hash[:-1])
    assert not keys_equal(one.key_hash, "é" * 64)
