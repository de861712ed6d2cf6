"""``llm``: call a model through an LLM profile, with the agent's functions as tools (SPEC 7, 7.1).

Fields: ``profile`` (an LLM profile's name), ``prompt`` (a prompt profile's name; its literal text is
the system message), ``input`` (dynamic; default ``sys.query``), ``functions`` (names of the agent's
functions offered to the model as tools), ``streamOutput`` (bool). ``result`` is the model's final text,
so the command may carry ``outputPath`` (SPEC 8).

Validation: an unknown LLM or prompt profile is ``unknown-profile`` at ``….profile`` / ``….prompt``; a
function that is not defined is ``unknown-function`` (functions are recorded as calls, so ``recursion``
and the depth bounds see them too).

The tool loop runs in the run (the worker, in the kernel): each model turn is one outside call of kind
``llm`` (:mod:`..outside.llm`) carrying the system message, the conversation's messages and this
command's new ones, and the tools' JSON schemas (:func:`tool_schema`). After every turn its price is
added to the run's spend (``cost-limit`` past the bound). When the model asks for tools, each is run
like ``call`` (arguments checked against the function's ``args``: ``argument``) and its return value
handed back as JSON text; a tool that is not offered is ``llm-failed``. At most :data:`MAX_LLM_TURNS` model
turns per command (``llm-turns`` past that). The command's messages join the conversation
(:attr:`~..session.Session.llm_messages`) only when it succeeds, so a failing ``llm`` leaves the
conversation as before it, like every other state of the session.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, StrictBool

from ...bounds import MAX_LLM_TURNS
from ..errors import S2OError
from ..fragments.tree import Command, Function
from ..policy.values import safe_repr
from ..run.scopes import as_json
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel, parse_profile

#: SPEC 7 argument types → JSON Schema (``any`` accepts every JSON value).
JSON_TYPES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
    "bool": {"type": "boolean"}, "list": {"type": "array"}, "dict": {"type": "object"}, "any": {},
}


class LlmFields(FieldsModel):
    """``llm``'s fields (SPEC 7.1)."""

    profile: str
    prompt: str | None = None
    input: Any = None
    functions: list[str] = Field(default_factory=list)
    streamOutput: StrictBool = False


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the fields, the profiles named and the input; record the functions offered as calls."""
    m = p.model(LlmFields, fields, cmd.path)
    if m is None:
        return None
    parse_profile(p, "llm", m.profile, f"{cmd.path}.profile")
    if m.prompt is not None:
        parse_profile(p, "prompt", m.prompt, f"{cmd.path}.prompt")
    if m.input is None:
        p.access("read", "sys.inputs.query", f"{cmd.path}.input", "expression")
    else:
        p.value(m.input, f"{cmd.path}.input", known)
    for i, name in enumerate(m.functions):
        p.calls.setdefault(p.current, []).append((name, f"{cmd.path}.functions[{i}]"))
    cmd.model = m
    return cmd


def tool_schema(fn: Function) -> dict[str, Any]:
    """A function as a tool: ``{"name", "description", "parameters"}``, the parameters a JSON Schema
    object of its typed ``args`` (:data:`JSON_TYPES`), those without a default required."""
    properties = {name: dict(JSON_TYPES[kind]) for name, kind in fn.args.items()}
    required = [name for name in fn.args if name not in fn.defaults]
    return {"name": fn.name, "description": f"the agent's function {fn.name}",
            "parameters": {"type": "object", "properties": properties, "required": required}}


def tool_text(value: Any) -> str:
    """A tool's return value as the text handed back to the model: text as is, else JSON (else its repr)."""
    if isinstance(value, str):
        return value
    data = as_json(value)
    return safe_repr(value) if data is None and value is not None else json.dumps(data)


def _turn_of(answer: Any, path: str) -> tuple[str, list[dict[str, Any]], float]:
    """``(text, tool_calls, cost)`` of an ``llm`` call's answer, checked (see :mod:`..outside.llm`)."""
    if type(answer) is not dict or type(answer.get("text")) is not str or type(answer.get("tool_calls")) is not list \
            or type(answer.get("cost")) not in (int, float) or not 0 <= answer["cost"] < float("inf"):
        raise S2OError("llm-failed", "the answer of an llm call is not {text, tool_calls, cost}", path=path)
    return answer["text"], answer["tool_calls"], float(answer["cost"])


async def _input_text(it: Interpreter, cmd: Command) -> str:
    m = cmd.model
    if m.input is None:
        value = it.session.namespace()["sys"].query
    else:
        value = await it.value(m.input, f"{cmd.path}.input")
    return tool_text(value)


async def run(it: Interpreter, cmd: Command) -> None:
    """Run the tool loop (see the module doc); ``result`` is the model's final text."""
    m = cmd.model
    path = cmd.path
    session = it.session
    profiles = session.settings.profiles
    system = [{"role": "system", "content": profiles.prompt[m.prompt].text}] if m.prompt else []
    offered = {name: it.program.functions[name] for name in m.functions}
    tools = [tool_schema(fn) for fn in offered.values()]
    new: list[dict[str, Any]] = [{"role": "user", "content": await _input_text(it, cmd)}]
    for turn in range(1, MAX_LLM_TURNS + 1):
        answer = await it.outside("llm", m.profile, {"messages": [*system, *session.llm_messages, *new],
                                                     "tools": tools, "stream": m.streamOutput}, path)
        text, calls, cost = _turn_of(answer, path)
        new.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
        it.add_spend(cost, path)
        if not calls:
            session.llm_messages.extend(new)
            session.set_result(text)
            return
        for call in calls:
            fn = offered.get(call["name"])
            if fn is None:
                raise S2OError("llm-failed", f"the model called '{call['name']}', which is not among the functions "
                               f"offered ({', '.join(offered) or 'none'})", path=f"{path}.functions")
            value = await it.call(fn, call["arguments"], f"{path}.functions.{call['name']}",
                                  f"{path} (model turn {turn}, tool call {call['id']!r}: {call['name']})",
                                  call_id=str(call["id"]))
            new.append({"role": "tool", "tool_call_id": call["id"], "content": tool_text(value)})
    raise S2OError("llm-turns", f"the model asked for tools {MAX_LLM_TURNS} times without a final answer; an llm "
                   f"command makes at most {MAX_LLM_TURNS} model turns", path=path)


LLM = CommandSpec("llm", parse, run, fields=LlmFields, produces_result=True)
