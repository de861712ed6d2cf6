"""``db`` calls (SPEC 7.1): SQL through a database profile, with SQLAlchemy 2's async engine.

One pooled ``AsyncEngine`` per profile per gateway (disposed by :meth:`~.gateway.Gateway.close`). A
call's fields are ``{"sql": TEXT, "params": {NAME: JSON}, "max_rows": INT}``: the SQL text is the
fragment's literal (``text(sql)``) and values travel only as bound parameters, which the driver binds.

* **URLs.** A profile's ``url`` is a SQLAlchemy URL; ``sqlite://`` and ``postgresql://`` (or
  ``postgres://``) get their async drivers (``aiosqlite``, ``asyncpg``). :data:`DEMO_URL` names the
  embedded ``demo`` database: a SQLite file ``demo.sqlite`` in the data directory
  (:func:`data_dir`), made on first use with customers, orders and order lines.
* **Rows** stream from the database and are counted as they come: the row past ``max_rows`` (the
  run's ``limits.db_rows``; a worker's parent holds it to its own) stops the call with ``row-limit``
  before the rest is read. A statement that
  returns no rows gives ``[]``. Each call is one transaction, committed when it succeeds.
* **Bytes.** The rows are also counted in bytes as they come (:func:`row_bytes`): past
  :data:`MAX_RESULT_BYTES` the call stops with ``db-too-large`` before the rest is read, and a SQLite
  connection refuses to build a single text or blob past it (``SQLITE_LIMIT_LENGTH``), so the process
  making the call (the kernel's, which has no memory cap) never holds more than that of one result.
* **JSON.** Column values become JSON (:func:`json_value`): ``Decimal`` → ``int`` when whole, else
  ``float``; dates and times → ISO 8601 text; ``timedelta`` → seconds (``float``); ``UUID`` → text;
  bytes → base64 text; a non-finite float → ``None``; anything else → its text.
* **read_only** profiles are refused writes by the database itself, never by reading the SQL: SQLite
  runs each call after ``PRAGMA query_only = ON`` (and an authorizer refuses the pragmas that would undo
  it, :func:`sqlite_authorizer`), PostgreSQL in a ``SET TRANSACTION READ ONLY``
  transaction, and the transaction is rolled back. The database's refusal is ``db-read-only``. A
  read-only PostgreSQL profile whose role is a superuser, or may write or read server files or run
  programs (:data:`SERVER_POWER_ROLES`), is refused every call (``db-read-only``): ``COPY … TO PROGRAM``
  works in a read-only transaction.
* A SQLite statement reaches its profile's file only: ``ATTACH`` / ``VACUUM INTO`` of another file is
  refused (:func:`sqlite_authorizer`).
* Any other database error is ``db-failed`` with the driver's message (masked by the gateway).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import decimal
import math
import os
import re
import secrets
import sqlite3
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...bounds import MAX_RESULT_BYTES
from ..errors import S2OError
from .call import OutsideCall, StreamFn

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from .gateway import Gateway
    from .profiles import DbProfile

#: The ``url`` of the embedded ``demo`` database (SPEC 7.1).
DEMO_URL = "s2o-demo:"
#: Environment variable naming the data directory (where ``demo.sqlite`` is made).
DATA_DIR_ENV = "S2O_DATA_DIR"
#: SQLSTATE / SQLite result code of a write refused by a read-only transaction or connection.
_PG_READ_ONLY = "25006"
_SQLITE_READONLY = 8
_SQLITE_TOOBIG = 18


def data_dir() -> Path:
    """The data directory: ``$S2O_DATA_DIR``, else ``$XDG_DATA_HOME/s2o``, else ``~/.local/share/s2o``."""
    named = os.environ.get(DATA_DIR_ENV)
    if named:
        return Path(named)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "s2o"


def async_url(url: str) -> str:
    """``url`` with its async driver (see the module doc); :data:`DEMO_URL` becomes the demo file's URL
    (the file is made when missing)."""
    if url.strip() == DEMO_URL:
        return f"sqlite+aiosqlite:///{demo_database()}"
    for plain, driver in (("sqlite://", "sqlite+aiosqlite://"), ("postgresql://", "postgresql+asyncpg://"),
                          ("postgres://", "postgresql+asyncpg://")):
        if url.startswith(plain):
            return driver + url[len(plain):]
    return url


def json_value(value: Any) -> Any:
    """A column value as JSON (see the module doc)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return str(value)


class LimitedConnection(sqlite3.Connection):
    """A SQLite connection that builds no text or blob longer than :data:`MAX_RESULT_BYTES`
    (``SQLITE_LIMIT_LENGTH``; past it the statement fails with ``SQLITE_TOOBIG``, ``db-too-large``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_RESULT_BYTES)


def make_engine(url: str, read_only: bool) -> tuple[Any, Any]:
    """A pooled ``AsyncEngine`` for ``url`` and its async closer; a SQLite engine of a ``read_only``
    profile sets ``PRAGMA query_only`` on every new connection."""
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    try:
        sqlite = async_url(url).startswith("sqlite+aiosqlite:")
        engine = create_async_engine(async_url(url), connect_args={"factory": LimitedConnection} if sqlite else {})
    except Exception as exc:  # a URL SQLAlchemy cannot use (unknown driver, bad syntax)
        raise S2OError("db-failed", f"the database URL cannot be used: {type(exc).__name__}: {exc}") from None
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine.sync_engine, "connect")
        def _confine(dbapi_connection: Any, record: Any) -> None:
            from sqlalchemy.util import await_

            if read_only:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA query_only = ON")
                cursor.close()
            await_(record.driver_connection.set_authorizer(sqlite_authorizer(read_only)))
    return engine, engine.dispose


#: Pragmas a read-only SQLite profile may run with an argument: they only read (``PRAGMA table_info(t)``).
_READING_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list", "index_info",
                              "index_xinfo", "foreign_key_list", "foreign_key_check", "integrity_check",
                              "quick_check", "function_list", "pragma_list", "collation_list"})
#: Databases a statement may attach: temporary ones only (``VACUUM`` attaches ``''``).
_TEMPORARY = frozenset({"", ":memory:"})


def sqlite_authorizer(read_only: bool) -> Any:
    """The authorizer (``sqlite3.Connection.set_authorizer``) of every SQLite profile's connection, so that a
    statement reaches its profile's database file and nothing else (SPEC 7.1, 12):

    * ``ATTACH`` (also ``VACUUM INTO``, which attaches its target) of anything but a temporary database is
      refused: it would read, create or write any file the kernel may (``ATTACH '/home/u/x.sqlite'``);
    * for a ``read_only`` profile, a pragma given a value is refused unless it only reads
      (:data:`_READING_PRAGMAS`) or is ``query_only = ON``: ``PRAGMA query_only = OFF`` would lift the
      refusal of writes, ``PRAGMA journal_mode = WAL`` changes the file.

    The driver reports a refusal as "not authorized" (``db-failed``)."""
    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action == sqlite3.SQLITE_ATTACH and arg1 not in _TEMPORARY:
            return sqlite3.SQLITE_DENY
        if read_only and action == sqlite3.SQLITE_PRAGMA and arg2 is not None:
            name = (arg1 or "").lower()
            if name not in _READING_PRAGMAS and not (name == "query_only" and arg2.lower() in ("on", "1", "true")):
                return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    return authorize


def _sqlite_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of the driver's exception behind ``exc``, else ``None``."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        code = getattr(seen, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


def _read_only_refusal(exc: BaseException) -> bool:
    """The database refused a write because the connection or transaction is read-only: SQLSTATE
    25006 (PostgreSQL) or SQLITE_READONLY, anywhere in the chain of the driver's exceptions."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        for candidate in (seen, getattr(seen, "orig", None)):
            if getattr(candidate, "sqlstate", None) == _PG_READ_ONLY:
                return True
            code = getattr(candidate, "sqlite_errorcode", None)
            if isinstance(code, int) and code & 0xFF == _SQLITE_READONLY:
                return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


async def handle(gw: Gateway, profile: DbProfile, request: OutsideCall, on_stream: StreamFn | None) -> Any:
    """Run one ``db`` call (see the module doc); the rows as a list of dicts of JSON values."""
    from sqlalchemy import text

    name = request.profile or ""
    fields = request.fields
    sql, params, max_rows = fields.get("sql"), fields.get("params") or {}, fields.get("max_rows")
    if type(sql) is not str or type(params) is not dict or type(max_rows) is not int or max_rows < 1:
        raise S2OError("fragment", "a db call has sql (text), params (an object) and max_rows (a positive int)")
    url = gw.credentials("db", name, profile)["url"]
    engine = await gw.pooled(("db", name), lambda: make_engine(url, profile.read_only))
    try:
        async with engine.connect() as conn:
            if profile.read_only and engine.dialect.name != "sqlite":  # SQLite: query_only since connect
                await conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                if engine.dialect.name == "postgresql":
                    await _refuse_server_powers(conn, name)
            rows = await _interruptible(conn, _rows(conn, text(sql), params, max_rows))
            await (conn.rollback() if profile.read_only else conn.commit())
            return rows
    except S2OError:
        raise
    except OSError as exc:  # the server cannot be reached
        raise S2OError("db-failed", f"the database cannot be reached: {exc}") from None
    except Exception as exc:  # SQLAlchemy's errors, and the driver's own raised while rows stream
        if _sqlite_code(exc) == _SQLITE_TOOBIG:  # a value past SQLITE_LIMIT_LENGTH
            raise too_large() from None
        if profile.read_only and _read_only_refusal(exc):
            raise S2OError("db-read-only", f"the profile {name!r} is read-only: the database refused the "
                           f"statement ({_driver_message(exc)})") from None
        raise S2OError("db-failed", _driver_message(exc)) from None


#: PostgreSQL roles whose members act on the server outside any transaction: ``COPY … TO 'file'``,
#: ``COPY … TO PROGRAM``, ``pg_read_file`` (superusers are members of every role).
SERVER_POWER_ROLES = ("pg_write_server_files", "pg_execute_server_program", "pg_read_server_files")


async def _refuse_server_powers(conn: Any, name: str) -> None:
    """Refuse (``db-read-only``) a read-only PostgreSQL profile whose role is a superuser or a member of
    :data:`SERVER_POWER_ROLES`: a read-only transaction does not stop such a role from writing server
    files or running programs on the database's host, so the profile could not keep its promise."""
    checks = " OR ".join(f"pg_has_role('{role}', 'MEMBER')" for role in SERVER_POWER_ROLES)
    powers = (await conn.exec_driver_sql(f"SELECT {checks}")).scalar()
    if powers:
        raise S2OError("db-read-only", f"the profile {name!r} is read-only, but its role is a superuser or may "
                       f"read or write the server's files or run programs ({', '.join(SERVER_POWER_ROLES)}); "
                       "connect it as a role without them")


async def _interruptible(conn: Any, rows: Coroutine[Any, Any, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """``await rows``; when cancelled (the run stopped or timed out), a SQLite statement still running in
    the driver's thread is interrupted first (``sqlite3.Connection.interrupt``, safe from any thread), so
    the call ends now and not when the statement would have: the cancellation alone reaches the query
    only once SQLAlchemy's handling of it, queued behind the statement in that thread, is done.
    (asyncpg cancels on the server itself.)"""
    raw = await conn.get_raw_connection() if conn.dialect.name == "sqlite" else None
    reading = asyncio.ensure_future(rows)
    try:
        return await asyncio.shield(reading)
    except asyncio.CancelledError:
        if raw is not None:
            with contextlib.suppress(Exception):
                await raw.driver_connection.interrupt()  # aiosqlite: the sqlite3 call, made at once
        reading.cancel()
        with contextlib.suppress(BaseException):
            await reading
        raise


async def _rows(conn: Any, statement: Any, params: dict[str, Any], max_rows: int) -> list[dict[str, Any]]:
    from sqlalchemy.exc import ResourceClosedError

    result = await conn.stream(statement, params)
    rows: list[dict[str, Any]] = []
    size = 0
    try:
        async for row in result.mappings():
            if len(rows) >= max_rows:
                raise S2OError("row-limit", f"the db command returned more than {max_rows} rows "
                               f"(limits.db_rows = {max_rows}); the rest was not read")
            size += row_bytes(row)
            if size > MAX_RESULT_BYTES:
                raise too_large()
            rows.append({str(k): json_value(v) for k, v in row.items()})
    except ResourceClosedError:  # a statement that returns no rows (INSERT, CREATE)
        return []
    finally:
        await result.close()
    return rows


def row_bytes(row: Any) -> int:
    """About the bytes ``row`` (a mapping of column values) takes as JSON, counted before it is converted:
    text and names by their length, a blob as its base64 text, anything else as 16."""
    size = 0
    for key, value in row.items():
        size += len(str(key)) + 4
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            size += len(value) * 4 // 3 + 4
        else:
            size += 16
    return size


def too_large() -> S2OError:
    """``db-too-large``: a result, or one of its values, past :data:`MAX_RESULT_BYTES`."""
    return S2OError("db-too-large", f"the db command's result is larger than {MAX_RESULT_BYTES} bytes; the rest "
                    "was not read (fetch fewer or smaller rows)")


def _driver_message(exc: Exception) -> str:
    """The driver's own message (without SQLAlchemy's statement and parameter dump)."""
    orig = getattr(exc, "orig", None)
    text = _BACKGROUND.sub("", str(orig) if orig is not None else str(exc))
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


#: SQLAlchemy's pointer to its own web page of the error class, appended to its messages: not the driver's.
_BACKGROUND = re.compile(r"\s*\(Background on this error at: [^)]*\)")


# -- the embedded demo database -------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     ordered_on TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_lines (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
                          product TEXT NOT NULL, quantity INTEGER NOT NULL, unit_price REAL NOT NULL);
"""
_CUSTOMERS = [("Ada Lovelace", "London"), ("Alan Turing", "Manchester"), ("Grace Hopper", "New York"),
              ("Edsger Dijkstra", "Austin"), ("Barbara Liskov", "Boston"), ("Donald Knuth", "Stanford"),
              ("Frances Allen", "Peru NY"), ("Ken Thompson", "Murray Hill")]
_PRODUCTS = [("notebook", 4.5), ("pencil", 0.8), ("stapler", 12.0), ("lamp", 24.9), ("chair", 89.0)]
_STATUSES = ("shipped", "open", "cancelled", "shipped")


def demo_database() -> Path:
    """The path of the demo database, made when missing (atomically: two kernels may start at once).

    It is made under a random name beside it (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600: no name
    another local user could plant a link at in advance), then renamed in place. Raises ``OSError``.
    """
    path = data_dir() / "demo.sqlite"
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".demo-{secrets.token_hex(16)}.sqlite")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    try:
        _fill_demo(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _fill_demo(tmp: Path) -> None:
    """Write the demo tables and rows into the empty database file ``tmp``."""
    with contextlib.closing(sqlite3.connect(tmp)) as conn:
        conn.executescript(_SCHEMA)
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", [
            (i, name, name.split()[0].lower() + "@example.com", city)
            for i, (name, city) in enumerate(_CUSTOMERS, start=1)])
        orders = [(i, (i * 3) % len(_CUSTOMERS) + 1, f"2025-{(i % 12) + 1:02d}-{(i * 7) % 28 + 1:02d}",
                   _STATUSES[i % len(_STATUSES)]) for i in range(1, 16)]
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
        lines: list[tuple[int, int, str, int, float]] = []
        for order_id, *_ in orders:
            for j in range(1 + order_id % 3):
                product, price = _PRODUCTS[(order_id + j * 2) % len(_PRODUCTS)]
                lines.append((len(lines) + 1, order_id, product, 1 + (order_id + j) % 4, price))
        conn.executemany("INSERT INTO order_lines VALUES (?, ?, ?, ?, ?)", lines)
        conn.commit()

