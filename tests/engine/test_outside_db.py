"""The ``db`` command (SPEC 7.1) against real databases: the same cases on SQLite and PostgreSQL.

PostgreSQL is a throwaway cluster on 127.0.0.1 (``tests/support/postgres.py``); SQLite a file in a
temporary folder. Sessions are in-process here (the worker bridge has its own tests); each database's
URL reaches its profile through a secret, so the dynamic URL and its masking are exercised too.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from s2o_kernel.engine import Engine, Session, default_settings, make_settings
from s2o_kernel.engine.settings import merge


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Any) -> dict[str, str]:
    """``{"dialect", "url"}`` of an empty database of each kind."""
    if request.param == "sqlite":
        return {"dialect": "sqlite", "url": f"sqlite:///{tmp_path / 'test.sqlite'}"}
    cluster = request.getfixturevalue("postgres")
    return {"dialect": "postgresql", "url": cluster.url, "reader_url": _reader_role(cluster.url)}


#: The password of the PostgreSQL role the read-only profile connects as.
READER_PASSWORD = "pg-reader-pass-51c2"


def _reader_role(url: str) -> str:
    """Make (once) a login role that may read every table and nothing of the server's files (a read-only
    profile refuses a superuser, SPEC 7.1); its URL."""
    import asyncio

    import asyncpg

    async def make() -> None:
        conn = await asyncpg.connect(url)
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = 's2o_reader'"):
                await conn.execute(f"CREATE ROLE s2o_reader LOGIN PASSWORD '{READER_PASSWORD}'")
                await conn.execute("GRANT pg_read_all_data TO s2o_reader")
        finally:
            await conn.close()

    asyncio.run(make())
    host = url.split("@", 1)[1]
    return f"postgresql://s2o_reader:{READER_PASSWORD}@{host}"


#: A text parameter into a DATE column: asyncpg types parameters from the statement, so PostgreSQL
#: gets it as text and casts it itself; SQLite stores the text.
_DATE = {"sqlite": ":made", "postgresql": "CAST(CAST(:made AS TEXT) AS DATE)"}


def _session(db: dict[str, str], **extra: Any) -> Session:
    data = merge(default_settings().to_dict(), {
        "secrets": {"DB_URL": db["url"], "READER_URL": db.get("reader_url", db["url"])},
        "profiles": {"db": {
            "main": {"url": "{ f'{sys.secret[\"DB_URL\"]}' }"},
            "reader": {"url": "{ f'{sys.secret[\"READER_URL\"]}' }", "read_only": True},
        }},
        **extra,
    })
    session = Session(Engine(make_settings(data)))
    for sql in ("DROP TABLE IF EXISTS items", "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, "
                "price NUMERIC(8, 2), made DATE)"):
        run = session.run_fragment({"db": {"profile": "main", "sql": sql}})
        assert run.code == "success", run.error
    rows = [{"db": {"profile": "main", "sql": "INSERT INTO items VALUES (:id, :name, :price, " + _DATE[db["dialect"]] + ")",
                    "params": {"id": i, "name": f"item {i}", "price": "{ 1.25 * " + str(i) + " }",
                               "made": "2025-01-0" + str(i)}}} for i in range(1, 6)]
    run = session.run_fragment(rows)
    assert run.code == "success", run.error
    return session


def _value(session: Session, fragment: Any) -> Any:
    run = session.run_fragment([*fragment, {"return": "{ result }"}] if isinstance(fragment, list) else
                               [fragment, {"return": "{ result }"}])
    assert run.code == "success", run.error
    return run.value


def test_rows_are_dicts_and_params_are_bound_never_formatted(db: dict[str, str]) -> None:
    s = _session(db)
    assert _value(s, {"db": {"profile": "main", "sql": "SELECT id, name FROM items WHERE id <= :n ORDER BY id",
                             "params": {"n": "{ 1 + 1 }"}}}) == [{"id": 1, "name": "item 1"}, {"id": 2, "name": "item 2"}]
    hostile = "x' OR '1'='1'; DROP TABLE items; --"
    assert _value(s, {"db": {"profile": "main", "sql": "SELECT id FROM items WHERE name = :name",
                             "params": {"name": hostile}}}) == []
    assert len(_value(s, {"db": {"profile": "main", "sql": "SELECT id FROM items"}})) == 5


def test_column_values_become_json(db: dict[str, str]) -> None:
    s = _session(db)
    rows = _value(s, {"db": {"profile": "main", "sql": "SELECT price, CAST(3 AS NUMERIC(5, 0)) AS whole, made "
                             "FROM items WHERE id = 2"}})
    assert rows == [{"price": 2.5, "whole": 3, "made": "2025-01-02"}]


def test_more_rows_than_the_limit_stop_the_run_before_all_are_read(db: dict[str, str]) -> None:
    s = _session(db, limits={"db_rows": 3})
    s.set_vars(agent={"before": 1})
    run = s.run_fragment({"db": {"profile": "main", "sql": "SELECT id FROM items"},
                          "onError": {"var": {"agent.handled": True}}})
    assert (run.code, run.error.code) == ("errorInAgent", "row-limit")
    assert "limits.db_rows = 3" in run.error.message
    assert s.agent_vars == {"before": 1}  # onError did not handle it; nothing changed
    # a row far past the limit fails when produced: reading stops long before it
    failing = {"sqlite": "abs(-9223372036854775807 - 1)", "postgresql": "1 / (x - 100000)"}[db["dialect"]]
    sql = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) "
           f"SELECT CASE WHEN x = 100000 THEN {failing} ELSE x END AS v FROM c")
    run = s.run_fragment({"db": {"profile": "main", "sql": sql}})
    assert run.error is not None and run.error.code == "row-limit", run.error
    s.update_settings({"limits": {"db_rows": 200000}})
    run = s.run_fragment({"db": {"profile": "main", "sql": sql}})  # read to the end, the row fails
    assert (run.code, run.error.code) == ("callFailed", "db-failed")


def test_read_only_profiles_are_refused_writes_by_the_database(db: dict[str, str]) -> None:
    s = _session(db)
    reopen = {"sqlite": "PRAGMA query_only = OFF",
              "postgresql": "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE"}[db["dialect"]]
    for sql in ("INSERT INTO items (id, name) VALUES (9, 'new')", "DELETE FROM items", "DROP TABLE items"):
        run = s.run_fragment({"db": {"profile": "reader", "sql": sql}})
        assert (run.code, run.error.code) == ("callFailed", "db-read-only"), (sql, run.error)
        # SQLite's authorizer refuses the pragma; PostgreSQL's next call sets its transaction read-only again
        expected = {"sqlite": "callFailed", "postgresql": "success"}[db["dialect"]]
        assert s.run_fragment({"db": {"profile": "reader", "sql": reopen}}).code == expected
    assert len(_value(s, {"db": {"profile": "reader", "sql": "SELECT id FROM items"}})) == 5


def test_database_errors_are_db_failed_with_the_drivers_message(db: dict[str, str]) -> None:
    s = _session(db)
    run = s.run_fragment({"db": {"profile": "main", "sql": "SELECT * FROM no_such_table"}})
    assert (run.code, run.error.code, run.error.path) == ("callFailed", "db-failed", "db")
    assert "no_such_table" in run.error.message
    handled = s.run_fragment({"db": {"profile": "main", "sql": "SELECT * FROM no_such_table"},
                              "onError": {"return": "{ [exc.code, exc.status] }"}})
    assert (handled.code, handled.value) == ("success", ["db-failed", None])
    missing = s.run_fragment({"db": {"profile": "main", "sql": "SELECT :a AS a"}})  # no value for :a
    assert missing.error is not None and missing.error.code == "db-failed"
    assert missing.error.message == "A value is required for bind parameter 'a'"  # no link to SQLAlchemy's site


def test_secret_values_never_show_in_rows_or_errors(db: dict[str, str]) -> None:
    s = _session(db)
    run = s.run_fragment({"db": {"profile": "main", "sql": "SELECT :u AS u",
                                 "params": {"u": "{ f'{sys.secret[\"DB_URL\"]}' }"}}})
    # a secret is never a parameter: SQL could hand it back transformed (red team 3)
    assert run.error is not None and run.error.code == "not-allowed" and run.error.path == "db.params.u"
    assert db["url"] not in repr(run)
    bad = db["url"].replace("test.sqlite", "missing/dir/x.sqlite") if db["dialect"] == "sqlite" else \
        db["url"].replace("/s2o", "/no_such_database")
    s.update_settings({"secrets": {"BAD": bad}, "profiles": {"db": {"bad": {"url": "{ f'{sys.secret[\"BAD\"]}' }"}}}})
    run = s.run_fragment({"db": {"profile": "bad", "sql": "SELECT 1"}})
    assert run.error is not None and run.error.code == "db-failed"
    assert bad not in run.error.message and "pg-test-pass" not in run.error.message


def test_validation_unknown_profile_missing_secret_and_dynamic_sql() -> None:
    data = merge(default_settings().to_dict(), {"profiles": {"db": {
        "locked": {"url": "{ f'postgresql://u:{sys.secret[\"PG_PASSWORD\"]}@h/db' }"}}}})
    s = Session(Engine(make_settings(data)))
    cases = [
        ({"db": {"profile": "nope", "sql": "SELECT 1"}}, "unknown-profile", "db.profile"),
        ([{"var": {"x": 1}}, {"db": {"profile": "locked", "sql": "SELECT 1"}}], "missing-secret", "[1].db.profile"),
        ({"db": {"profile": "demo", "sql": "{ 'SELECT ' + '1' }"}}, "fragment", "db.sql"),
        ({"db": {"profile": "demo", "sql": "SELECT 1", "params": {"a": "{ undefined_name }"}}}, "unknown-name",
         "db.params.a"),
    ]
    for fragment, code, path in cases:
        run = s.run_fragment(fragment)
        assert (run.error.code, run.error.path, run.error.stage) == (code, path, "validate"), run.error


def test_the_demo_database_is_made_on_first_use(data_dir: Any) -> None:
    s = Session(Engine(default_settings()))
    assert not (data_dir / "demo.sqlite").exists()
    counts = _value(s, {"db": {"profile": "demo", "sql": "SELECT (SELECT count(*) FROM customers) AS customers, "
                               "(SELECT count(*) FROM orders) AS orders, (SELECT count(*) FROM order_lines) AS lines"}})
    assert (data_dir / "demo.sqlite").is_file()
    assert counts[0]["customers"] >= 5 and counts[0]["orders"] >= 10 and counts[0]["lines"] >= 20
    joined = _value(s, {"db": {"profile": "demo", "sql": "SELECT c.name, sum(l.quantity * l.unit_price) AS total "
                               "FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_lines l "
                               "ON l.order_id = o.id GROUP BY c.name ORDER BY c.name"}})
    assert joined and all(set(row) == {"name", "total"} for row in joined)
    with sqlite3.connect(data_dir / "demo.sqlite") as conn:  # an ordinary SQLite file
        assert conn.execute("SELECT count(*) FROM customers").fetchone()[0] == counts[0]["customers"]


def test_reset_disposes_the_pool_and_the_next_call_opens_it_again(db: dict[str, str]) -> None:
    s = _session(db)
    gateway = s.outside
    assert gateway._pools
    s.reset()
    assert not gateway._pools
    assert len(_value(s, {"db": {"profile": "main", "sql": "SELECT id FROM items"}})) == 5


def test_a_session_that_is_gone_leaves_no_thread_and_no_connection(db: dict[str, str]) -> None:
    """A session dropped without ``reset`` (a library user's, a test's) ends its gateway's loop thread
    and closes its pool: no driver thread (aiosqlite has one per connection) and no connection outlives
    it, and none is left for the garbage collector to close from another loop."""
    import gc
    import threading
    import time

    before = set(threading.enumerate())
    others = _backends(db["url"]) if db["dialect"] == "postgresql" else 0
    session = _session(db)
    if db["dialect"] == "postgresql":
        assert _backends(db["url"]) > others  # the pool's
    assert len(_value(session, {"db": {"profile": "main", "sql": "SELECT id FROM items"}})) == 5
    started = {t for t in set(threading.enumerate()) - before if t.name != "s2o-watchdog"}  # the process's own
    assert any(t.name == "s2o-session-loop" for t in started), started
    del session
    gc.collect()
    deadline = time.monotonic() + 5
    while any(t.is_alive() for t in started) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [t.name for t in started if t.is_alive()] == []
    if db["dialect"] == "postgresql":  # and the server has no connection of it left
        assert _backends(db["url"]) <= others


def _backends(url: str) -> int:
    """How many other connections the PostgreSQL server at ``url`` holds to its database."""
    import asyncio

    import asyncpg

    async def count() -> int:
        conn = await asyncpg.connect(url)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM pg_stat_activity "
                                           "WHERE datname = current_database() AND pid <> pg_backend_pid()"))
        finally:
            await conn.close()

    return asyncio.run(count())
