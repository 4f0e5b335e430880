"""The dashboard's cookies carry ``Secure`` when the request came over TLS, and only then.

The pages decide by the request's scheme (``request.url.scheme``): an ``https`` ASGI scope, or — behind
a TLS-terminating proxy — uvicorn's proxy-header handling, which ``actwheel run`` leaves on, turning a
trusted (loopback by default) proxy's ``X-Forwarded-Proto: https`` into that scheme."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from loopback import serving
from ui_support import UiWorld, csrf_in

from actwheel.api.app import create_app


async def sign_in(http: httpx.AsyncClient, token: str, headers: dict[str, str] | None = None) -> tuple[str, str]:
    """Sign in through the form; the ``Set-Cookie`` of the form (its CSRF cookie) and of the sign-in (the
    session). The form's cookie is sent back by hand: a client keeps a ``Secure`` one for https alone."""
    form = await http.get("/ui/login", headers=headers)
    form_cookie = form.headers["set-cookie"]
    pair = re.match(r"[^;]+", form_cookie)
    assert pair, form_cookie
    answer = await http.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": token},
                             headers={**(headers or {}), "Cookie": pair.group(0)})
    assert answer.status_code == 303, answer.text
    sessions = [cookie for cookie in answer.headers.get_list("set-cookie") if cookie.startswith("aw_session=")]
    assert len(sessions) == 1, answer.headers.get_list("set-cookie")
    return form_cookie, sessions[0]


def secure(cookie: str) -> bool:
    return "secure" in [attribute.strip().lower() for attribute in cookie.split(";")]


async def test_an_https_request_gets_secure_cookies_and_an_http_one_does_not(world: UiWorld) -> None:
    app = create_app(world.engine.control)
    for scheme, expected in (("https", True), ("http", False)):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"{scheme}://t") as http:
            form_cookie, session_cookie = await sign_in(http, world.tokens["alice"])
        assert (secure(form_cookie), secure(session_cookie)) == (expected, expected), scheme
        assert "HttpOnly" in session_cookie
        assert "SameSite=strict" in session_cookie


async def test_behind_a_tls_proxy_on_loopback_x_forwarded_proto_https_makes_the_cookie_secure(
        tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx.AsyncClient(base_url=served.base, timeout=10) as http:
        proxied = await sign_in(http, served.world.tokens["alice"], {"X-Forwarded-Proto": "https"})
        direct = await sign_in(http, served.world.tokens["alice"])
    assert [secure(cookie) for cookie in proxied] == [True, True]
    assert [secure(cookie) for cookie in direct] == [False, False]
