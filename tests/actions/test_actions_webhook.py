"""webhook.call against a real local HTTP server: signing, retries, Retry-After, SSRF guard, secrets."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import threading

import pytest
from actions_support import FastClock, LocalHttpServer, Reply, make_ctx
from structlog.testing import capture_logs

from actwheel.actions.base import Idempotency
from actwheel.actions.executors.webhook import (
    WebhookCall,
    WebhookClient,
    WebhookRetry,
    WebhookSettings,
    blocked_reason,
    verify_signature,
)
from actwheel.actions.secrets import StaticSecrets

SECRET = "whsec-0123456789abcdef"
TOKEN = "bearer-token-xyz-987"
LOCAL = WebhookSettings(allow_networks=("127.0.0.1/32",))


def _secrets() -> StaticSecrets:
    return StaticSecrets({("alice", "hook"): SECRET, ("alice", "token"): TOKEN})


def _webhook(settings: WebhookSettings = LOCAL, **client: object) -> WebhookCall:
    return WebhookCall(settings, client=WebhookClient(settings, rng=random.Random(7), **client))  # type: ignore[arg-type]


def _receiver_accepts(header: str, body: bytes, now: float) -> bool:
    """What a receiver does, written independently of actwheel's helper."""
    parts = dict(p.split("=", 1) for p in header.split(","))
    mac = hmac.new(SECRET.encode(), parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(mac, parts["v1"]) and abs(now - int(parts["t"])) < 300


async def test_signed_post_with_idempotency_key(http_server: LocalHttpServer) -> None:
    clock = FastClock()
    config = {
        "url": http_server.url(),
        "payload": {"order": 7},
        "signing_secret": {"$secret": "hook"},
        "headers": {"X-Tenant": "acme"},
    }
    result = await _webhook().execute(config, make_ctx(secrets=_secrets(), clock=clock))
    assert result.succeeded, result
    assert result.data["status_code"] == 200
    assert result.data["body"] == '{"ok": true}'
    [got] = http_server.requests
    assert json.loads(got.body) == {"order": 7}
    assert got.headers["idempotency-key"] == "run:run-1"
    assert got.headers["x-tenant"] == "acme"
    assert got.headers["content-type"] == "application/json"
    now = clock.now().timestamp()
    assert _receiver_accepts(got.headers["x-actwheel-signature"], got.body, now)
    assert verify_signature(SECRET, got.headers["x-actwheel-signature"], got.body, now)
    assert not verify_signature(SECRET, got.headers["x-actwheel-signature"], got.body + b" ", now)
    assert not verify_signature(SECRET, got.headers["x-actwheel-signature"], got.body, now + 3600)  # replay
    assert SECRET not in repr(result)


async def test_retries_5xx_with_exponential_backoff_and_jitter(http_server: LocalHttpServer) -> None:
    http_server.replies["/hook"] = [Reply(503), Reply(502), Reply(200, b"done")]
    clock = FastClock()
    config = {"url": http_server.url(), "payload": {}, "max_attempts": 4, "backoff_base": 1.0}
    result = await _webhook().execute(config, make_ctx(clock=clock))
    assert result.succeeded
    assert result.data["body"] == "done"
    assert len(http_server.requests) == 3
    assert [a["status_code"] for a in result.data["attempts"]] == [503, 502, 200]
    first, second = clock.slept
    assert 0.5 <= first <= 1.0
    assert 1.0 <= second <= 2.0


async def test_retry_after_is_respected(http_server: LocalHttpServer) -> None:
    http_server.replies["/hook"] = [Reply(429, headers={"Retry-After": "7"}), Reply(200)]
    clock = FastClock()
    result = await _webhook().execute({"url": http_server.url(), "payload": {}}, make_ctx(clock=clock))
    assert result.succeeded
    assert clock.slept == [7.0]


async def test_retry_after_beyond_the_budget_stops_retrying(http_server: LocalHttpServer) -> None:
    http_server.replies["/hook"] = [Reply(503, headers={"Retry-After": "100000"})]
    clock = FastClock()
    result = await _webhook().execute({"url": http_server.url()}, make_ctx(clock=clock))
    assert (result.status, result.retryable, clock.slept) == ("failed", True, [])
    assert len(http_server.requests) == 1


async def test_exhausted_retries_are_a_retryable_failure(http_server: LocalHttpServer) -> None:
    http_server.default = Reply(500, b"down")
    result = await _webhook().execute({"url": http_server.url(), "max_attempts": 3}, make_ctx())
    assert (result.status, result.retryable, result.code) == ("failed", True, "http_error")
    assert len(http_server.requests) == 3
    assert "3 attempt(s)" in result.summary


async def test_4xx_is_final(http_server: LocalHttpServer) -> None:
    http_server.default = Reply(422, b'{"error": "bad sku"}')
    result = await _webhook().execute({"url": http_server.url(), "payload": {}}, make_ctx())
    assert (result.retryable, result.data["status_code"], len(http_server.requests)) == (False, 422, 1)
    assert "bad sku" in result.data["body"]


async def test_connection_errors_are_retried() -> None:
    server = LocalHttpServer()
    port = server.port
    server._httpd.server_close()  # nothing listens on this port any more
    clock = FastClock()
    result = await _webhook().execute({"url": f"http://127.0.0.1:{port}/x", "max_attempts": 2}, make_ctx(clock=clock))
    assert (result.status, result.retryable) == ("failed", True)
    assert len(clock.slept) == 1
    assert "ConnectError" in result.summary


async def test_response_body_is_truncated(http_server: LocalHttpServer) -> None:
    http_server.default = Reply(200, b"x" * 10_000)
    result = await _webhook().execute({"url": http_server.url(), "method": "GET"}, make_ctx())
    assert result.data["truncated"] is True
    assert len(result.data["body"]) == LOCAL.max_response_bytes
    assert http_server.requests[0].method == "GET"
    assert http_server.requests[0].body == b""


async def test_timeout_per_attempt(http_server: LocalHttpServer) -> None:
    release = threading.Event()
    http_server.default = Reply(200, hold=release)
    try:
        result = await _webhook().execute({"url": http_server.url(), "timeout": 0.2, "max_attempts": 1}, make_ctx())
    finally:
        release.set()
    assert (result.status, result.retryable) == ("failed", True)
    assert "ReadTimeout" in result.summary


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://10.255.0.1:8080/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://localhost:9/hook", "loopback"),
        ("http://[::1]:9/", "loopback"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://192.168.1.1/", "private"),
        ("http://0.0.0.0:9/", "private"),
        ("http://224.0.0.1/", "multicast"),
    ],
)
async def test_ssrf_refusals_without_an_allow_list(url: str, reason: str) -> None:
    result = await _webhook(WebhookSettings()).execute({"url": url, "payload": {}}, make_ctx())
    assert (result.code, result.retryable) == ("ssrf_refused", False)
    assert reason in result.summary
    assert "allow_hosts" in result.summary


def test_blocked_reason_allows_public_addresses() -> None:
    import ipaddress

    assert blocked_reason(ipaddress.ip_address("93.184.216.34")) is None
    assert blocked_reason(ipaddress.ip_address("2606:4700::1111")) is None
    assert blocked_reason(ipaddress.ip_address("100.64.0.1")) == "not a globally routable address"


@pytest.mark.parametrize(
    "target", ["http://localhost:{port}/inner", "http://169.254.169.254/latest/", "http://10.0.0.5/x"]
)
async def test_redirects_to_refused_addresses_are_refused(http_server: LocalHttpServer, target: str) -> None:
    settings = WebhookSettings(allow_hosts=frozenset({"127.0.0.1"}))  # the name, not the network
    http_server.replies["/hook"] = [Reply(302, b"", {"Location": target.format(port=http_server.port)})]
    result = await _webhook(settings).execute({"url": http_server.url(), "payload": {}}, make_ctx())
    assert result.code == "ssrf_refused"
    assert [r.path for r in http_server.requests] == ["/hook"]  # the redirect target was never called


async def test_allowed_redirects_are_followed_with_the_right_method(http_server: LocalHttpServer) -> None:
    http_server.replies["/hook"] = [Reply(303, b"", {"Location": "/next"})]
    http_server.replies["/again"] = [Reply(307, b"", {"Location": "/final"})]
    first = await _webhook().execute({"url": http_server.url(), "payload": {"a": 1}}, make_ctx())
    second = await _webhook().execute({"url": http_server.url("/again"), "payload": {"a": 1}}, make_ctx())
    assert first.succeeded
    assert second.succeeded
    assert [(r.method, r.path) for r in http_server.requests] == [
        ("POST", "/hook"),
        ("GET", "/next"),
        ("POST", "/again"),
        ("POST", "/final"),
    ]
    assert json.loads(http_server.requests[-1].body) == {"a": 1}


async def test_connects_to_the_checked_ip_and_keeps_the_host_name(http_server: LocalHttpServer) -> None:
    answers: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        answers.append(host)
        return ["127.0.0.1"]

    result = await _webhook(LOCAL, resolver=resolver).execute(
        {"url": f"http://hooks.example.test:{http_server.port}/hook"}, make_ctx()
    )
    assert result.succeeded
    assert answers == ["hooks.example.test"]  # resolved once, the connection used that answer
    assert http_server.requests[0].headers["host"] == f"hooks.example.test:{http_server.port}"


async def test_a_name_resolving_to_any_private_address_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"]

    result = await _webhook(WebhookSettings(), resolver=resolver).execute({"url": "http://mixed.test/"}, make_ctx())
    assert result.code == "ssrf_refused"
    assert "10.0.0.7" in result.summary


async def test_secrets_never_reach_results_or_logs(http_server: LocalHttpServer) -> None:
    http_server.on_request = lambda got: Reply(401, f"bad token {got.headers['authorization']}".encode())
    config = {
        "url": http_server.url(),
        "payload": {},
        "headers": {"Authorization": {"$secret": "token"}},
        "signing_secret": {"$secret": "hook"},
    }
    with capture_logs() as logs:
        result = await _webhook().execute(config, make_ctx(secrets=_secrets()))
    assert http_server.requests[0].headers["authorization"] == TOKEN
    assert result.data["body"] == "bad token ***"
    everything = repr(result) + repr(logs) + repr(config)
    assert TOKEN not in everything
    assert SECRET not in everything


async def test_missing_secret_is_a_clear_failure(http_server: LocalHttpServer) -> None:
    result = await _webhook().execute({"url": http_server.url(), "signing_secret": {"$secret": "nope"}}, make_ctx())
    assert result.code == "secret_missing"
    assert "nope" in result.summary
    assert http_server.requests == []


def test_validation_lists_every_problem() -> None:
    errors = _webhook().validate(
        {"url": "ftp://x/y", "method": "BREW", "headers": {"Host": "evil", "Ok": 1}, "max_attempts": 0}
    )
    assert {e.field for e in errors} == {"method", "headers.Ok", "max_attempts"}
    errors = _webhook().validate({"url": "ftp://x/y", "headers": {"Host": "evil"}})
    assert {e.field for e in errors} == {"url", "headers.Host"}


def test_idempotency_depends_on_the_receiver() -> None:
    hook = _webhook()
    assert hook.idempotency is Idempotency.BEST_EFFORT
    assert hook.idempotency_for({"url": "http://x", "receiver_honours_idempotency_key": True}) is Idempotency.STRONG
    assert hook.idempotency_for({"url": "http://x"}) is Idempotency.BEST_EFFORT


async def test_dry_run_checks_the_destination_and_sends_nothing(http_server: LocalHttpServer) -> None:
    ok = await _webhook().dry_run({"url": http_server.url(), "payload": {"a": 1}}, make_ctx())
    refused = await _webhook(WebhookSettings()).dry_run({"url": "http://10.0.0.1/"}, make_ctx())
    assert ok.succeeded
    assert ok.data["ip"] == "127.0.0.1"
    assert refused.code == "ssrf_refused"
    assert http_server.requests == []


def test_backoff_is_capped() -> None:
    policy = WebhookRetry(backoff_base_s=1, backoff_max_s=5, jitter=False)
    assert [policy.backoff(n, random.Random()) for n in range(1, 6)] == [1, 2, 4, 5, 5]
