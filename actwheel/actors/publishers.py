"""Who published a command or an action request: the service principal behind an AMQP ``user_id``.

Commands and action requests arrive from other services. On the amqp bus the publisher's identity
is the RabbitMQ user of its connection, carried in the ``user_id`` property: RabbitMQ refuses a
publish whose ``user_id`` is not the connection's own user, so a consumer may believe it (a user
with the ``impersonator`` tag could forge it: give that tag to nobody). That user must be a
**service** principal of the same id, active, that may act for the message's owner (its
``on_behalf_of``, ``*``: any owner); its ``scopes`` are the ceiling the service layer checks the
command against, exactly as it checks an API key's.

The memory bus is in-process and trusted: a delivery from it needs no publisher (see
``docs/bus.md``).
"""

from __future__ import annotations

from actwheel.auth.scopes import Grant, grant_of
from actwheel.bus.base import Delivery
from actwheel.errors import NotFound, PermissionDenied, Unauthenticated
from actwheel.service.caller import Caller
from actwheel.storage.base import Store
from actwheel.storage.records import Principal, PrincipalKind, PrincipalStatus

__all__ = ["ANY_OWNER", "authorize_publisher", "publisher_caller", "service_ceiling"]

#: An ``on_behalf_of`` entry that lets a service act for every owner.
ANY_OWNER = "*"
#: Scopes a bus caller never holds: a message acts for the one owner it names, never as an admin
#: that reaches other owners' records by id.
_ADMIN_NOUN = "admin:"


async def authorize_publisher(store: Store, delivery: Delivery, owner_id: str) -> Caller | None:
    """The caller a command or action request for ``owner_id`` acts as; ``None`` for a trusted
    (in-process) delivery, which acts as the owner itself, as before.

    :raises Unauthenticated: no ``user_id``, or one that is not an active service principal
    :raises PermissionDenied: the service may not act for ``owner_id``
    """
    if delivery.trusted:
        return None
    if not delivery.publisher:
        raise Unauthenticated("the message has no user_id: publish with user_id = your RabbitMQ user",
                              token_sent=False)
    async with store.transaction() as tx:
        try:
            principal = await tx.principals.get(delivery.publisher)
        except NotFound:
            raise Unauthenticated(f"publisher {delivery.publisher!r} is not a known service",
                                  token_sent=True) from None
    return publisher_caller(principal, owner_id)


def publisher_caller(principal: Principal, owner_id: str) -> Caller:
    """The caller ``principal`` (the publisher) acts as for ``owner_id``.

    :raises Unauthenticated: ``principal`` is not a service, or it is banned
    :raises PermissionDenied: ``owner_id`` is not in its ``on_behalf_of``
    """
    if principal.kind is not PrincipalKind.SERVICE:
        raise Unauthenticated(f"publisher {principal.id!r} is a {principal.kind.value}, not a service",
                              token_sent=True)
    if principal.status is not PrincipalStatus.ACTIVE:
        raise Unauthenticated(f"publisher {principal.id!r} is banned", token_sent=True)
    if ANY_OWNER not in principal.on_behalf_of and owner_id not in principal.on_behalf_of:
        raise PermissionDenied(principal.id, f"act for owner {owner_id!r}",
                               reason="the owner is not in the service's on_behalf_of")
    return Caller(owner_id, service_ceiling(principal.scopes), principal_id=principal.id, kind="service")


def service_ceiling(scopes: tuple[str, ...]) -> frozenset[str]:
    """A service's ceiling as concrete scopes, without the admin ones."""
    grant: Grant = grant_of(scopes)
    return frozenset(s for s in grant.expanded() if not s.startswith(_ADMIN_NOUN))
