"""A failing command puts back the items of locals it wrote, and only those (engine/run/undo.py; docs/design.md,
"A failing command"). Red team of 2026-12-04, third and fourth rounds: the first journal put items back by
position and kept every overwritten value; the second searched by identity (and took the user's own equal
item) and kept one value a pass when the loop's body took snapshots; each test failed on the code before."""

from __future__ import annotations

import collections

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, Session, default_settings
from s2o_kernel.engine.settings import make_settings


def session(**locals_):
    return Session(Engine(default_settings()), locals=locals_)


def test_an_item_an_expression_moved_stays_where_it_moved_it():
    """An item is put back only where the engine wrote it, while it is still there: after an expression's
    ``insert`` or ``reverse`` moved it, it stays where the expression left it (searching for it elsewhere took
    the user's own item when both were one object: fourth round, below)."""
    s = session(xs=[1, 2])
    r = s.run_fragment({"var": {"xs[2]": 7, "y": "{ xs.insert(0, 0) }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent" and s.locals["xs"] == [0, 1, 2, 7]  # the insert's effect; 7 not in place
    s = session(xs=[1, 2, 3])
    r = s.run_fragment({"var": {"xs[0]": 100, "y": "{ xs.reverse() }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent" and s.locals["xs"] == [3, 2, 100]


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


@pytest.mark.parametrize("xs, written", [([None, 1], None), ([1, 2], 1), (["a", "b"], "a")])
def test_undo_of_an_append_an_expression_popped_deletes_the_users_own_equal_item(xs, written):
    """F1. The engine appends ``written`` (a small int / None / interned str: the same object as xs[0]); an
    expression pops it (its own effect, kept); the command fails. _put_back does not find the value at the
    appended index and _find() deletes the *user's* identical item at index 0 instead."""
    before = list(xs)
    s = session(xs=xs)
    r = s.run_fragment({"var": {f"xs[{len(xs)}]": written, "t": "{ xs.pop() }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert s.locals["xs"] == before  # actual: the user's first item is gone ([1], [2], ['b'])


def test_undo_of_an_item_write_an_expression_removed_overwrites_another_item():
    """F1b. The engine writes 3 at xs[0] (xs also holds 3 at the end); an expression pops index 0 (kept);
    the undo finds 'its' 3 at the end and overwrites the user's 3 with the old xs[0]."""
    s = session(xs=[1, 2, 3])
    r = s.run_fragment({"var": {"xs[0]": 3, "t": "{ xs.pop(0) }", "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert s.locals["xs"] == [2, 3]  # actual [2, 1]: a value that was never at that place


def _loop_memory(body):
    iso = IsolatedSession(make_settings({"limits": {"memory": 200 * 1024 * 1024, "time": 60}}))
    try:
        iso.set_vars(locals={"d": {"k": ""}})
        return iso.run_fragment({"for": {"item": "i", "in": "{ range(400) }", "commands": body}})
    finally:
        iso.close()


@pytest.mark.parametrize("body", [
    [{"var": {"d['k']": "{ str(i) * 1000000 }"}}, {"log": "pass {i}"}],
    [{"var": {"d['k']": "{ str(i) * 1000000 }", "j": "{ i }"}}],
    [{"if": {"condition": "{ True }", "then": [{"var": {"d['k']": "{ str(i) * 1000000 }"}}]}}],
], ids=["var-then-log", "two-field-var", "var-inside-if"])
def test_journal_keeps_one_old_value_per_item_when_the_loop_body_takes_snapshots(body):
    """F2. The dedupe (``_since_mark``) is reset by every mark(), i.e. by every non-atomic command's
    snapshot: a loop whose body has any second command, a two-field var or an ``if`` journals d['k'] once
    per pass (1000 passes -> 1000 entries), holding every overwritten 1 MB string: memory-limit."""
    r = _loop_memory(body)
    assert r.code == "success", r.error


def test_item_written_into_a_deque_or_userdict_is_put_back():
    """F3 (low). ItemJournal.note ignores holders other than list/dict, but var writes into any holder:
    a failing command leaves deque / UserDict / UserList items written."""
    s = session(dq=collections.deque([1, 2]), u=collections.UserDict(a=1), ul=collections.UserList([1]))
    r = s.run_fragment({"var": {"dq[0]": 9, "u['a']": 9, "ul[0]": 9, "z": "{ 1/0 }"}})
    assert r.code == "errorInAgent"
    assert (list(s.locals["dq"]), dict(s.locals["u"]), list(s.locals["ul"])) == ([1, 2], {"a": 1}, [1])


def test_a_one_target_item_write_the_whole_value_check_refuses_is_put_back():
    """Fifth round: a ``var`` of one item target wrote the item, then the variable's whole value was refused
    (too many items to check), and the command, taken for atomic, had no window to undo it."""
    s = session()
    assert s.run_fragment({"var": {"xs": "{ [5, [0] * 10000000] }"}}).code == "success"
    r = s.run_fragment({"var": {"xs[0]": "{ [1] }"}})
    assert (r.code, r.error.code) == ("errorInAgent", "not-allowed")
    assert s.locals["xs"][0] == 5
    r = s.run_fragment({"for": {"item": "i", "in": [0], "commands": {"var": {"xs[0]": "{ [1] }"}}}})
    assert r.error.code == "not-allowed" and s.locals["xs"][0] == 5


@pytest.mark.parametrize("holder", ["collections.ChainMap({'k': 1})", "bytearray(b'abc')"])
def test_an_item_target_in_a_holder_the_journal_cannot_restore_is_refused(holder):
    """Fifth round: items of holders the journal does not put back (ChainMap, bytearray) stayed written after
    the command failed; ``var`` now sets items of lists and dicts (and deque, UserList, UserDict) only."""
    s = Session(Engine(make_settings({"allowlist": "collections\nbytearray\n"})))
    assert s.run_fragment({"var": {"h": f"{{ {holder} }}"}}).code == "success"
    before = repr(s.locals["h"])
    key = "'k'" if "ChainMap" in holder else "0"
    r = s.run_fragment({"var": {f"h[{key}]": 120, "boom": "{ 1/0 }"}})
    assert (r.code, r.error.code, r.error.path) == ("errorInAgent", "runtime", f"var.h[{key}]")
    assert "var sets items of lists and dicts" in r.error.message
    assert repr(s.locals["h"]) == before


def test_an_item_target_in_a_subclass_that_stores_something_else_is_refused():
    """Sixth round: a host dict subclass whose ``__setitem__`` wraps the value stayed written after the command
    failed (the journal found another value than it wrote, and left it). Only exact holder types are written."""

    class Tagged(dict):  # type: ignore[type-arg]
        def __setitem__(self, key, value):
            super().__setitem__(key, ("tag", value))

    s = session(d=Tagged(k=0))
    r = s.run_fragment({"var": {"d['k']": 1, "z": "{ 1/0 }"}})
    assert (r.code, r.error.code, r.error.path) == ("errorInAgent", "runtime", "var.d['k']")
    assert dict(s.locals["d"]) == {"k": 0}
    for holder in (collections.OrderedDict(k=0), collections.defaultdict(int, k=0), collections.Counter(k=0)):
        s = session(d=holder)
        assert s.run_fragment({"var": {"d['k']": 1, "z": "{ 1/0 }"}}).code == "errorInAgent"
        assert s.locals["d"] == {"k": 0}
        assert s.run_fragment({"var": {"d['k']": 1}}).code == "success" and s.locals["d"]["k"] == 1


def test_a_path_through_a_missing_key_of_a_defaultdict_makes_no_key():
    """Seventh round: walking ``x['new'][3]`` ran the defaultdict's ``__missing__``, whose new key the journal did
    not know, so it stayed after the command failed. A missing key on the way is a ``KeyError``, as for a dict."""
    for factory in (list, dict):
        s = session(x=collections.defaultdict(factory))
        r = s.run_fragment({"var": {"x['new'][0]": 1}})
        assert (r.code, r.error.code) == ("errorInAgent", "runtime") and "KeyError" in r.error.message
        assert list(s.locals["x"]) == []
    s = session(x=collections.defaultdict(dict, a={}))
    assert s.run_fragment({"var": {"x['a']['b']": 1}}).code == "success" and s.locals["x"] == {"a": {"b": 1}}
