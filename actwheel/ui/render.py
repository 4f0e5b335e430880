"""Templates, security headers and the small formatting helpers the pages share.

Autoescaping is on for every template, so a hostile automation name renders as text. Every answer of
the dashboard carries a strict Content-Security-Policy: scripts and styles from ``/ui/static`` only,
no inline script, no inline style, no framing.
"""

from __future__ import annotations

import json
from datetime import datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

__all__ = ["CSP", "STATIC_FILES", "page", "redirect", "secure_headers", "static_file"]

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")

#: Statuses by shape as well as by colour (docs/dashboard.md): the icon and the word are always shown.
STATUS_ICONS = {
    "SUCCEEDED": "✓", "FAILED": "✗", "DEAD": "☠", "UNKNOWN": "?", "PENDING": "○", "RUNNING": "▶",
    "RETRY_WAIT": "↻", "SKIPPED": "⤼", "CANCELED": "⊘", "COMPENSATING": "↶", "ROLLED_BACK": "↺",
    "ACTIVE": "●", "PAUSED": "❚❚", "COMPLETED": "■",
}

_CONTENT_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                  ".LICENSE": "text/plain; charset=utf-8", ".svg": "image/svg+xml"}


def _static_names() -> frozenset[str]:
    return frozenset(entry.name for entry in resources.files("actwheel.ui").joinpath("static").iterdir()
                     if entry.is_file())


#: The files under ``/ui/static/`` (a fixed list: a path never reaches the file system).
STATIC_FILES = _static_names()


def _relative(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "—"
    seconds = int((value - now).total_seconds())
    if seconds == 0:
        return "now"
    ahead, seconds = seconds > 0, abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            amount = f"{seconds // size} {unit}"
            break
    else:
        amount = f"{seconds} s"
    return f"in {amount}" if ahead else f"{amount} ago"


def _instant(value: datetime | None) -> str:
    return "—" if value is None else value.isoformat(timespec="seconds")


def _seconds(value: float) -> str:
    """A duration as people read it: ``0.0123`` → ``12.3 ms``, ``2.5`` → ``2.500 s``."""
    return f"{value * 1000:.1f} ms" if abs(value) < 1 else f"{value:.3f} s"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


_env = Environment(loader=PackageLoader("actwheel.ui", "templates"), autoescape=select_autoescape(default=True),
                   trim_blocks=True, lstrip_blocks=True)
_env.filters.update(instant=_instant, pretty=_pretty, seconds=_seconds)
_env.globals.update(relative=_relative, status_icons=STATUS_ICONS)


def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    """``template`` rendered with the request's CSRF token and caller, security headers set."""
    state = request.state
    context.setdefault("csrf", getattr(state, "csrf", ""))
    context.setdefault("caller", getattr(state, "caller", None))
    context.setdefault("path", request.url.path)
    html = _env.get_template(template).render(request=request, **context)
    return secure_headers(HTMLResponse(html, status_code=status))


def redirect(url: str) -> Response:
    """The 303 after a form POST (POST → 303 → GET)."""
    return secure_headers(RedirectResponse(url, status_code=303))


def secure_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def static_file(name: str) -> Response | None:
    """A vendored static file by name, or ``None``."""
    if name not in STATIC_FILES:
        return None
    body = resources.files("actwheel.ui").joinpath("static", name).read_bytes()
    suffix = "." + name.rsplit(".", 1)[-1]
    response = Response(body, media_type=_CONTENT_TYPES.get(suffix, "application/octet-stream"))
    response.headers["Cache-Control"] = "public, max-age=3600"
    return secure_headers(response)
