"""SQL lives in ``sql/<dialect>/``: numbered migrations and one ``queries.sql`` of named queries.

A query block starts with ``-- name: <query_name>`` and runs to the next one. Parameters
are written ``:name`` in both dialects; for PostgreSQL they are compiled once to ``$n``
(asyncpg), SQLite binds them by name natively.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["Migration", "Query", "load_migrations", "load_queries", "qmark", "split_statements"]

_NAME_LINE = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# ``:name`` but not the second colon of a ``::type`` cast.
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


@dataclass(frozen=True, slots=True)
class Query:
    """One named query: its SQL (``$n`` for PostgreSQL) and its parameter names in ``$n`` order."""

    name: str
    sql: str
    params: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def _read(dialect: str, filename: str) -> str:
    return resources.files("actwheel.storage").joinpath("sql", dialect, filename).read_text("utf-8")


def _positional(sql: str) -> tuple[str, tuple[str, ...]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PARAM.sub(number, sql), tuple(names)


def qmark(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with every ``:name`` replaced by ``?``, and the names in placeholder order (repeats kept)."""
    names: list[str] = []

    def mark(match: re.Match[str]) -> str:
        names.append(match.group(1))
        return "?"

    return _PARAM.sub(mark, sql), tuple(names)


@cache
def load_queries(dialect: str) -> dict[str, Query]:
    """Every named query of ``dialect``, parsed once per process."""
    text = _read(dialect, "queries.sql")
    parts = _NAME_LINE.split(text)
    queries: dict[str, Query] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = body.strip().rstrip(";")
        if name in queries:
            raise ValueError(f"duplicate query name {name!r} in sql/{dialect}/queries.sql")
        if dialect == "postgres":
            sql, params = _positional(sql)
        else:
            params = tuple(dict.fromkeys(_PARAM.findall(sql)))
        queries[name] = Query(name, sql, params)
    return queries


@cache
def load_migrations(dialect: str) -> tuple[Migration, ...]:
    """The migrations of ``dialect`` in version order."""
    folder = resources.files("actwheel.storage").joinpath("sql", dialect)
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name.removesuffix(".sql"), entry.read_text("utf-8")))
    return tuple(sorted(found, key=lambda m: m.version))


_BODY_TRIGGER = re.compile(r"CREATE\s+(?:TEMP\s+|TEMPORARY\s+)?TRIGGER\b.*\bBEGIN\b", re.IGNORECASE | re.DOTALL)
_BODY_END = re.compile(r"^\s*END\s*;\s*$", re.IGNORECASE)


def split_statements(script: str) -> list[str]:
    """Split a migration into statements at ``;`` line ends, ``--`` comment lines dropped.

    Two bodies hold ``;`` line ends of their own and stay whole: a ``$$ … $$`` quoted body
    (a PostgreSQL function) and a ``CREATE TRIGGER … BEGIN … END;`` (SQLite), which ends at
    a line ``END;``.
    """
    statements: list[str] = []
    current: list[str] = []
    quoted = False
    for line in script.splitlines():
        if not quoted and line.lstrip().startswith("--"):
            continue
        current.append(line)
        if line.count("$$") % 2:
            quoted = not quoted
        if quoted or not line.rstrip().endswith(";"):
            continue
        text = "\n".join(current).strip()
        if _BODY_TRIGGER.match(text) and not _BODY_END.match(line):
            continue
        statements.append(text.removesuffix(";").strip())
        current = []
    rest = "\n".join(current).strip()
    return [s for s in [*statements, rest] if s]
