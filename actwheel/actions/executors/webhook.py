"""``webhook.call``: an HTTP request to a receiver, signed, retried and guarded against SSRF.

SSRF guard: before every hop (the first request and each redirect, which are
followed by hand) the host is resolved and *every* address must be globally
routable — loopback, private, link-local, multicast, reserved, unspecified and
cloud-metadata addresses are refused — unless :class:`WebhookSettings` names the
host or the network. The request then goes to the checked IP (``Host`` header and
TLS SNI keep the name), so a DNS answer that changes between check and connect
(rebinding) cannot redirect it.

Signature: ``X-Actwheel-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, f"{t}.{body}")>``;
a receiver recomputes it and rejects stale ``t`` to stop replays (:func:`verify_signature`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import random
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import httpx
import orjson

from actwheel.actions.base import ActionContext, ActionDefinition, ActionResult, Capabilities, Idempotency
from actwheel.actions.secrets import ResolvedConfig, resolve_config
from actwheel.backoff import EQUAL_JITTER, NO_JITTER, exponential_delay
from actwheel.clock import Clock
from actwheel.errors import DestinationRefused, FieldError, NotFound

__all__ = [
    "SIGNATURE_HEADER",
    "OutgoingRequest",
    "WebhookCall",
    "WebhookClient",
    "WebhookDelivery",
    "WebhookRetry",
    "WebhookSettings",
    "blocked_reason",
    "sign",
    "verify_signature",
]

SIGNATURE_HEADER = "X-Actwheel-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_REDIRECTS = {301, 302, 303, 307, 308}
_RETRY_STATUSES = {408, 429}
_DROP_ON_CROSS_ORIGIN = {"authorization", SIGNATURE_HEADER.lower(), "cookie"}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True, kw_only=True)
class WebhookSettings:
    """Server-side webhook settings (never from an action config).

    :ivar allow_hosts: host names allowed even if they resolve to non-public addresses
    :ivar allow_networks: networks (``"10.1.0.0/16"``) whose addresses are allowed
    """

    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[str | IPNetwork, ...] = ()
    max_response_bytes: int = 4096
    max_redirects: int = 5
    max_retry_after_s: float = 300.0
    user_agent: str = "actwheel-webhook/0.1"
    networks: tuple[IPNetwork, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_hosts", frozenset(h.lower() for h in self.allow_hosts))
        parsed = tuple(ipaddress.ip_network(str(n), strict=False) for n in self.allow_networks)
        object.__setattr__(self, "networks", parsed)

    def host_allowed(self, host: str) -> bool:
        return host.lower() in self.allow_hosts

    def address_allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)


def blocked_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` must not be called (``None`` when it is a public unicast address)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return blocked_reason(ip.ipv4_mapped)
    checks = [
        (ip in _METADATA, "a cloud metadata address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_private, "a private address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a globally routable address"),
    ]
    return next((reason for hit, reason in checks if hit), None)


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, via the loop's ``getaddrinfo``."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class Destination:
    url: httpx.URL
    ip: str


async def check_destination(url: httpx.URL, settings: WebhookSettings, resolver: Resolver) -> Destination:
    """Resolve ``url``'s host and apply the SSRF rules.

    :raises DestinationRefused: bad scheme, unresolvable host, or a refused address
    """
    if url.scheme not in ("http", "https") or not url.host:
        raise DestinationRefused("url", str(url), "an http:// or https:// URL with a host")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in await resolver(url.host, port)]
    except (OSError, ValueError) as exc:
        raise DestinationRefused("url", str(url), f"a resolvable host ({exc})") from None
    if not addresses:
        raise DestinationRefused("url", str(url), "a host that resolves to an address")
    if not settings.host_allowed(url.host):
        _refuse_blocked(url, addresses, settings)
    return Destination(url, str(addresses[0]))


def _refuse_blocked(url: httpx.URL, addresses: list[IPAddress], settings: WebhookSettings) -> None:
    for ip in addresses:
        reason = blocked_reason(ip)
        if reason and not settings.address_allowed(ip):
            raise DestinationRefused(
                "url",
                str(url),
                f"a public address; {url.host} resolves to {ip}, {reason} (allow it in the server's "
                "webhook allow_hosts / allow_networks if intended)",
            )


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(secret: str, header: str, body: bytes, now: float, tolerance_s: float = 300.0) -> bool:
    """Receiver side: True if ``header`` signs ``body`` with ``secret`` and ``t`` is within tolerance."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    if not parts.get("t", "").isdigit() or "v1" not in parts:
        return False
    timestamp = int(parts["t"])
    expected = sign(secret, timestamp, body).split("v1=", 1)[1]
    return abs(now - timestamp) <= tolerance_s and hmac.compare_digest(expected, parts["v1"])


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookRetry:
    """Exponential backoff with jitter for 5xx, 408, 429 and connection errors."""

    max_attempts: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    jitter: bool = True

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """The wait after failed attempt ``attempt`` (1-based): base·2^(n-1), capped, ×U(0.5, 1) if jitter."""
        jitter = EQUAL_JITTER if self.jitter else NO_JITTER
        return exponential_delay(attempt, base_s=self.backoff_base_s, max_s=self.backoff_max_s, jitter=jitter, rng=rng)


@dataclass(frozen=True, kw_only=True)
class OutgoingRequest:
    method: str
    url: str
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)
    timeout_s: float
    signing_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class WebhookDelivery:
    """What happened: the final response (or the last error) and every attempt."""

    status_code: int | None
    body: str
    truncated: bool
    attempts: list[dict[str, Any]]
    error: str | None = None
    retryable: bool = False

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True, slots=True)
class _Hop:
    """One request on the redirect chain; ``secret`` signs it (dropped on a cross-origin hop)."""

    method: str
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)
    secret: str | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class _Response:
    status_code: int
    headers: httpx.Headers
    body: bytes
    truncated: bool


def _retry_after(headers: httpx.Headers, now: datetime) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    if raw.strip().isdigit():
        return float(raw.strip())
    try:
        return max(0.0, (parsedate_to_datetime(raw) - now).total_seconds())
    except (TypeError, ValueError):
        return None


class WebhookClient:
    """Sends one :class:`OutgoingRequest` with the SSRF guard, manual redirects and retries."""

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        resolver: Resolver | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._resolver = resolver or system_resolver
        self._transport = transport
        self._rng = rng or random.Random()

    async def send(
        self, request: OutgoingRequest, *, clock: Clock, retry: WebhookRetry, budget_s: float | None = None
    ) -> WebhookDelivery:
        """Deliver with retries; waits use ``clock`` and stop before exceeding ``budget_s``.

        :raises DestinationRefused: the SSRF guard refused the URL or a redirect
        """
        attempts: list[dict[str, Any]] = []
        started = clock.now()
        async with httpx.AsyncClient(transport=self._transport, follow_redirects=False, trust_env=False) as client:
            for attempt in range(1, retry.max_attempts + 1):
                delivery, wait = await self._attempt(client, request, clock, attempt, retry)
                attempts.append({"attempt": attempt, "status_code": delivery.status_code, "error": delivery.error})
                if wait is None or attempt == retry.max_attempts:
                    return replace(delivery, attempts=attempts)
                spent = (clock.now() - started).total_seconds()
                if wait > self.settings.max_retry_after_s or (budget_s is not None and spent + wait > budget_s):
                    return replace(delivery, attempts=attempts)
                attempts[-1]["wait_s"] = round(wait, 3)
                await clock.sleep(wait)
        raise AssertionError("unreachable: the loop returns on its last attempt")

    async def _attempt(
        self,
        client: httpx.AsyncClient,
        request: OutgoingRequest,
        clock: Clock,
        attempt: int,
        retry: WebhookRetry,
    ) -> tuple[WebhookDelivery, float | None]:
        """One attempt; returns the delivery and how long to wait before retrying (``None``: don't)."""
        try:
            response = await self._follow(client, request, clock)
        except httpx.TransportError as exc:
            failed = WebhookDelivery(
                status_code=None,
                body="",
                truncated=False,
                attempts=[],
                error=f"{type(exc).__name__}: {exc}",
                retryable=True,
            )
            return failed, retry.backoff(attempt, self._rng)
        delivery = WebhookDelivery(
            status_code=response.status_code,
            body=response.body.decode("utf-8", "replace"),
            truncated=response.truncated,
            attempts=[],
            retryable=response.status_code >= 500 or response.status_code in _RETRY_STATUSES,
        )
        if not delivery.retryable:
            return delivery, None
        hinted = _retry_after(response.headers, clock.now())
        return delivery, hinted if hinted is not None else retry.backoff(attempt, self._rng)

    async def _follow(self, client: httpx.AsyncClient, request: OutgoingRequest, clock: Clock) -> _Response:
        url, method, body, headers = (
            httpx.URL(request.url),
            request.method,
            request.body,
            dict(request.headers),
        )
        secret = request.signing_secret
        for _ in range(self.settings.max_redirects + 1):
            destination = await check_destination(url, self.settings, self._resolver)
            response = await self._send_once(
                client, destination, _Hop(method, headers, body, secret), request.timeout_s, clock
            )
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            next_url = url.join(location)
            method, body = _redirected_method(response.status_code, method, body)
            if not _same_origin(url, next_url):
                headers, secret = _without_credentials(headers), None
            url = next_url
        raise DestinationRefused("url", request.url, f"at most {self.settings.max_redirects} redirects")

    async def _send_once(
        self, client: httpx.AsyncClient, destination: Destination, hop: _Hop, timeout_s: float, clock: Clock
    ) -> _Response:
        url = destination.url
        wire_headers = {**hop.headers, "Host": _host_header(url)}
        if hop.secret:
            wire_headers[SIGNATURE_HEADER] = sign(hop.secret, int(clock.now().timestamp()), hop.body)
        outgoing = client.build_request(
            hop.method,
            url.copy_with(host=destination.ip),
            headers=wire_headers,
            content=hop.body or None,
            timeout=timeout_s,
            extensions={"sni_hostname": url.host},
        )
        response = await client.send(outgoing, stream=True)
        try:
            raw, truncated = await _read_limited(response, self.settings.max_response_bytes)
        finally:
            await response.aclose()
        return _Response(response.status_code, response.headers, raw, truncated)


async def _read_limited(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _host_header(url: httpx.URL) -> str:
    default = {"http": 80, "https": 443}.get(url.scheme)
    host = f"[{url.host}]" if ":" in url.host else url.host
    return host if url.port in (None, default) else f"{host}:{url.port}"


def _redirected_method(status: int, method: str, body: bytes) -> tuple[str, bytes]:
    if status == 303 or (status in (301, 302) and method == "POST"):
        return ("GET" if method != "HEAD" else "HEAD"), b""
    return method, body


def _same_origin(old: httpx.URL, new: httpx.URL) -> bool:
    return (old.scheme, old.host, old.port) == (new.scheme, new.host, new.port)


def _without_credentials(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _DROP_ON_CROSS_ORIGIN}


_SECRET_OR_STRING = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "required": ["$secret"],
            "additionalProperties": False,
            "properties": {"$secret": {"type": "string", "minLength": 1}},
        },
    ]
}


class WebhookCall(ActionDefinition):
    type = "webhook.call"
    aliases = ("Webhook",)
    display_name = "Call webhook"
    description = (
        "Send an HTTP request (`method`, default POST) with a JSON `payload` to `url`. Optional `headers` "
        '(values may be secret references {"$secret": name}), `signing_secret` (a secret reference; adds '
        "X-Actwheel-Signature: t=<unix>,v1=<HMAC-SHA256 of '<t>.<body>'>), `timeout` per attempt, "
        "`max_attempts` with exponential backoff for 5xx/408/429/connection errors (Retry-After honoured). "
        "Every request carries an Idempotency-Key derived from the run; set "
        "`receiver_honours_idempotency_key: true` if the receiver deduplicates on it. Private, loopback, "
        "link-local and metadata addresses are refused unless the server allows them."
    )
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["url"],
        "additionalProperties": False,
        "properties": {
            "url": _SECRET_OR_STRING,
            "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "headers": {"type": "object", "additionalProperties": _SECRET_OR_STRING},
            "payload": {},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 300},
            "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10},
            "backoff_base": {"type": "number", "minimum": 0, "maximum": 60},
            "backoff_max": {"type": "number", "minimum": 0, "maximum": 3600},
            "signing_secret": _SECRET_OR_STRING["anyOf"][1],
            "receiver_honours_idempotency_key": {"type": "boolean"},
        },
    }
    idempotency = Idempotency.BEST_EFFORT
    required_scopes = frozenset({"webhook:call"})
    capabilities = Capabilities(compensable=False, dry_run=True, timeout_control=True, parallel_safe=True)

    def __init__(self, settings: WebhookSettings, *, client: WebhookClient | None = None) -> None:
        self.settings = settings
        self.client = client or WebhookClient(settings)

    def check(self, config: Mapping[str, Any]) -> list[FieldError]:
        errors: list[FieldError] = []
        for name in config.get("headers", {}):
            if name.lower() in (
                "host",
                "content-length",
                SIGNATURE_HEADER.lower(),
                IDEMPOTENCY_HEADER.lower(),
            ):
                errors.append(FieldError(f"headers.{name}", name, "a header actwheel does not set itself"))
        if isinstance(config["url"], str):
            url = httpx.URL(config["url"])
            if url.scheme not in ("http", "https") or not url.host:
                errors.append(FieldError("url", config["url"], "an http:// or https:// URL with a host"))
        return errors

    def idempotency_for(self, config: Mapping[str, Any]) -> Idempotency:
        honoured = config.get("receiver_honours_idempotency_key") is True
        return Idempotency.STRONG if honoured else Idempotency.BEST_EFFORT

    def _request(self, resolved: Mapping[str, Any], ctx: ActionContext) -> OutgoingRequest:
        body = orjson.dumps(resolved["payload"]) if "payload" in resolved else b""
        headers = {
            "User-Agent": self.settings.user_agent,
            IDEMPOTENCY_HEADER: ctx.idempotency_key,
            "X-Actwheel-Run": ctx.run_id,
            **({"Content-Type": "application/json"} if body else {}),
            **{k: str(v) for k, v in resolved.get("headers", {}).items()},
        }
        timeout = float(resolved.get("timeout", 10.0))
        left = ctx.remaining()
        return OutgoingRequest(
            method=resolved.get("method", "POST"),
            url=resolved["url"],
            headers=headers,
            body=body,
            timeout_s=timeout if left is None else max(0.001, min(timeout, left)),
            signing_secret=resolved.get("signing_secret"),
        )

    @staticmethod
    def _retry(config: Mapping[str, Any]) -> WebhookRetry:
        return WebhookRetry(
            max_attempts=config.get("max_attempts", 3),
            backoff_base_s=config.get("backoff_base", 0.5),
            backoff_max_s=config.get("backoff_max", 30.0),
        )

    async def execute(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        try:
            resolved = await resolve_config(dict(config), ctx.secrets, ctx.owner_id)
        except NotFound as exc:
            return ActionResult.fail(str(exc), retryable=False, code="secret_missing")
        request = self._request(resolved.config, ctx)
        try:
            delivery = await self.client.send(
                request, clock=ctx.clock, retry=self._retry(config), budget_s=ctx.remaining()
            )
        except DestinationRefused as exc:
            return _refused(exc, resolved)
        return _delivered(delivery, request.method, resolved)

    async def dry_run(self, config: Mapping[str, Any], ctx: ActionContext) -> ActionResult:
        try:
            resolved = await resolve_config(dict(config), ctx.secrets, ctx.owner_id)
        except NotFound as exc:
            return ActionResult.fail(str(exc), retryable=False, code="secret_missing")
        request = self._request(resolved.config, ctx)
        try:
            destination = await check_destination(httpx.URL(request.url), self.settings, self.client._resolver)
        except DestinationRefused as exc:
            return _refused(exc, resolved)
        return ActionResult.ok(
            resolved.scrub(f"would {request.method} {request.url} ({len(request.body)} bytes)"),
            resolved.scrub(
                {
                    "method": request.method,
                    "url": request.url,
                    "ip": destination.ip,
                    "signed": request.signing_secret is not None,
                }
            ),
        )


def _refused(exc: DestinationRefused, resolved: ResolvedConfig) -> ActionResult:
    return ActionResult.fail(
        resolved.scrub(str(exc)),
        retryable=False,
        code="ssrf_refused",
        data=resolved.scrub({"field": exc.field, "url": str(exc.value)}),
    )


def _delivered(delivery: WebhookDelivery, method: str, resolved: ResolvedConfig) -> ActionResult:
    data = resolved.scrub(
        {
            "status_code": delivery.status_code,
            "body": delivery.body,
            "truncated": delivery.truncated,
            "attempts": delivery.attempts,
        }
    )
    if delivery.succeeded:
        return ActionResult.ok(f"{method} answered {delivery.status_code}", data)
    what = delivery.error or f"HTTP {delivery.status_code}"
    return ActionResult.fail(
        resolved.scrub(f"{method} failed after {len(delivery.attempts)} attempt(s): {what}"),
        retryable=delivery.retryable,
        code="http_error",
        data=data,
    )
