"""SecretStore and the resolver over the store's secrets table, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from actwheel.actions.secrets import (
    KEY_ENV,
    KEY_FILE_ENV,
    MASK,
    CipherSecretResolver,
    NoSecrets,
    SecretCipher,
)
from actwheel.actions.storage_secrets import (
    SecretStore,
    StorageSecretRepository,
    secret_resolver_from_env,
)
from actwheel.errors import Conflict, InvalidInput, NotFound, SecretKeyMissing
from actwheel.storage import Store
from actwheel.storage.records import NewPrincipal, PrincipalKind

VALUE = "s3cr3t-Value-that-must-never-leak"
KEY = SecretCipher.generate_key()


@pytest.fixture
def secrets(store: Store) -> SecretStore:
    return SecretStore(store, SecretCipher.from_env({KEY_ENV: KEY}))


async def test_a_stored_secret_is_encrypted_and_resolves_for_its_owner_only(
    secrets: SecretStore, store: Store
) -> None:
    stored = await secrets.put("alice", "smtp_password", VALUE)
    assert stored.as_dict() == {
        "name": "smtp_password",
        "value": MASK,
        "version": 1,
        "reference": {"$secret": "smtp_password"},
    }
    async with store.transaction() as tx:
        blob = (await tx.secrets.get("alice", "smtp_password")).ciphertext
    assert VALUE.encode() not in blob
    assert await secrets.resolver().resolve("smtp_password", "alice") == VALUE
    with pytest.raises(NotFound):
        await secrets.resolver().resolve("smtp_password", "bob")
    assert await secrets.names("alice") == ["smtp_password"]
    assert await secrets.names("bob") == []


async def test_rotate_replaces_the_value_and_checks_the_version(secrets: SecretStore) -> None:
    await secrets.put("alice", "token", VALUE)
    rotated = await secrets.rotate("alice", "token", "new-value", expected_version=1)
    assert rotated.version == 2
    assert await secrets.resolver().resolve("token", "alice") == "new-value"
    with pytest.raises(Conflict):
        await secrets.rotate("alice", "token", "other", expected_version=1)
    with pytest.raises(NotFound):
        await secrets.rotate("alice", "missing", "x")


async def test_put_twice_is_a_conflict_and_delete_removes(secrets: SecretStore) -> None:
    await secrets.put("alice", "token", VALUE)
    with pytest.raises(Conflict, match="rotate"):
        await secrets.put("alice", "token", "other")
    await secrets.delete("alice", "token")
    with pytest.raises(NotFound):
        await secrets.resolver().resolve("token", "alice")
    with pytest.raises(NotFound):
        await secrets.delete("alice", "token")


async def test_bad_names_and_values_are_refused_without_echoing_the_value(secrets: SecretStore) -> None:
    with pytest.raises(InvalidInput) as caught:
        await secrets.put("alice", "no spaces/please", VALUE)
    assert (caught.value.field, caught.value.value) == ("name", "no spaces/please")
    assert VALUE not in str(caught.value)
    with pytest.raises(InvalidInput) as caught:
        await secrets.put("alice", "ok", "")
    assert caught.value.field == "value"
    with pytest.raises(InvalidInput) as caught:
        await secrets.put("alice", "ok", VALUE * 3000)
    assert (caught.value.field, caught.value.value) == ("value", MASK)
    assert VALUE not in str(caught.value)
    assert await secrets.names("alice") == []


async def test_a_value_never_reaches_a_repr_or_a_log_line(secrets: SecretStore, store: Store) -> None:
    with capture_logs() as logs:
        stored = await secrets.put("alice", "token", VALUE)
        resolver = secrets.resolver()
        await resolver.resolve("token", "alice")
        async with store.transaction() as tx:
            record = await tx.secrets.get("alice", "token")
    for text in (
        repr(secrets),
        repr(stored),
        repr(resolver),
        repr(record),
        repr(StorageSecretRepository(store)),
        str(logs),
    ):
        assert VALUE not in text
        assert KEY not in text


async def test_a_wrong_key_cannot_decrypt(secrets: SecretStore, store: Store) -> None:
    await secrets.put("alice", "token", VALUE)
    other = SecretStore(store, SecretCipher.from_env({KEY_ENV: SecretCipher.generate_key()}))
    with pytest.raises(InvalidInput) as caught:
        await other.resolver().resolve("token", "alice")
    assert VALUE not in str(caught.value)


# --- choosing the resolver at start -----------------------------------------------------------


async def test_no_key_and_no_secrets_means_no_secrets(store: Store) -> None:
    resolver = await secret_resolver_from_env(store, {}, owners=["local"])
    assert isinstance(resolver, NoSecrets)


async def test_a_configured_key_reads_the_table(secrets: SecretStore, store: Store, tmp_path: Path) -> None:
    await secrets.put("local", "token", VALUE)
    resolver = await secret_resolver_from_env(store, {KEY_ENV: KEY})
    assert isinstance(resolver, CipherSecretResolver)
    assert await resolver.resolve("token", "local") == VALUE
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    from_file = await secret_resolver_from_env(store, {KEY_FILE_ENV: str(key_file)})
    assert await from_file.resolve("token", "local") == VALUE


async def test_stored_secrets_without_a_key_refuse_to_start(secrets: SecretStore, store: Store) -> None:
    await secrets.put("local", "token", VALUE)
    with pytest.raises(SecretKeyMissing) as caught:
        await secret_resolver_from_env(store, {}, owners=["local"])
    assert caught.value.field == KEY_ENV
    assert "local" in str(caught.value)
    assert VALUE not in str(caught.value)


async def test_secrets_of_a_known_principal_also_refuse_to_start(secrets: SecretStore, store: Store) -> None:
    async with store.transaction() as tx:
        await tx.principals.create(NewPrincipal(id="carol", kind=PrincipalKind.USER, scopes=("*",)))
    await secrets.put("carol", "token", VALUE)
    with pytest.raises(SecretKeyMissing, match="carol"):
        await secret_resolver_from_env(store, {})


async def test_a_malformed_key_is_a_clear_error(store: Store) -> None:
    with pytest.raises(InvalidInput) as caught:
        await secret_resolver_from_env(store, {KEY_ENV: "not-base64!"})
    assert caught.value.field == KEY_ENV
    assert "not-base64" not in str(caught.value)
