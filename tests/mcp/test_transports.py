"""The MCP transports end to end (issue 12), with real clients and no LLM.

- Streamable HTTP at ``/mcp`` of a running engine: real uvicorn on a loopback port with lifespan off
  and the MCP session manager entered around it (as ``actwheel run`` serves), the SDK's client in both
  protocol eras (the handshake era: ``initialize`` and a session; the 2026-07-28 stateless era).
- stdio through ``actwheel mcp`` (a subprocess) with the SDK's stdio client, and its failures.
- The MCP Inspector's CLI over HTTP (skipped loudly where ``npx`` is missing; a failure under ``CI``).
- The HTTP edge: a missing or wrong key is a 401, a Host not allowed a 421, /mcp before the session
  manager runs a 503.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import shutil
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from mcp_world import DAILY_9, LOG, READ_SCOPES, USER_SCOPES, answering, structured

from actwheel.api.app import create_app
from actwheel.auth.bootstrap import ensure_admin
from actwheel.bus import Delivery, MemoryBus, QueueSpec, Topology
from actwheel.clock import VirtualClock
from actwheel.engine import Engine
from actwheel.errors import BridgeError
from actwheel.mcp import READ_TOOLS, TOOL_NAMES, build_server, static_caller
from actwheel.mcp.bridge import BridgeConfig
from actwheel.mcp.http import allowed_hosts, endpoint_of
from actwheel.service import Caller
from actwheel.settings import Settings
from tests.node_packages import NPM_PREFIX, installed_version, npm_install

MODERN = "2026-07-28"
#: The two protocol eras a client can speak: ``legacy`` pins the handshake era; ``auto`` discovers the
#: server (``server/discover``) and speaks 2026-07-28 where it can, as hosts do.
ERAS = ["legacy", "auto"]
#: The Inspector the suite runs, installed once into .devdata/npm (not downloaded by every run).
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
REPO = Path(__file__).resolve().parents[2]


class _Events:
    """The run events the engine publishes, waited for without sleeping (woken by each delivery)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.changed = asyncio.Condition()

    async def record(self, delivery: Delivery) -> None:
        async with self.changed:
            self.keys.append(delivery.routing_key)
            self.changed.notify_all()

    async def wait_for(self, routing_key: str) -> None:
        async with asyncio.timeout(15), self.changed:
            await self.changed.wait_for(lambda: routing_key in self.keys)


@dataclass
class Served:
    """A running engine serving its app on a loopback port."""

    engine: Engine
    base: str
    tokens: dict[str, str]
    events: _Events
    statuses: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @asynccontextmanager
    async def client(self, credential: str, *, mode: str = "legacy", elicit: Any = None) -> AsyncIterator[Client]:
        """The SDK's streamable HTTP client with ``credential``'s key; every HTTP status lands in
        :attr:`statuses` and every session id the engine issued in the returned client's ``sessions``."""
        sessions: list[str] = []

        async def note(response: httpx2.Response) -> None:
            self.statuses.append(response.status_code)
            if "mcp-session-id" in response.headers:
                sessions.append(response.headers["mcp-session-id"])

        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.tokens[credential]}"},
                                  event_hooks={"response": [note]})
        async with http, Client(streamable_http_client(self.url, http_client=http), mode=mode,
                                elicitation_callback=elicit) as client:
            client.sessions = sessions  # type: ignore[attr-defined]
            yield client


def _listening_socket() -> socket.socket:
    """A loopback socket already listening: a client connects at once, uvicorn accepts when it serves."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@asynccontextmanager
async def serving(engine: Engine, sock: socket.socket) -> AsyncIterator[None]:
    """Serve ``engine``'s app on ``sock`` as ``actwheel run`` does: uvicorn with lifespan off, so the MCP
    session manager is entered around serving (without it every /mcp request would fail). One task owns
    both (the session manager's task group must be left by the task that entered it)."""
    app = create_app(engine.control)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    ready = asyncio.Event()

    async def host() -> None:
        async with endpoint_of(app).running():
            ready.set()
            await server.serve(sockets=[sock])

    task = asyncio.create_task(host())
    await asyncio.wait([task, asyncio.create_task(ready.wait())], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # it failed before it served: say why
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def _mint(engine: Engine) -> dict[str, str]:
    """Keys of alice: ``full`` (a user's ceiling), ``readonly`` (the :read scopes only)."""
    await ensure_admin(engine.store, engine.settings)
    admin = await engine.control.authenticator.authenticate(engine.settings.admin_key_path().read_text().strip())
    await engine.control.principals.create(admin, {"id": "alice", "kind": "user", "scopes": USER_SCOPES})
    tokens = {}
    for credential, scopes in (("full", USER_SCOPES), ("readonly", READ_SCOPES)):
        minted = await engine.control.keys.create(admin, {"name": credential, "principal_id": "alice",
                                                          "scopes": scopes})
        tokens[credential] = minted.token
    return tokens


@asynccontextmanager
async def running_engine(tmp_path: Path, clock: VirtualClock, **settings: Any) -> AsyncIterator[Served]:
    """An engine (planner, router, cdc, auditor on SQLite and the memory bus, auth on) on a loopback port."""
    sock = _listening_socket()
    port = sock.getsockname()[1]
    topology = Topology()
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path}/actwheel.db", instance="h", http_port=port,
                             admin_key_file=str(tmp_path / "admin.key"),
                             roles=("planner", "router", "cdc", "auditor"), **settings),
                    clock=clock, bus=MemoryBus(topology=topology, clock=clock, grace=2.0), topology=topology)
    await engine.start()
    events = _Events()
    spec = QueueSpec(f"test.watch.{uuid.uuid4().hex[:6]}", ((topology.events, "run.#"),), delivery_limit=1)
    await engine.bus.declare_queue(spec)
    subscription = await engine.bus.consume(spec.name, events.record, prefetch=100)
    try:
        tokens = await _mint(engine)
        async with serving(engine, sock):
            yield Served(engine, f"http://127.0.0.1:{port}", tokens, events)
    finally:
        sock.close()
        await subscription.cancel()
        await engine.stop()


@pytest.fixture
async def served(tmp_path: Path, clock: VirtualClock) -> AsyncIterator[Served]:
    async with running_engine(tmp_path, clock) as s:
        yield s


async def _create_daily(client: Client) -> str:
    preview = structured(await client.call_tool("preview_trigger", {"trigger": DAILY_9}))
    created = structured(await client.call_tool("create_automation", {
        "name": "morning hello", "trigger": DAILY_9, "action": LOG, "preview_digest": preview["preview_digest"]}))
    return str(created["automation"]["id"])


# --- streamable HTTP ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
async def test_both_protocol_eras_over_http_list_the_tools_the_key_may_use(served: Served, mode: str) -> None:
    async with served.client("full", mode=mode) as full:
        full_tools = {t.name for t in (await full.list_tools()).tools}
        preview = structured(await full.call_tool("preview_trigger", {"trigger": DAILY_9, "count": 2}))
        era, sessions = full.protocol_version, list(full.sessions)  # type: ignore[attr-defined]
    async with served.client("readonly", mode=mode) as readonly:
        read_tools = {t.name for t in (await readonly.list_tools()).tools}
    assert full_tools == set(TOOL_NAMES)
    assert read_tools == set(READ_TOOLS)
    assert len(preview["fires"]) == 2
    assert "Europe/Paris" in preview["summary"]
    if mode == "legacy":  # the handshake era: initialize, then a session the engine tracks
        assert era in HANDSHAKE_PROTOCOL_VERSIONS
        assert len(set(sessions)) == 1
    else:  # the stateless era: no session at all
        assert era == MODERN
        assert sessions == []


@pytest.mark.parametrize("mode", ERAS)
async def test_the_scripted_agent_session_over_http(served: Served, mode: str) -> None:
    """preview → create → run now (confirmed by token) → get_run SUCCEEDED, through the real port."""
    async with served.client("full", mode=mode) as agent:
        automation_id = await _create_daily(agent)
        asked = structured(await agent.call_tool("run_automation_now", {"automation_id": automation_id}))
        started = structured(await agent.call_tool("run_automation_now", {
            "automation_id": automation_id, "confirmation_token": asked["confirmation_token"]}))
        await served.events.wait_for("run.succeeded")
        run = structured(await agent.call_tool("get_run", {"run_id": started["run_id"]}))
    assert asked["status"] == "confirmation_required"
    assert asked["summary"]
    assert started["status"] == "started"
    assert run["run"]["status"] == "SUCCEEDED"
    assert run["audit"]


@pytest.mark.parametrize("mode", ERAS)
async def test_run_now_is_confirmed_by_elicitation_over_http_in_both_eras(served: Served, mode: str) -> None:
    """The handshake era asks over the session's stream; the stateless era with a multi-round result."""
    asked: list[str] = []
    async with served.client("full", mode=mode, elicit=answering("accept", asked)) as agent:
        automation_id = await _create_daily(agent)
        started = structured(await agent.call_tool("run_automation_now", {"automation_id": automation_id}))
    assert started["status"] == "started"
    assert len(asked) == 1
    assert "morning hello" in asked[0]


async def test_a_session_is_bound_to_the_key_that_opened_it(served: Served) -> None:
    async with served.client("full") as full:
        session = full.sessions[0]  # type: ignore[attr-defined]
        async with httpx.AsyncClient() as http:
            hijack = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                     headers={"Authorization": f"Bearer {served.tokens['readonly']}",
                                              "Mcp-Session-Id": session,
                                              "Accept": "application/json, text/event-stream"})
        assert (await full.list_tools()).tools  # the owner's session is unharmed
    assert hijack.status_code == 404


_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "0"}}}
_ACCEPT = {"Accept": "application/json, text/event-stream"}


async def test_a_missing_or_wrong_key_is_a_401_not_a_tool_error(served: Served) -> None:
    async with httpx.AsyncClient() as http:
        missing = await http.post(served.url, json=_INITIALIZE, headers=_ACCEPT)
        wrong = await http.post(served.url, json=_INITIALIZE, headers={**_ACCEPT, "Authorization": "Bearer awk_nope"})
        right = await http.post(served.url, json=_INITIALIZE,
                                headers={**_ACCEPT, "Authorization": f"Bearer {served.tokens['full']}"})
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "missing_token")
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="actwheel"'
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "invalid_token")
    assert right.status_code == 200
    served.tokens["wrong"] = "awk_nope"
    for mode in ERAS:
        served.statuses.clear()
        with pytest.raises(ExceptionGroup):  # the SDK wraps the HTTP failure: the status is the point
            async with served.client("wrong", mode=mode) as client:
                await client.list_tools()
        assert 401 in served.statuses, mode


async def test_a_host_header_not_allowed_is_a_421(tmp_path: Path, clock: VirtualClock) -> None:
    async with running_engine(tmp_path, clock, mcp_allowed_hosts=("actwheel.test:*",)) as served:
        port = served.base.rsplit(":", 1)[1]
        auth = {**_ACCEPT, "Authorization": f"Bearer {served.tokens['full']}"}
        answers = {}
        async with httpx.AsyncClient() as http:
            for host in (f"evil.example:{port}", "localhost:1", f"localhost:{port}", "actwheel.test:9",
                         f"127.0.0.1:{port}"):
                answer = await http.post(served.url, json=_INITIALIZE, headers={**auth, "Host": host})
                answers[host] = answer.status_code
            origin = await http.post(served.url, json=_INITIALIZE, headers={**auth, "Origin": "http://evil.example"})
    assert answers == {f"evil.example:{port}": 421, "localhost:1": 421, f"localhost:{port}": 200,
                       "actwheel.test:9": 200, f"127.0.0.1:{port}": 200}
    assert origin.status_code == 403


async def test_mcp_answers_503_until_its_session_manager_runs(tmp_path: Path) -> None:
    engine = Engine(Settings(database_url=f"sqlite:///{tmp_path}/a.db", instance="t", auth=False))
    await engine.store.start()
    try:
        app = create_app(engine.control)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080") as http:
            before = await http.post("/mcp", json=_INITIALIZE, headers=_ACCEPT)
            async with endpoint_of(app).running():
                during = await http.post("/mcp", json=_INITIALIZE, headers=_ACCEPT)
            after = await http.post("/mcp", json=_INITIALIZE, headers=_ACCEPT)
    finally:
        await engine.store.stop()
    assert (before.status_code, before.json()["error"]["code"]) == (503, "mcp_not_running")
    assert during.status_code == 200
    assert after.status_code == 503


@pytest.mark.parametrize(("http", "extra", "expected"), [
    ("127.0.0.1:8080", (), ["127.0.0.1:8080", "localhost:8080", "[::1]:8080"]),
    ("0.0.0.0:9000", ("actwheel.example.com",), ["127.0.0.1:9000", "localhost:9000", "[::1]:9000",
                                                   "actwheel.example.com"]),
    ("10.1.2.3:8080", ("api.internal:*",), ["10.1.2.3:8080", "api.internal:*"]),
    ("::1:8080", (), ["[::1]:8080", "127.0.0.1:8080", "localhost:8080"]),
])
def test_allowed_hosts_come_from_http_and_the_setting(http: str, extra: tuple[str, ...], expected: list[str]) -> None:
    host, port = http.rsplit(":", 1)
    assert allowed_hosts(Settings(http_host=host, http_port=int(port), mcp_allowed_hosts=extra)) == expected


def test_the_allowed_hosts_setting_is_read_and_checked() -> None:
    settings = Settings.from_env({"ACTWHEEL_MCP_ALLOWED_HOSTS": " actwheel.example.com , api.internal:* ,"})
    assert settings.mcp_allowed_hosts == ("actwheel.example.com", "api.internal:*")
    with pytest.raises(Exception, match="ACTWHEEL_MCP_ALLOWED_HOSTS"):
        Settings.from_env({"ACTWHEEL_MCP_ALLOWED_HOSTS": "https://actwheel.example.com"})


# --- stdio: actwheel mcp --------------------------------------------------------------------------


def _bridge_env(url: str, token: str) -> dict[str, str]:
    """The bridge's environment (the SDK passes a child only a few variables of its own)."""
    env = {"ACTWHEEL_URL": url, "ACTWHEEL_TOKEN": token}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@pytest.mark.parametrize("mode", ERAS)
async def test_stdio_through_actwheel_mcp(served: Served, mode: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "actwheel", "mcp"],
                                   env=_bridge_env(served.base, served.tokens["full"]))
    async with Client(params, mode=mode) as agent:
        tools = {t.name for t in (await agent.list_tools()).tools}
        automation_id = await _create_daily(agent)
        listed = structured(await agent.call_tool("list_automations"))
        asked = structured(await agent.call_tool("run_automation_now", {"automation_id": automation_id}))
        refused = await agent.call_tool("preview_trigger", {"trigger": {"type": "cron", "expression": "0 0 9 * * ?"}})
        instructions, era = agent.instructions, agent.protocol_version
    assert (era in HANDSHAKE_PROTOCOL_VERSIONS) if mode == "legacy" else (era == MODERN)
    assert tools == set(TOOL_NAMES)
    assert [a["id"] for a in listed["items"]] == [automation_id]
    assert asked["status"] == "confirmation_required"  # the bridge offers no elicitation: the token path
    assert refused.is_error
    assert "trigger.timezone" in " ".join(getattr(b, "text", "") for b in refused.content)
    assert instructions is not None
    assert "Preview first" in instructions


async def _bridge_fails(url: str, token: str) -> tuple[int, str]:
    env = {**os.environ, **_bridge_env(url, token)}
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "actwheel", "mcp", env=env,
                                                   stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert stdout == b""  # stdout is the MCP channel: nothing else ever goes there
    assert process.returncode is not None
    return process.returncode, stderr.decode()


async def test_actwheel_mcp_says_when_the_key_is_refused(served: Served) -> None:
    code, stderr = await _bridge_fails(served.base, "awk_not_a_key")
    assert code == 1
    assert "refused the key in ACTWHEEL_TOKEN (401)" in stderr


async def test_actwheel_mcp_says_when_it_cannot_reach_the_engine() -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    code, stderr = await _bridge_fails(url, "awk_whatever")
    assert code == 1
    assert f"cannot reach the engine at {url}" in stderr


def test_the_bridge_needs_a_token_and_an_http_url() -> None:
    assert BridgeConfig.from_env({"ACTWHEEL_TOKEN": "k"}).mcp_url == "http://127.0.0.1:8080/mcp"
    assert "k" not in repr(BridgeConfig.from_env({"ACTWHEEL_TOKEN": "k"}))
    with pytest.raises(BridgeError, match="ACTWHEEL_TOKEN is not set"):
        BridgeConfig.from_env({"ACTWHEEL_URL": "http://engine:8080"})
    with pytest.raises(BridgeError, match="ACTWHEEL_URL"):
        BridgeConfig.from_env({"ACTWHEEL_TOKEN": "k", "ACTWHEEL_URL": "engine:8080"})


# --- the MCP Inspector's CLI ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def inspector() -> Path:
    """The Inspector's executable, installed once into .devdata/npm; skipped loudly without npx (a
    failure under CI)."""
    if shutil.which("npx") is None or shutil.which("npm") is None:
        message = "!!! npx/npm MISSING: the MCP Inspector CLI test needs Node.js (apt-get install nodejs npm) !!!"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    binary = NPM_PREFIX / "node_modules" / ".bin" / "mcp-inspector"
    name, _, version = INSPECTOR.rpartition("@")
    failed = npm_install(INSPECTOR, present=lambda: binary.exists() and installed_version(name) == version)
    assert failed is None, failed
    return binary


async def _inspect(inspector: Path, served: Served, tmp_path: Path, *args: str) -> Any:
    process = await asyncio.create_subprocess_exec(
        str(inspector), "--cli", served.url, "--transport", "http",
        "--header", f"Authorization: Bearer {served.tokens['full']}", *args,
        env={**os.environ, "MCP_CATALOG_PATH": str(tmp_path / "catalog.json"), "HOME": str(tmp_path)},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()[-2000:]
    return json.loads(stdout)


async def test_the_mcp_inspector_cli_lists_and_calls_the_tools(inspector: Path, served: Served,
                                                               tmp_path: Path) -> None:
    listed = await _inspect(inspector, served, tmp_path, "--method", "tools/list")
    called = await _inspect(inspector, served, tmp_path, "--method", "tools/call", "--tool-name", "preview_trigger",
                            "--tool-arg", f"trigger={json.dumps(DAILY_9)}", "count=2")
    assert {t["name"] for t in listed["tools"]} == set(TOOL_NAMES)
    assert len(called["structuredContent"]["fires"]) == 2
    assert "Europe/Paris" in called["structuredContent"]["summary"]


# --- docs/mcp.md ----------------------------------------------------------------------------------

DOCS = REPO / "docs" / "mcp.md"
_BEGIN = "<!-- tools: generated from tools/list by `python tests/mcp/test_transports.py`; do not edit by hand -->"
_END = "<!-- /tools -->"


def _hints(annotations: dict[str, Any]) -> str:
    names = {"readOnlyHint": "read-only", "destructiveHint": "destructive", "idempotentHint": "idempotent",
             "openWorldHint": "reaches outside actwheel"}
    return ", ".join(label for key, label in names.items() if annotations.get(key)) or "changes state"


async def tool_reference() -> str:
    """The generated part of docs/mcp.md: every tool's description, hints and schemas, as tools/list
    shows them to a credential that may use every tool."""
    engine = Engine(Settings(database_url="sqlite:///:memory:", instance="docs", auth=False))
    server = build_server(engine.control, caller_of=static_caller(Caller(owner_id="local")))
    async with Client(server) as client:
        tools = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in (await client.list_tools()).tools]
    parts = [_BEGIN]
    for tool in tools:
        description = inspect.cleandoc(tool["description"])
        parts += [f"### `{tool['name']}`", description, f"*{_hints(tool.get('annotations', {}))}*",
                  "Input:", f"```json\n{json.dumps(tool['inputSchema'], indent=2)}\n```",
                  "<details><summary>Output schema</summary>",
                  f"```json\n{json.dumps(tool.get('outputSchema', {}), indent=2)}\n```", "</details>"]
    return "\n\n".join([*parts, _END])


def _generated_part(text: str) -> str:
    return text[text.index(_BEGIN):text.index(_END) + len(_END)]


async def test_docs_mcp_md_lists_every_tool_with_its_schemas() -> None:
    text = DOCS.read_text()
    assert all(f"### `{name}`" in text for name in TOOL_NAMES)
    assert _generated_part(text) == await tool_reference(), "regenerate: python tests/mcp/test_transports.py"


if __name__ == "__main__":  # rewrite the generated part of docs/mcp.md
    text = DOCS.read_text() if DOCS.exists() else f"{_BEGIN}\n{_END}\n"
    DOCS.write_text(text.replace(_generated_part(text), asyncio.run(tool_reference())))
