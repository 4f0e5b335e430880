"""One URL redactor for every log line, repr and error that names a database or broker URL.

Pure string work (no driver, no yarl) so that any layer may call it. The user name stays
(it tells an operator which account is meant); the password, and query parameters whose
name says they hold a secret (``?password=``, ``?token=``, ``sslpassword``, ...), become ``***``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["MASK", "redact_url"]

MASK = "***"
#: A query parameter is secret when its lower-cased name contains one of these.
_SECRET_PARAMS = ("password", "passwd", "pwd", "secret", "token", "api_key", "apikey", "signature")


def redact_url(url: str) -> str:
    """``url`` with its password and secret-named query values replaced by ``***``.

    ``postgresql://u:p@ss@db/x`` → ``postgresql://u:***@db/x`` (the last ``@`` ends the
    credentials); a URL that cannot be parsed is replaced whole rather than shown.
    """
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return MASK
    return _redact_query(_redact_password(url, netloc))


def _redact_password(url: str, netloc: str) -> str:
    userinfo, at, host = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if not (at and colon):
        return url
    return url.replace(netloc, f"{user}:{MASK}@{host}", 1)


def _redact_query(url: str) -> str:
    head, question, rest = url.partition("?")
    if not question:
        return url
    query, hash_, fragment = rest.partition("#")
    pairs = [_redact_pair(pair) for pair in query.split("&")]
    return f"{head}?{'&'.join(pairs)}{hash_}{fragment}"


def _redact_pair(pair: str) -> str:
    name, equals, _ = pair.partition("=")
    if equals and any(secret in name.lower() for secret in _SECRET_PARAMS):
        return f"{name}={MASK}"
    return pair
