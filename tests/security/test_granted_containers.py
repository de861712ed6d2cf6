"""A granted container is checked through whatever it holds (issue 30, SPEC 4 and 12).

The allowlist grants values, and a value may be a container: ``mymodule.bag as bag`` with
``bag = {"m": os, "e": exec}`` handed ``os`` and the real ``exec`` to expressions, because the reach guard
took an exact ``dict`` for plain data (the engine even ran unguarded). The rule these tests hold: a value
the allowlist grants is judged through every container it sits in —

* at load: a granted container (dict, its keys, list, tuple, set, frozenset, nested, a lying ``dict``
  subclass, a mapping proxy, a deque, an ``OrderedDict``, an iterator over a list) holding a refused value
  (``os``, ``exec``, ``eval``, ``open``, a module, ``os.system``, ``subprocess.Popen``) is ``refused-entry``,
  and the message says where the value sits; a whole-module grant leaves such a member out;
* at run time: what is read from a granted container, and from a host object's attribute holding a
  container, an iterator, a generator, a slice, a mapping proxy or a host mapping, goes through the same
  check as an attribute (``not-allowed``), however the container changed since loading, and the
  expression's result is checked too.

Every row runs in-process and through the worker (``IsolatedSession``); a ``touch`` (or an ``open``
through ``exec``) aimed at ``tmp_path`` never writes its file. The rows that must keep working: a granted
dict of plain data reads as itself. The host values are in ``tests/support/s2o_granted_hosts.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import s2o_granted_hosts as hosts

from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, bare_settings, default_settings

HOSTS = "s2o_granted_hosts"
ROWS = hosts.holders()

#: Where a refused value sits in each container kind, as the load message writes it after the entry's path.
WHERE = {
    "dict": "['v']",
    "dict-key": " (the key <a ",
    "list": "[2]",
    "tuple": "[1]",
    "set": " (a member of the set)",
    "frozenset": " (a member of the frozenset)",
    "nested": "[0]['k'][1][0]",
    "dict-subclass": "['v']",
    "mapping-proxy": "['v']",
    "deque": "[0]",
    "ordered-dict": "['v']",
    "iterator": " (held by a list_iterator)",
}


def _load(allowlist: str, isolated: bool) -> Session | IsolatedSession:
    settings = bare_settings({"allowlist": allowlist})
    return IsolatedSession(settings) if isolated else Session(Engine(settings))


# -- at load ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attr", sorted(ROWS), ids=[ROWS[a] for a in sorted(ROWS)])
def test_a_granted_container_of_a_refused_value_is_refused_entry(attr: str) -> None:
    entry = f"{HOSTS}.{attr} as granted"
    with pytest.raises(S2OError) as err:
        Engine(bare_settings({"allowlist": entry}))
    assert err.value.code == "refused-entry", err.value
    assert err.value.stage == "load"
    kind = ROWS[attr].split(" of ")[0]
    assert f"it holds a refused value at {HOSTS}.{attr}{WHERE[kind]}" in err.value.details["lines"][entry]


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_the_whole_table_is_refused_entry_line_by_line(isolated: bool) -> None:
    """Every row in one allowlist: the load names each line, and nothing of it is granted."""
    lines = [f"{HOSTS}.{attr} as g{i}" for i, attr in enumerate(sorted(ROWS))]
    with pytest.raises(S2OError) as err:
        _load("\n".join(["len", *lines]), isolated)
    assert err.value.code == "refused-entry", err.value
    assert set(err.value.details["lines"]) == set(lines)


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_the_issues_bag_is_refused_and_its_touch_never_runs(isolated: bool, tmp_path: Path) -> None:
    marker = tmp_path / "bag-touched"
    with pytest.raises(S2OError) as err:
        session = _load(f"{HOSTS}.bag as bag", isolated)
        session.evaluate(f"bag['m'].system('touch {marker}')")
    assert err.value.code == "refused-entry", err.value
    assert "bag['" in err.value.message
    assert not marker.exists()


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_a_whole_module_grant_leaves_a_refused_container_out(isolated: bool, tmp_path: Path) -> None:
    """Granting the module whole grants its other members and leaves the containers out, with a warning;
    reading one is ``not-allowed`` (it is not in the allowlist)."""
    marker = tmp_path / "module-touched"
    session = _load(HOSTS, isolated)
    try:
        if not isolated:
            assert isinstance(session, Session)
            warning = next(w for w in session.engine.warnings if w.startswith(f"{HOSTS}: granted without"))
            assert "bag" in warning and all(attr in warning for attr in ROWS)
        for payload in (f"{HOSTS}.bag['m'].system('touch {marker}')", f"{HOSTS}.list_of_exec",
                        f"{HOSTS}.mapping_proxy_of_os['v']"):
            with pytest.raises(S2OError) as err:
                session.evaluate(payload)
            assert err.value.code == "not-allowed", err.value
        assert session.evaluate(f"{HOSTS}.plain['a']") == [1, 2]
    finally:
        if isinstance(session, IsolatedSession):
            session.close()
    assert not marker.exists()


def test_a_star_grant_leaves_a_refused_container_out() -> None:
    engine = Engine(bare_settings({"allowlist": f"{HOSTS}.*"}))
    assert "plain" in engine.allowlist.names
    assert not ({"bag", *ROWS} & engine.allowlist.names.keys())


# -- at run time ----------------------------------------------------------------------------------------------

RUN_ALLOWLIST = f"""
{HOSTS}.shared as shared
{HOSTS}.late as late
{HOSTS}.fill_late as fill_late
{HOSTS}.functions as functions
{HOSTS}.plain as plain
{HOSTS}.colors as colors
list
len
next
"""

#: Each ends ``not-allowed``; ``MARKER`` is a file under ``tmp_path`` that a ``touch`` (or an ``open`` run by
#: ``exec``) would create.
RUN_PAYLOADS = [
    # a host object's attribute holding a dict, a list, an iterator, a list of iterators, a generator
    "shared.d['m'].system('touch MARKER')",
    "[f(\"open('MARKER', 'w')\") for f in shared.d.values()]",
    "shared.d",
    "shared.items",
    "shared.items[0]",
    "shared.it",
    "next(shared.it)",
    "shared.its",
    "shared.its[0]",
    "shared.gen",
    "[m.system('touch MARKER') for m in shared.gen]",
    # a slice, a mapping proxy, a lying dict subclass, a host mapping unpacked by C code into a new dict
    "shared.sl.start",
    "[f(\"open('MARKER', 'w')\") for f in [shared.sl.start]]",
    "shared.proxy",
    "{**shared.proxy}",
    "shared.lying",
    "{**shared.lying}",
    "{**shared.mapping}",
    "[k(\"open('MARKER', 'w')\") for k in {**shared.mapping}]",
    # a granted dict of plain data that host code filled after the allowlist loaded
    "[fill_late(), late['m'].system('touch MARKER')]",
    "[fill_late(), late][1]",
    "[fill_late(), [f(\"open('MARKER', 'w')\") for f in late.values()]]",
    "[fill_late(), {**late}][1]",
    # a function of host code the allowlist does not name, granted inside a container: what it returns
    "[f().system('touch MARKER') for f in functions.values()]",
    "[f() for f in [functions['hand_os']]]",
]


@pytest.fixture(scope="module")
def worker() -> Iterator[IsolatedSession]:
    session = IsolatedSession(bare_settings({"allowlist": RUN_ALLOWLIST}))
    yield session
    session.close()


@pytest.mark.parametrize("payload", RUN_PAYLOADS)
def test_what_a_granted_container_hands_out_is_checked_in_process(payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "run-touched"
    session = Session(Engine(bare_settings({"allowlist": RUN_ALLOWLIST})))
    assert session.engine.guarded
    with pytest.raises(S2OError) as err:
        session.evaluate(payload.replace("MARKER", str(marker)))
    assert err.value.code == "not-allowed", err.value
    assert not marker.exists()
    hosts.late.clear()


@pytest.mark.parametrize("payload", RUN_PAYLOADS)
def test_what_a_granted_container_hands_out_is_checked_in_the_worker(payload: str, worker: IsolatedSession,
                                                                     tmp_path: Path) -> None:
    marker = tmp_path / "run-touched"
    with pytest.raises(S2OError) as err:
        worker.evaluate(payload.replace("MARKER", str(marker)))
    assert err.value.code == "not-allowed", err.value
    assert not marker.exists()


def test_a_granted_dict_that_host_code_fills_later_is_checked_at_every_read(tmp_path: Path) -> None:
    """A plugin registry: empty when the allowlist loads, filled by host code afterwards. Granting it alone
    turns guarding on (before, the engine ran unguarded and ``late['m'].system`` ran ``touch``)."""
    marker = tmp_path / "late-touched"
    session = Session(Engine(bare_settings({"allowlist": f"{HOSTS}.late as late\nlen"})))
    assert session.engine.guarded
    assert session.evaluate("len(late)") == 0
    hosts.fill_late()
    try:
        for payload in ("late['m'].system('touch MARKER')", "late", "{**late}", "[k for k in late]",
                        "[f(\"open('MARKER', 'w')\") for f in late.values()]"):
            with pytest.raises(S2OError) as err:
                session.evaluate(payload.replace("MARKER", str(marker)))
            assert err.value.code == "not-allowed", (payload, err.value)
    finally:
        hosts.late.clear()
    assert not marker.exists()
    assert session.evaluate("len(late)") == 0


def test_a_container_given_as_a_local_that_holds_a_host_object_guards_the_session(tmp_path: Path) -> None:
    """A host object inside a plain container given as a local turns the session guarded as the object
    alone does (the container was taken for plain data, and ``d['t'].d['m']`` reached ``os``)."""
    marker = tmp_path / "local-touched"
    session = Session(Engine(bare_settings({"allowlist": "len"})))
    assert not session.engine.guarded
    session.set_local("d", [{"t": hosts.shared}])
    assert session.engine.guarded
    with pytest.raises(S2OError) as err:
        session.evaluate(f"d[0]['t'].d['m'].system('touch {marker}')")
    assert err.value.code == "not-allowed", err.value
    assert not marker.exists()
    session.set_local("plain", {"a": [1, 2]})
    assert session.evaluate("len(plain['a'])") == 2


# -- what keeps working -----------------------------------------------------------------------------------------

KEEPS_WORKING = {
    "plain['a']": [1, 2],
    "plain": {"a": [1, 2], "b": "x", "c": {"d": [1.5, None]}},
    "[x * 2 for x in plain['a']]": [2, 4],
    "len(plain)": 3,
    "plain['c']['d'][0]": 1.5,
    "list(plain)": ["a", "b", "c"],
    "{**plain}['b']": "x",
    "colors[1]": "green",
    "shared.plain": {"a": [1, 2]},
    "[f(21) for f in [functions['double']]]": [42],
}


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_a_granted_dict_of_plain_data_reads_fine(isolated: bool) -> None:
    session = _load(RUN_ALLOWLIST, isolated)
    try:
        for source, expected in KEEPS_WORKING.items():
            assert session.evaluate(source) == expected, source
    finally:
        if isinstance(session, IsolatedSession):
            session.close()


def test_granted_plain_text_and_numbers_leave_the_engine_unguarded() -> None:
    """Only a value that can hold something turns guarding on; the teaching configuration stays unguarded."""
    assert not Engine(bare_settings({"allowlist": f"{HOSTS}.HOST_NAME as name\nlen"})).guarded
    assert Engine(bare_settings({"allowlist": f"{HOSTS}.plain as plain"})).guarded
    assert not Engine(default_settings()).guarded
