"""Engine settings: command-line flags override environment variables override defaults."""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from actwheel.errors import InvalidInput

__all__ = ["ADMIN_KEY_FILE", "ALL_ROLES", "DEFAULT_DATABASE_URL", "MAX_FIRE_AHEAD_S", "MCP_RUN_NOW_MODES", "Settings",
           "instance_id", "is_loopback"]

#: The bootstrap admin's key file name (the key alone, one line, mode 0600).
ADMIN_KEY_FILE = "actwheel-admin.key"

DEFAULT_DATABASE_URL = "sqlite:///actwheel.db"
ALL_ROLES: tuple[str, ...] = ("ticker", "planner", "router", "recovery", "cdc", "auditor", "metrics")
#: The longest fire-ahead lead window (``ACTWHEEL_FIRE_AHEAD_S``): a run planned further ahead would hold
#: a router's delivery (and its snapshot) for longer than planning a burst takes.
MAX_FIRE_AHEAD_S = 5.0
#: The values of ``ACTWHEEL_MCP_RUN_NOW`` (see :attr:`Settings.mcp_run_now`).
MCP_RUN_NOW_MODES: tuple[str, ...] = ("auto", "elicit", "token", "deny")


def instance_id(env: Mapping[str, str] | None = None) -> str:
    """``ACTWHEEL_INSTANCE`` if set (a worker of ``actwheel run --workers``), else ``HOSTNAME``, else
    ``pid-<pid>`` (docs/design.md: scaling out)."""
    env = os.environ if env is None else env
    return env.get("ACTWHEEL_INSTANCE") or env.get("HOSTNAME") or f"pid-{os.getpid()}"


def is_loopback(host: str) -> bool:
    """True for a listener only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidInput(name, raw, "a number") from None


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise InvalidInput(name, raw, "true or false")


@dataclass(frozen=True, kw_only=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    broker_url: str = "memory://"
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    instance: str = field(default_factory=instance_id)
    roles: tuple[str, ...] = ALL_ROLES
    horizon_s: float = 3600.0
    lease_s: float = 30.0
    partition_leases: bool = True
    partitions: int = 64
    router_concurrency: int = 256
    grace_s: float = 10.0
    sweep_interval_s: float = 5.0
    stale_pending_s: float = 30.0
    #: Backpressure (``ACTWHEEL_PLAN_BACKLOG``): the planner holds due announcements while this many runs
    #: or more are PENDING or RUNNING, so execution is not starved by planning; 0 never holds (speed only).
    plan_backlog: int = 5_000
    #: Parked overlaps (``ACTWHEEL_PLAN_PARKING``): a busy ``overlap: skip`` automation's instants wait in
    #: the planner's memory and are written as ONE SKIPPED(overlap) range when its run ends, instead of a row
    #: each (speed only: the cursor is the truth; see docs/design.md, invariant 8).
    plan_parking: bool = True
    #: Fire-ahead (``ACTWHEEL_FIRE_AHEAD_S``, 0 = off, at most 5): a stored automation's instant is announced
    #: and planned this long before it, its run committed PENDING with ``not_before`` = the instant, and the
    #: router starts it at the instant. On, it switches parked overlaps off (each instant's overlap is judged
    #: when its run is claimed, at the instant). docs/design.md, "Fire-ahead".
    fire_ahead_s: float = 0.0
    #: How long finished runs (with their audit rows), published outbox rows, dead letters and idempotency
    #: keys are kept (``ACTWHEEL_RETENTION_S``, 30 days): the recovery role's retention sweeper removes them
    #: afterwards. An ad hoc request's idempotency key is honoured for this long (docs/storage.md, "Retention").
    retention_s: float = 30 * 86_400.0
    #: How often the retention sweeper looks (``ACTWHEEL_RETENTION_SWEEP_S``).
    retention_sweep_s: float = 300.0
    local_owner: str = "local"
    #: Authenticate every HTTP request (bearer API keys). ``False`` is ``--insecure-no-auth``: loopback only,
    #: every request acts as ``local_owner`` with ``*``, and owners without a principal are implicit.
    auth: bool = True
    #: ``/metrics`` needs ``metrics:read`` (it is public by default, the Prometheus convention).
    metrics_auth: bool = False
    #: Where the bootstrap admin's key is written at first start (default: see :meth:`admin_key_path`).
    admin_key_file: str | None = None
    #: How the MCP server confirms ``run_automation_now`` (``ACTWHEEL_MCP_RUN_NOW``): ``auto`` (ask the user
    #: through elicitation where the client declared it, else a confirmation token), ``elicit`` (elicitation
    #: only: refused where the client cannot ask), ``token`` (the token always), ``deny`` (never from MCP).
    mcp_run_now: str = "auto"
    #: Host header values ``/mcp`` answers besides ``--http``'s own (``ACTWHEEL_MCP_ALLOWED_HOSTS``,
    #: comma-separated ``host:port``, ``host:*`` for any port, or ``*`` to switch the check off): the names
    #: clients reach this engine by through a proxy or DNS. Any other Host is a 421 (DNS rebinding).
    mcp_allowed_hosts: tuple[str, ...] = ()
    #: The AMQP heartbeat in whole seconds (``ACTWHEEL_AMQP_HEARTBEAT_S``, 0 = off; a ``heartbeat`` query in
    #: the broker URL wins): a link that went silent without a FIN or RST is dropped after about three.
    amqp_heartbeat_s: float = 10.0
    #: Live streams (``GET /v1/stream``) this instance serves at once (``ACTWHEEL_STREAM_MAX_CLIENTS``); one
    #: more is refused with 503 until one ends.
    stream_max_clients: int = 100
    #: Events buffered per live stream (``ACTWHEEL_STREAM_BUFFER``): a client further behind gets ``resync``.
    stream_buffer: int = 256
    #: Seconds of silence after which a live stream sends a keep-alive comment (``ACTWHEEL_STREAM_KEEPALIVE_S``).
    stream_keepalive_s: float = 15.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Defaults, then ``ACTWHEEL_*`` variables, then non-``None`` ``overrides``."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "database_url": env.get("ACTWHEEL_DATABASE_URL", DEFAULT_DATABASE_URL),
            "broker_url": env.get("ACTWHEEL_BROKER_URL", "memory://"),
            "horizon_s": _float(env, "ACTWHEEL_HORIZON_S", 3600.0),
            "lease_s": _float(env, "ACTWHEEL_LEASE_S", 30.0),
            "plan_backlog": int(_float(env, "ACTWHEEL_PLAN_BACKLOG", 5_000)),
            "plan_parking": _flag(env, "ACTWHEEL_PLAN_PARKING", True),
            "fire_ahead_s": _float(env, "ACTWHEEL_FIRE_AHEAD_S", 0.0),
            "retention_s": _float(env, "ACTWHEEL_RETENTION_S", 30 * 86_400.0),
            "retention_sweep_s": _float(env, "ACTWHEEL_RETENTION_SWEEP_S", 300.0),
            "partition_leases": _flag(env, "ACTWHEEL_PARTITION_LEASES", True),
            "auth": not _flag(env, "ACTWHEEL_INSECURE_NO_AUTH", False),
            "metrics_auth": _flag(env, "ACTWHEEL_METRICS_AUTH", False),
            "admin_key_file": env.get("ACTWHEEL_ADMIN_KEY_FILE") or None,
            "mcp_run_now": env.get("ACTWHEEL_MCP_RUN_NOW", "auto"),
            "mcp_allowed_hosts": _csv(env.get("ACTWHEEL_MCP_ALLOWED_HOSTS", "")),
            "amqp_heartbeat_s": _float(env, "ACTWHEEL_AMQP_HEARTBEAT_S", 10.0),
            "stream_max_clients": int(_float(env, "ACTWHEEL_STREAM_MAX_CLIENTS", 100)),
            "stream_buffer": int(_float(env, "ACTWHEEL_STREAM_BUFFER", 256)),
            "stream_keepalive_s": _float(env, "ACTWHEEL_STREAM_KEEPALIVE_S", 15.0),
            "instance": instance_id(env),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def admin_key_path(self) -> Path:
        """The bootstrap key file: ``admin_key_file``, else ``actwheel-admin.key`` in the SQLite file's folder
        (on PostgreSQL, the working directory)."""
        if self.admin_key_file:
            return Path(self.admin_key_file)
        if self.database_url.startswith("sqlite:///") and not self.database_url.endswith(":memory:"):
            return Path(self.database_url.removeprefix("sqlite:///")).parent / ADMIN_KEY_FILE
        return Path.cwd() / ADMIN_KEY_FILE

    def validate(self) -> None:
        unknown = [r for r in self.roles if r not in ALL_ROLES]
        if unknown or not self.roles:
            raise InvalidInput("actors", unknown[0] if unknown else "", "one or more of " + ", ".join(ALL_ROLES))
        for name in ("lease_s", "grace_s", "sweep_interval_s", "stale_pending_s", "retention_s", "retention_sweep_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise InvalidInput(name, value, "a finite number of seconds > 0")
        if not (0 <= self.amqp_heartbeat_s < 65535) or self.amqp_heartbeat_s != int(self.amqp_heartbeat_s):
            raise InvalidInput("amqp_heartbeat_s", self.amqp_heartbeat_s, "whole seconds from 0 (off) to 65534")
        if not (math.isfinite(self.fire_ahead_s) and 0 <= self.fire_ahead_s <= MAX_FIRE_AHEAD_S):
            raise InvalidInput("ACTWHEEL_FIRE_AHEAD_S", self.fire_ahead_s,
                               f"0 (off) to {MAX_FIRE_AHEAD_S:g} seconds")
        if not 0 <= self.plan_backlog <= 100_000:
            raise InvalidInput("ACTWHEEL_PLAN_BACKLOG", self.plan_backlog, "0 (off) to 100000 runs")
        self._validate_stream()
        if not 0 < self.http_port < 65536:
            raise InvalidInput("http", self.http_port, "a TCP port 1-65535")
        if not math.isfinite(self.horizon_s) or self.horizon_s < 1:
            raise InvalidInput("horizon_s", self.horizon_s, "at least 1 second")
        if self.mcp_run_now not in MCP_RUN_NOW_MODES:
            raise InvalidInput("ACTWHEEL_MCP_RUN_NOW", self.mcp_run_now, "one of " + ", ".join(MCP_RUN_NOW_MODES))
        for host in self.mcp_allowed_hosts:
            if host != "*" and (not host or any(c in host for c in "/ ") or host.startswith(("http:", "https:"))):
                raise InvalidInput("ACTWHEEL_MCP_ALLOWED_HOSTS", host, "comma-separated Host header values such as "
                                   "'actwheel.example.com', 'actwheel.example.com:8443' or 'actwheel.internal:*'")
        if not self.auth and not is_loopback(self.http_host):
            raise InvalidInput("--insecure-no-auth", self.http_host, "a loopback listener (127.0.0.1, ::1 or "
                               "localhost): without authentication anyone who can reach the port is the owner")

    def _validate_stream(self) -> None:
        """The live stream's cap, buffer and keep-alive interval."""
        if not 1 <= self.stream_max_clients <= 100_000:
            raise InvalidInput("ACTWHEEL_STREAM_MAX_CLIENTS", self.stream_max_clients, "1 to 100000 streams")
        if not 1 <= self.stream_buffer <= 100_000:
            raise InvalidInput("ACTWHEEL_STREAM_BUFFER", self.stream_buffer, "1 to 100000 events")
        if not math.isfinite(self.stream_keepalive_s) or self.stream_keepalive_s <= 0:
            raise InvalidInput("ACTWHEEL_STREAM_KEEPALIVE_S", self.stream_keepalive_s, "a finite number of seconds > 0")


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port), or :class:`InvalidInput` naming ``--http``."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise InvalidInput("--http", value, "HOST:PORT, e.g. 127.0.0.1:8080")
    return host or "127.0.0.1", int(port)


