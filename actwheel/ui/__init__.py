"""The ops dashboard (issue 13): server-rendered pages under ``/ui/`` over the control plane.

Jinja2 templates (autoescaped), vendored htmx 2 with its SSE extension for live updates, and every
page usable as plain HTML forms (POST → 303 → GET). Signed in by an API key exchanged for a
server-side session (:mod:`actwheel.service.sessions`); every route is in
:data:`~actwheel.api.guard.ROUTE_POLICIES` with ``credential="session"``. See docs/dashboard.md.
"""

from __future__ import annotations

from actwheel.ui.pages import html_errors, ui_routes
from actwheel.ui.sessions import LocalSessions

__all__ = ["LocalSessions", "html_errors", "ui_routes"]
