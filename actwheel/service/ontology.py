"""The ontology and secrets use cases every face shares.

The ontology is shared by the installation (one set of object types, objects and relations), guarded
by the ``ontology:*`` scopes and the pipeline's ABAC rules, not by owner: reading needs
``ontology:read``, defining a type ``ontology:schema``, and changing objects and relations happens
only through actions (``ontology:write``, checked when the run is dispatched). Its changes go
through :class:`~actwheel.actions.storage_ontology.StorageOntology`, which writes their CDC events.
Secrets belong to their owner; values are encrypted with the server's key and never
answered back (only a name and a mask).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actwheel.actions.ontology_port import ObjectType, OntologyObject, Relation
from actwheel.actions.secrets import MASK, SecretCipher
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.actions.storage_secrets import SecretStore, StoredSecret, validate_secret_name
from actwheel.errors import Conflict, InvalidInput, NotAvailable
from actwheel.service.authorize import require
from actwheel.service.caller import Caller
from actwheel.storage.base import Store

__all__ = ["OntologyService", "SecretService"]

READ = "ontology:read"


class OntologyService:
    def __init__(self, *, ontology: StorageOntology) -> None:
        self._ontology = ontology

    async def define_type(self, caller: Caller, spec: Mapping[str, Any]) -> tuple[ObjectType, int]:
        """Define or redefine an object type; its version (1 for a new one).

        :raises InvalidInput: a bad spec, naming the field
        """
        require(caller, "ontology.define_type", ["ontology:schema"])
        return await self._ontology.define_type(ObjectType.from_spec(spec))

    async def list_types(self, caller: Caller) -> list[tuple[ObjectType, int]]:
        require(caller, "ontology.read", [READ])
        return await self._ontology.list_types()

    async def list_objects(self, caller: Caller, object_type: str | None, *, include_deleted: bool,
                           limit: int) -> list[OntologyObject]:
        require(caller, "ontology.read", [READ])
        return await self._ontology.list_objects(object_type, include_deleted=include_deleted, limit=limit)

    async def get_object(self, caller: Caller, object_id: str, *, include_deleted: bool) -> OntologyObject:
        """:raises NotFound: no such object (or soft-deleted and not ``include_deleted``)"""
        require(caller, "ontology.read", [READ])
        return await self._ontology.get_object(object_id, include_deleted=include_deleted)

    async def list_relations(self, caller: Caller, *, source: str | None, target: str | None,
                             limit: int) -> list[Relation]:
        """:raises InvalidInput: neither ``source`` nor ``target``"""
        require(caller, "ontology.read", [READ])
        if source is None and target is None:
            raise InvalidInput("source", None, "an object id (or target=<object id>)")
        return await self._ontology.list_relations(source=source, target=target, limit=limit)


class SecretService:
    """Store secrets (needs the server's key) and list their names (needs none: names are not secret)."""

    def __init__(self, *, store: Store, writer: Callable[[], SecretStore | None]) -> None:
        """``writer``: the engine's secret store once it has a key, else ``None`` (one is then made from the
        environment at first use)."""
        self._store = store
        self._writer = writer
        self._fallback: SecretStore | None = None

    async def put(self, caller: Caller, name: Any, value: Any, *, replace: Any = False) -> tuple[StoredSecret, bool]:
        """Store ``name`` (or, with ``replace``, rotate it); whether it was new.

        :raises InvalidInput: a bad name, value (never echoed: a mask or its type) or ``replace``
        :raises Conflict: ``name`` exists and ``replace`` is false
        :raises NotAvailable: the server has no secret key
        """
        require(caller, "secret.write", ["secret:write"])
        name = validate_secret_name(name)
        if not isinstance(replace, bool):
            raise InvalidInput("replace", replace, "true or false")
        if not isinstance(value, str) or not value:
            raise InvalidInput("value", MASK if isinstance(value, str) else type(value).__name__,
                               "a non-empty string")
        writer = self._secret_store()
        try:
            return await writer.put(caller.owner_id, name, value), True
        except Conflict:
            if not replace:
                raise
        return await writer.rotate(caller.owner_id, name, value), False

    async def names(self, caller: Caller) -> list[str]:
        """The caller's secret names, sorted."""
        require(caller, "secret.read", ["secret:read"])
        async with self._store.transaction() as tx:
            return await tx.secrets.names(caller.owner_id)

    def _secret_store(self) -> SecretStore:
        """:raises NotAvailable: no secret key is configured on this server"""
        configured = self._writer() or self._fallback
        if configured is not None:
            return configured
        try:
            self._fallback = SecretStore(self._store, SecretCipher.from_env())
        except InvalidInput as exc:
            raise NotAvailable("storing secrets", f"the server has no secret key: {exc.expected}") from None
        return self._fallback
