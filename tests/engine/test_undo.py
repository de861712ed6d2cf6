"""A failing command puts back the items of locals it wrote, and only those (engine/undo.py; docs/design.md,
"A failing command"). Red team of 2026-12-04, third round: the first journal put items back by position and
kept every overwritten value; each test failed on it."""

from __future__ import annotations

import collections

from s2o_kernel.engine import Engine, IsolatedSession, Session, default_settings
from s2o_kernel.engine.settings import make_settings


def session(**locals_):
    return Session(Engine(default_settings()), locals=locals_)


def test_undo_of_an_append_deletes_by_position_after_an_expression_inserted():
    """The journal deletes the appended item by index; an expression's xs.insert(0, ...) moved it, so the undo
    deletes the user's original item 2 and keeps the engine-written 7 (neither "before" nor "before + effect")."""
    s = session(xs=[1, 2])
    r = s.run_fragment({"var": {"xs[2]": 7, "y": "{ xs.insert(0, 0) }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert s.locals["xs"] == [0, 1, 2]  # the insert stays (expression's effect), the engine's append goes


def test_undo_of_an_item_write_lands_on_the_wrong_position_after_reverse():
    """xs[0] = 100 by the engine, then xs.reverse() by an expression, then a failure: the undo writes the old
    item at index 0, so the engine's 100 survives at the end of the list."""
    s = session(xs=[1, 2, 3])
    r = s.run_fragment({"var": {"xs[0]": 100, "y": "{ xs.reverse() }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert 100 not in s.locals["xs"]
    assert s.locals["xs"] == [3, 2, 1]


def test_undo_deletes_a_new_key_an_expression_also_set():
    """docs/design.md: what an expression's methods change in place stays. d.update(k=2) is the expression's
    effect, but the undo of the engine's new key d['k'] deletes it."""
    s = session(d={"a": 1})
    r = s.run_fragment({"var": {"d['k']": 1, "y": "{ d.update(k=2) }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert s.locals["d"] == {"a": 1, "k": 2}


def test_undo_overwrites_an_existing_key_an_expression_changed_since():
    s = session(d={"a": 1})
    r = s.run_fragment({"var": {"d['a']": 5, "y": "{ d.update(a=7) }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert s.locals["d"] == {"a": 7}


def test_item_write_into_a_dict_subclass_local_is_not_put_back():
    """The engine writes items into any holder, but the journal notes only exact list/dict: a failing command
    leaves od['a'] / dd['a'] written."""
    s = session(od=collections.OrderedDict(a=1), dd=collections.defaultdict(int, a=1))
    r = s.run_fragment({"var": {"od['a']": 5, "dd['a']": 6, "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert s.locals["od"] == {"a": 1}
    assert s.locals["dd"] == {"a": 1}


def test_journal_keeps_every_overwritten_value_of_a_long_loop():
    """The journal keeps (holder, key, old) for every pass of a loop until the run ends: 400 passes writing a
    fresh 1-3 MB string to d['k'] hold them all, and the isolated worker runs out of memory; the same loop
    writing a plain local succeeds. Only the first old value per (holder, key) since a mark is needed."""
    iso = IsolatedSession(make_settings({"limits": {"memory": 200 * 1024 * 1024, "time": 60}}))
    try:
        iso.set_vars(locals={"d": {"k": ""}, "n": ""})

        def loop(target):
            return {"for": {"item": "i", "in": "{ range(400) }",
                            "commands": [{"var": {target: "{ str(i) * 1000000 }"}}]}}

        assert iso.run_fragment(loop("n")).code == "success"
        r = iso.run_fragment(loop("d['k']"))
        assert r.code == "success", r.error
    finally:
        iso.close()


def test_a_loop_that_fails_puts_back_its_writes_and_keeps_its_expressions_changes():
    """A loop writes ``d['a']`` each pass (noted once: the oldest item is what goes back), an expression of the
    second pass adds ``d['b']``; the third pass fails the loop: ``d['a']`` is as before, ``d['b']`` stays."""
    s = session(d={"a": 1})
    r = s.run_fragment({"for": {"item": "v", "in": [1, 2, 3], "commands": [
        {"var": {"d['a']": "{ v * 10 }", "y": "{ d.update(b=v) if v == 2 else None }"}},
        {"var": {"z": "{ 1 / 0 if v == 3 else 0 }"}}]}})
    assert r.code == "errorInAgent" and s.locals["d"] == {"a": 1, "b": 2}
