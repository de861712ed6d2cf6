"""The data flow of a fragment (SPEC 8): every path read and written, listed by the engine's API."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

import pytest
from svg_reader import SVG, box_text, one, svg_blocks

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
        Access("write", "result", f"{M}[1].call", f"{M}[1].call", "result"),
        Access("write", "agent.sum", f"{M}[1].call", f"{M}[1].call.outputPath", "outputPath"),
        Access("write", "conv.last.sum", f"{M}[1].call", f"{M}[1].call.outputPath", "outputPath"),
        Access("write", "result", f"{M}[2].call", f"{M}[2].call", "result"),
        Access("write", "local.ok", f"{M}[2].call", f"{M}[2].call.outputPath", "outputPath", "on success"),
        Access("write", "agent.err", f"{M}[2].call", f"{M}[2].call.outputPath", "outputPath", "on failure"),
        Access("read", "result", f"{M}[3].return", f"{M}[3].return", "expression"),
        Access("read", "sys.inputs.query", f"{M}[3].return", f"{M}[3].return", "expression"),
        Access("read", "local.city", f"{M}[3].return", f"{M}[3].return", "expression"),
        Access("read", "local.a", "functions.add.commands.return", "functions.add.commands.return", "expression"),
    ]
    assert flow.reads == ["agent.items", "conv.lastCity", "local.a", "local.city", "local.n", "result",
                          "sys.inputs.city", "sys.inputs.k", "sys.inputs.query"]
    assert flow.writes == ["agent.city", "agent.err", "agent.sum", "conv.last.sum", "local.n", "local.ok", "result"]


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


#: Four commands: a path read twice by one command (drawn once per command and way), an expression's
#: read, an outputPath's two alternatives, a command that only writes and one that only reads.
GRAPH_ACCESSES = [
    Access("read", "conv.a", "[0].var", "[0].var.x", "reference"),
    Access("read", "conv.a", "[0].var", "[0].var.y", "reference"),
    Access("write", "local.x", "[0].var", "[0].var.x", "var"),
    Access("read", "local.x", "[1].call", "[1].call.args.v", "expression"),
    Access("read", "sys.inputs.longer", "[1].call", "[1].call.args.w", "reference"),
    Access("write", "agent.ok", "[1].call", "[1].call.outputPath", "outputPath", "on success"),
    Access("write", "agent.err", "[1].call", "[1].call.outputPath", "outputPath", "on failure"),
    Access("write", "agent.log", "[2].var", "[2].var.agent.log", "var"),
    Access("read", "result", "[3].return", "[3].return", "expression"),
]


def test_the_graph_draws_each_command_between_what_it_reads_and_writes() -> None:
    """The ``text/plain`` of ``%dataflow``'s result: a readable graph in a terminal (docs/design.md)."""
    flow = Dataflow(list(GRAPH_ACCESSES))
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


#: The accesses of the graph test above and one more, and what each of its blocks shows, read off them.
FLOW = Dataflow([*GRAPH_ACCESSES, Access("read", "agent.x['<a&b>']", "[3].return", "[3].return.y", "reference")])
#: Per block: reads as (path, dashed), the command, writes as (path, label on the arrow).
FLOW_BLOCKS = [
    ([("conv.a", False)], "[0].var", [("local.x", "")]),
    ([("local.x", True), ("sys.inputs.longer", False)], "[1].call",
     [("agent.ok", "on success"), ("agent.err", "on failure")]),
    ([], "[2].var", [("agent.log", "")]),
    ([("result", True), ("agent.x['<a&b>']", False)], "[3].return", []),
]


def test_the_svg_draws_the_same_blocks_as_the_graph() -> None:
    """The ``image/svg+xml`` of ``%dataflow``'s result: one block per command, reads (dashed when read by an
    expression), the command, writes (labelled for an outputPath's alternatives); each path once per way."""
    svg = FLOW.svg()
    assert svg_blocks(svg) == FLOW_BLOCKS
    root = ET.fromstring(svg)
    dashed = [g.get("class") for g in root.iter(f"{SVG}g") if g.find(f"{SVG}path") is not None
              and "stroke-dasharray" in one(g, "path").attrib]
    assert dashed == ["read expression", "read expression"]  # local.x in [1], result in [3], and no other


def test_the_svg_lays_blocks_out_top_to_bottom_reads_left_of_the_command_and_writes_right() -> None:
    root = ET.fromstring(FLOW.svg())
    width, height = int(root.get("width", "")), int(root.get("height", ""))
    assert root.get("viewBox") == f"0 0 {width} {height}"
    bottom = 0
    for block in (g for g in root.iter(f"{SVG}g") if g.get("class") == "block"):
        boxes = {kind: [one(g, "rect") for g in block if g.get("class", "").split()[0] == kind]
                 for kind in ("read", "command", "write")}
        [command] = boxes["command"]
        left, right = int(command.get("x", "")), int(command.get("x", "")) + int(command.get("width", ""))
        assert all(int(r.get("x", "")) + int(r.get("width", "")) < left for r in boxes["read"])
        assert all(int(r.get("x", "")) > right for r in boxes["write"])
        rects = [r for rs in boxes.values() for r in rs]
        assert min(int(r.get("y", "")) for r in rects) > bottom  # below the block before
        bottom = max(int(r.get("y", "")) + int(r.get("height", "")) for r in rects)
        for group in block:
            rect, text = one(group, "rect"), box_text(group)
            # Wide enough for its text in a 13px monospace font (an advance of about 0.6 em).
            assert int(rect.get("width", "")) >= len(text) * 13 * 0.6
            assert int(rect.get("x", "")) + int(rect.get("width", "")) <= width
    assert bottom <= height


def test_a_fragment_with_no_path_gets_a_small_svg_saying_so() -> None:
    root = ET.fromstring(Dataflow().svg())
    assert root.tag == f"{SVG}svg"
    assert [t.text for t in root.iter(f"{SVG}text")] == ["data flow: none (the fragment reads and writes no path)"]
    assert int(root.get("height", "")) < 100


@pytest.mark.parametrize("path", [
    "agent.x['<a&b>']",
    'agent.x[\'"><script>alert(1)</script>\']',
    "agent.x['\x01\ufffe caf\u00e9 \u2192']",
], ids=["markup", "quote-and-script", "not-xml-and-not-ascii"])
def test_svg_labels_are_escaped(path: str) -> None:
    svg = Dataflow([Access("read", path, "[0].var", "[0].var.y", "reference")]).svg()
    assert svg.isascii()  # other characters as numeric references
    assert "<script" not in svg
    expected = path.replace("\x01", "\ufffd").replace("\ufffe", "\ufffd")  # not allowed in XML 1.0
    assert svg_blocks(svg) == [([(expected, False)], "[0].var", [])]
    if path == "agent.x['<a&b>']":
        assert "agent.x['&lt;a&amp;b&gt;']" in svg
    if '"' in path:
        assert "&quot;&gt;&lt;script&gt;" in svg


def test_svg_labels_go_through_the_label_callable_before_they_are_escaped() -> None:
    """The kernel passes its redactor: a secret with ``<`` and ``&`` in it is masked, which it could not
    be once escaped (``k&lt;3y&amp;``)."""
    secret = "k<3y&"
    flow = Dataflow([Access("read", f"agent.x['{secret}']", "[0].var", "[0].var.y", "reference"),
                     Access("write", f"conv.{secret}", "[0].var", "[0].var.outputPath", "outputPath", "on success")])

    def redact(text: str) -> str:
        return text.replace(secret, "***")

    svg = flow.svg(label=redact)
    assert secret not in svg and "k&lt;3y&amp;" not in svg and "3y" not in svg
    assert svg_blocks(svg) == [([("agent.x['***']", False)], "[0].var", [("conv.***", "on success")])]
    # Every label, the legend and the alternatives' too, and then escaped: what the callable adds is text.
    marked: Callable[[str], str] = lambda text: f"<{text}>"  # noqa: E731
    root = ET.fromstring(FLOW.svg(label=marked))
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert len(texts) == 1 + 5 + 4 + 4 + 2  # the legend, reads, commands, writes, labels of alternatives
    assert all(t.startswith("<") and t.endswith(">") for t in texts)
    assert ET.fromstring(Dataflow().svg(label=marked)).find(f"{SVG}text").text == (  # type: ignore[union-attr]
        "<data flow: none (the fragment reads and writes no path)>")


def test_the_svg_has_nothing_active_and_no_reference() -> None:
    allowed = {"svg", "g", "rect", "text", "path", "polygon"}
    for svg in (FLOW.svg(), Dataflow().svg(), _session().dataflow(AGENT).svg()):
        root = ET.fromstring(svg)
        for element in root.iter():
            assert element.tag.startswith(SVG) and element.tag[len(SVG):] in allowed, element.tag
            for name, value in element.attrib.items():
                assert not name.lower().startswith("on") and "href" not in name.lower(), name
                assert "url(" not in value and "javascript:" not in value.lower(), value
        assert "script" not in svg.lower() and "foreignobject" not in svg.lower()
        assert root.get("width") and root.get("height") and root.get("viewBox")


def test_the_svg_is_deterministic() -> None:
    first = _session().dataflow(AGENT).svg()
    assert _session().dataflow(AGENT).svg() == first
    assert Dataflow([Access(**a) for a in _session().dataflow(AGENT).to_dict()["accesses"]]).svg() == first
    assert svg_blocks(first)[0] == ([("sys.inputs.city", False), ("conv.lastCity", False), ("agent.items", True)],
                                    f"{M}[0].var", [("agent.city", ""), ("local.n", "")])


def test_labels_cannot_break_out_of_the_diagram() -> None:
    path = "agent.x['a\"] --> </text><script>alert(1)</script>']"
    root = ET.fromstring(Dataflow([Access("read", path, "[0].var", "[0].var.y", "reference")]).svg())
    assert [t.text for t in root.iter(f"{SVG}text")][1] == path  # the legend, then the path: text, whole
    assert not any(e.tag == f"{SVG}script" for e in root.iter())


def test_the_isolated_session_lists_the_same_flow(isolated: IsolatedSession) -> None:
    assert isolated.dataflow(AGENT) == _session().dataflow(AGENT)
    with pytest.raises(S2OError) as info:
        isolated.dataflow({"var": {"x": f"{D}conv.a hello"}})
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
