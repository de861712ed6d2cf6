"""The data flow of a fragment (SPEC 8): every path read and written, listed by the engine's API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from s2o_kernel.engine import Access, Dataflow, Engine, IsolatedSession, S2OError, Session, bare_settings
from s2o_kernel.engine.worker import wire

D = "\u2020"
AGENT = {"functions": {
    "main": {"args": {"city": "str"}, "commands": [
        {"var": {"agent.city": f"{D}sys.inputs.city || {D}conv.lastCity", "n": "{ len(agent.items) }"}},
        {"call": {"function": "add", "args": {"a": "{ n + sys.inputs['k'] }"},
                  "outputPath": f"{D}agent.sum && {D}conv.last['sum']"}},
        {"call": {"function": "add", "args": {"a": 1}, "outputPath": f"{D}local.ok || {D}agent.err"}},
        {"return": "{ [result, city, sys.query] }"}]},
    "add": {"args": {"a": "int"}, "commands": {"return": "{ a + 1 }"}}}}
M = "functions.main.commands"


@pytest.fixture(scope="module")
def isolated() -> Iterator[IsolatedSession]:
    session = IsolatedSession(bare_settings({"allowlist": "len"}))
    try:
        yield session
    finally:
        session.close()


def _session() -> Session:
    return Session(Engine(bare_settings({"allowlist": "len"})))


def test_every_access_is_listed_in_document_order() -> None:
    flow = _session().dataflow(AGENT)
    assert flow.accesses == [
        Access("read", "sys.inputs.city", f"{M}[0].var", f"{M}[0].var.agent.city", "reference"),
        Access("read", "conv.lastCity", f"{M}[0].var", f"{M}[0].var.agent.city", "reference"),
        Access("write", "agent.city", f"{M}[0].var", f"{M}[0].var.agent.city", "var"),
        Access("read", "agent.items", f"{M}[0].var", f"{M}[0].var.n", "expression"),
        Access("write", "local.n", f"{M}[0].var", f"{M}[0].var.n", "var"),
        Access("read", "sys.inputs.k", f"{M}[1].call", f"{M}[1].call.args.a", "expression"),
        Access("read", "local.n", f"{M}[1].call", f"{M}[1].call.args.a", "expression"),
        Access("write", "agent.sum", f"{M}[1].call", f"{M}[1].call.outputPath", "outputPath"),
        Access("write", "conv.last.sum", f"{M}[1].call", f"{M}[1].call.outputPath", "outputPath"),
        Access("write", "local.ok", f"{M}[2].call", f"{M}[2].call.outputPath", "outputPath", "on success"),
        Access("write", "agent.err", f"{M}[2].call", f"{M}[2].call.outputPath", "outputPath", "on failure"),
        Access("read", "result", f"{M}[3].return", f"{M}[3].return", "expression"),
        Access("read", "sys.inputs.query", f"{M}[3].return", f"{M}[3].return", "expression"),
        Access("read", "local.city", f"{M}[3].return", f"{M}[3].return", "expression"),
        Access("read", "local.a", "functions.add.commands.return", "functions.add.commands.return", "expression"),
    ]
    assert flow.reads == ["agent.items", "conv.lastCity", "local.a", "local.city", "local.n", "result",
                          "sys.inputs.city", "sys.inputs.k", "sys.inputs.query"]
    assert flow.writes == ["agent.city", "agent.err", "agent.sum", "conv.last.sum", "local.n", "local.ok"]


def test_the_listing_does_not_run_the_fragment() -> None:
    session = _session()
    flow = session.dataflow({"var": {"agent.x": f"{D}conv.a"}})
    assert flow.writes == ["agent.x"]
    assert session.agent_vars == {}


def test_a_fragment_that_fails_validation_raises_its_errors() -> None:
    with pytest.raises(S2OError) as info:
        _session().dataflow({"var": {"x": f"{D}conv.a | {D}conv.b"}})
    assert (info.value.code, info.value.path, info.value.col) == ("ref-operator", "var.x", 8)


def test_the_text_and_the_diagram_show_sources_commands_and_destinations() -> None:
    flow = Dataflow([
        Access("read", "conv.a", "[0].var", "[0].var.x", "reference"),
        Access("write", "local.x", "[0].var", "[0].var.x", "var"),
        Access("read", "local.x", "[1].call", "[1].call.args.v", "expression"),
        Access("write", "agent.ok", "[1].call", "[1].call.outputPath", "outputPath", "on success"),
        Access("write", "agent.err", "[1].call", "[1].call.outputPath", "outputPath", "on failure"),
    ])
    assert flow.text() == "\n".join([
        "reads:  conv.a, local.x",
        "writes: agent.err, agent.ok, local.x",
        "",
        "[0].var",
        "  <- conv.a  (reference, x)",
        "  -> local.x  (var, x)",
        "",
        "[1].call",
        "  <- local.x  (expression, args.v)",
        "  -> agent.ok  (outputPath, on success)",
        "  -> agent.err  (outputPath, on failure)",
    ])
    assert flow.mermaid() == "\n".join([
        "flowchart LR",
        '  d0(["conv.a"])',
        '  d1(["local.x"])',
        '  d2(["agent.err"])',
        '  d3(["agent.ok"])',
        '  c4["[0].var"]',
        '  c5["[1].call"]',
        "  d0 --> c4",
        "  c4 --> d1",
        "  d1 -.-> c5",
        "  c5 -- on success --> d3",
        "  c5 -- on failure --> d2",
    ])


def test_the_graph_draws_each_command_between_what_it_reads_and_writes() -> None:
    """The ``text/plain`` of ``%dataflow``'s result: a readable graph in a terminal (docs/design.md)."""
    flow = Dataflow([
        Access("read", "conv.a", "[0].var", "[0].var.x", "reference"),
        Access("read", "conv.a", "[0].var", "[0].var.y", "reference"),  # once per command and way
        Access("write", "local.x", "[0].var", "[0].var.x", "var"),
        Access("read", "local.x", "[1].call", "[1].call.args.v", "expression"),
        Access("read", "sys.inputs.longer", "[1].call", "[1].call.args.w", "reference"),
        Access("write", "agent.ok", "[1].call", "[1].call.outputPath", "outputPath", "on success"),
        Access("write", "agent.err", "[1].call", "[1].call.outputPath", "outputPath", "on failure"),
        Access("write", "agent.log", "[2].var", "[2].var.agent.log", "var"),
        Access("read", "result", "[3].return", "[3].return", "expression"),
    ])
    assert flow.graph() == "\n".join([
        "data flow: paths read --> [command] --> paths written (..+ read by an expression)",
        "",
        "conv.a            --+--> [[0].var] --+--> local.x",
        "",
        "local.x           ..+--> [[1].call] --+-- on success --> agent.ok",
        "sys.inputs.longer --+                 +-- on failure --> agent.err",
        "",
        "[[2].var] --+--> agent.log",
        "",
        "result            ..+--> [[3].return]",
    ])
    assert Dataflow().graph() == "data flow: none (the fragment reads and writes no path)"


def test_labels_cannot_break_out_of_the_diagram() -> None:
    flow = Dataflow([Access("read", "agent.x['a\"] --> evil']", "[0].var", "[0].var.y", "reference")])
    diagram = flow.mermaid()
    assert '"]' not in diagram.split("\n")[1][:-2]  # the only closing quote is the label's own
    assert "-->" not in diagram.split("\n")[1]


def test_the_isolated_session_lists_the_same_flow(isolated: IsolatedSession) -> None:
    assert isolated.dataflow(AGENT) == _session().dataflow(AGENT)
    with pytest.raises(S2OError) as info:
        isolated.dataflow({"var": {"x": f"hello {D}conv.a"}})
    assert (info.value.code, info.value.path) == ("ref-text", "var.x")


@pytest.mark.parametrize("bad", [
    None, [], {"accesses": {}}, {"accesses": [1]},
    {"accesses": [{"mode": "read", "data": "a", "command": "c", "field": "f", "via": "reference"}]},
    {"accesses": [{"mode": "delete", "data": "a", "command": "c", "field": "f", "via": "reference", "when": ""}]},
    {"accesses": [{"mode": "read", "data": 1, "command": "c", "field": "f", "via": "reference", "when": ""}]},
    {"accesses": [{"mode": "read", "data": "a", "command": "c", "field": "f", "via": "magic", "when": ""}]},
])
def test_the_wire_refuses_a_malformed_flow(bad: object) -> None:
    with pytest.raises(S2OError) as info:
        wire.decode_dataflow(bad)
    assert info.value.code == "worker-protocol"


def test_loop_names_are_written_and_the_loop_body_is_listed() -> None:
    flow = _session().dataflow({"for": {"item": "row", "index": "i", "in": f"{D}agent.rows",
                                        "commands": {"var": {"conv.last": "{ row }"}}}})
    assert flow.accesses == [
        Access("read", "agent.rows", "for", "for.in", "reference"),
        Access("write", "local.row", "for", "for.item", "loop"),
        Access("write", "local.i", "for", "for.index", "loop"),
        Access("read", "local.row", "for.commands.var", "for.commands.var.conv.last", "expression"),
        Access("write", "conv.last", "for.commands.var", "for.commands.var.conv.last", "var"),
    ]
