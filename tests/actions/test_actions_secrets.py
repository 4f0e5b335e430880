"""Secrets: encryption at rest, references, masking, resolution and scrubbing."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from actwheel.actions.secrets import (
    KEY_ENV,
    KEY_FILE_ENV,
    CipherSecretResolver,
    InMemorySecretRepository,
    NoSecrets,
    SecretCipher,
    find_secret_refs,
    mask_secrets,
    resolve_config,
)
from actwheel.errors import InvalidInput, NotFound

VALUE = "s3cr3t-value-XYZ"


def _cipher() -> SecretCipher:
    return SecretCipher.from_env({KEY_ENV: SecretCipher.generate_key()})


def test_round_trip_and_binding_to_owner_and_name() -> None:
    cipher = _cipher()
    blob = cipher.encrypt(VALUE, owner_id="alice", name="token")
    assert VALUE.encode() not in blob
    assert cipher.decrypt(blob, owner_id="alice", name="token") == VALUE
    with pytest.raises(InvalidInput):
        cipher.decrypt(blob, owner_id="bob", name="token")
    with pytest.raises(InvalidInput):
        _cipher().decrypt(blob, owner_id="alice", name="token")


def test_refuses_to_construct_without_a_valid_key(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        SecretCipher.from_env({})
    assert err.value.field == KEY_ENV
    bad = base64.b64encode(b"short-key-material").decode()
    with pytest.raises(InvalidInput) as err:
        SecretCipher.from_env({KEY_ENV: bad})
    assert bad not in str(err.value)
    assert "32 bytes" in str(err.value)
    with pytest.raises(InvalidInput):
        SecretCipher(b"x" * 31)


def test_key_file(tmp_path: Path) -> None:
    key = SecretCipher.generate_key()
    path = tmp_path / "key"
    path.write_text(key + "\n")
    cipher = SecretCipher.from_env({KEY_FILE_ENV: str(path)})
    assert cipher.decrypt(cipher.encrypt("v", owner_id="o", name="n"), owner_id="o", name="n") == "v"
    assert key not in repr(cipher)
    with pytest.raises(InvalidInput) as err:
        SecretCipher.from_env({KEY_FILE_ENV: str(tmp_path / "missing")})
    assert err.value.field == KEY_FILE_ENV


async def test_resolver_over_a_repository_of_ciphertexts() -> None:
    repository = InMemorySecretRepository(_cipher())
    repository.put("alice", "token", VALUE)
    resolver = CipherSecretResolver(repository, repository._cipher)
    assert await resolver.resolve("token", "alice") == VALUE
    with pytest.raises(NotFound):
        await resolver.resolve("token", "bob")
    with pytest.raises(NotFound):
        await NoSecrets().resolve("token", "alice")
    assert VALUE not in repr(resolver) + repr(repository)


def test_find_and_mask() -> None:
    config = {
        "url": "https://x",
        "headers": {"Authorization": {"$secret": "token"}, "X-Api-Key": "literal!"},
        "list": [{"$secret": "other"}],
        "password": "hunter2",
    }
    assert find_secret_refs(config) == [("headers.Authorization", "token"), ("list[0]", "other")]
    masked = mask_secrets(config)
    assert masked["headers"]["Authorization"] == {"$secret": "token"}
    assert masked["headers"]["X-Api-Key"] == "***"
    assert masked["password"] == "***"
    assert masked["url"] == "https://x"
    assert config["password"] == "hunter2"  # the input is not modified


async def test_resolve_config_and_scrub() -> None:
    repository = InMemorySecretRepository(_cipher())
    repository.put("alice", "token", VALUE)
    resolver = CipherSecretResolver(repository, repository._cipher)
    config = {"headers": {"Authorization": {"$secret": "token"}}}
    resolved = await resolve_config(config, resolver, "alice")
    assert resolved.config == {"headers": {"Authorization": VALUE}}
    assert config == {"headers": {"Authorization": {"$secret": "token"}}}
    assert VALUE not in repr(resolved)
    assert resolved.scrub({"echo": f"you sent Bearer {VALUE}", "n": [VALUE]}) == {
        "echo": "you sent Bearer ***",
        "n": ["***"],
    }
    with pytest.raises(NotFound) as err:
        await resolve_config({"x": {"$secret": "missing"}}, resolver, "alice")
    assert "missing" in str(err.value)


def test_context_repr_shows_no_secret_material() -> None:
    from actions_support import make_ctx

    from actwheel.actions.secrets import StaticSecrets

    ctx = make_ctx(secrets=StaticSecrets({("alice", "token"): VALUE}))
    assert VALUE not in repr(ctx)
    assert "run-1" in repr(ctx)
