"""Completion after a literal (``'a,b'.sp``, ``[1, 2].co``): its type's members, read, never run."""

from __future__ import annotations

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, Session, default_settings
from s2o_kernel.kernel.completion import complete


@pytest.fixture(scope="module")
def session() -> Session:
    return Session(Engine(default_settings()))


@pytest.mark.parametrize("code, expected, start", [
    ('"abc".up', ["upper"], 6),
    ("'a,b'.sp", ["split", "splitlines"], 6),
    ("[1, 2].co", ["copy", "count"], 7),
    ('len("abc".st', ["startswith", "strip"], 10),
    ('{"a": 1}.ke', ["keys"], 9),
    ("(1, 2).in", ["index"], 7),
    ("b'x'.hex", ["hex"], 5),
])
def test_a_literal_offers_its_types_members(session, code, expected, start):
    reply = complete(code, len(code), session)
    assert reply["matches"] == expected
    assert (reply["cursor_start"], reply["cursor_end"]) == (start, len(code))
    assert [t["type"] for t in reply["metadata"]["_jupyter_types_experimental"]] == ["member"] * len(expected)


def test_refused_members_are_not_offered(session):
    names = complete("'x'.", 4, session)["matches"]
    assert "upper" in names and "format" not in names and "format_map" not in names
    assert not any(n.startswith("_") for n in names)


@pytest.mark.parametrize("code", [
    "f'x'.up",  # an f-string is not a literal
    "(1).bi", "foo().up", "[x].co",  # not a listed type, a call, a name inside
    "[" * 600 + "]" * 600 + ".co",  # too deep to read
    "'" + "a" * 2000 + "'.up",  # longer than the engine reads
    "[1, 2\n.co",  # an open bracket
])
def test_anything_else_offers_nothing(session, code):
    assert complete(code, len(code), session)["matches"] == []


def test_the_worker_answers_the_same():
    iso = IsolatedSession(default_settings())
    try:
        assert complete("'a,b'.sp", 8, iso)["matches"] == ["split", "splitlines"]
    finally:
        iso.close()
