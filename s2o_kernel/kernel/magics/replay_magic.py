"""record the outside calls of runs into a cassette, and replay them

%replay                          the mode, the cassette, and its entries no call has used yet
%replay MODE [FILE]              (silent) MODE: replay (answer every call from the cassette), record (make
                                 and append the calls it does not hold), rewrite (make every call,
                                 write it anew) or off; FILE: the cassette, by default the
                                 notebook's (NAME.cassette.json beside it) when the kernel knows
                                 the notebook (JupyterLab); a headless run (nbval) names it
%replay to-script PROFILE [FILE] the recorded turns of an llm profile as a scripted profile (TOML
                                 for %config; written to FILE when given)
S2O_REPLAY in the kernel's environment overrides the mode; under CI=true only
replay runs unless S2O_REPLAY says otherwise. A notebook whose cassette exists
replays by default.
"""

from __future__ import annotations

import os
from typing import Any

import tomli_w

from s2o_kernel.engine import REPLAY_ENV, REPLAY_MODES, S2OError, effective_mode
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import resolve, write_text
from s2o_kernel.kernel.startup import notebook_cassette

PARSER = MagicArgumentParser("replay")
PARSER.add_argument("action", nargs="?", metavar="MODE|to-script")
PARSER.add_argument("rest", nargs="*", metavar="FILE|PROFILE")

def _cassette(session: Any) -> Any:
    """The session's open cassette (its gateway's), or ``None``."""
    door = getattr(session, "outside", None)
    return door.cassette() if door is not None and hasattr(door, "cassette") else None


def _shown(path: str | None) -> str:
    """A cassette's path as a report shows it: relative to the kernel's folder when inside it, so a stored
    ``%replay`` output is the same on every machine."""
    if not path:
        return "none"
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


def _report(call: MagicCall) -> None:
    session = call.ctx.require_session()
    replay = session.settings_dict().get("replay") or {}
    mode = effective_mode(str(replay.get("mode", "off")))
    source = f" (from {REPLAY_ENV})" if os.environ.get(REPLAY_ENV) else ""
    if mode == "off":
        call.ctx.emit_result({"text/plain": f"Replay is off{source}: outside calls are made and not recorded."})
        return
    cassette = _cassette(session)
    lines = [f"Mode: {mode}{source}", f"Cassette: {_shown(replay.get('cassette'))} ({len(cassette.entries)} entries)"]
    unused = [i for i in range(len(cassette.entries)) if i not in cassette.used]
    if cassette.entries:
        named = ", ".join(f"{i} ({cassette.entries[i]['kind']} on {cassette.entries[i].get('profile')!r})"
                          for i in unused)
        lines.append(f"Not used by any call yet: {named}" if unused else "Every entry was used.")
    call.ctx.emit_result({"text/plain": "\n".join(lines)})


def _set_mode(call: MagicCall, mode: str, file: str | None) -> None:
    if file is None and mode != "off":
        found = notebook_cassette()
        if found is None:
            raise S2OError("magic", f"name the cassette: %replay {mode} FILE (the kernel does not know this "
                           "notebook's path: nbval, nbconvert and papermill run it headless)")
        file = str(found)
    effective_mode(mode)  # replay-mode under CI=true for a mode that makes calls
    path = resolve(file) if file is not None else None
    call.ctx.require_session().update_settings({"replay": {"mode": mode, "cassette": path}})
    # silent, as %config is: a regression notebook's first cell shows the same whether it was recorded
    # (S2O_REPLAY=record) or replayed; %replay alone reports


def script_of(entries: list[dict[str, Any]], profile: str) -> list[dict[str, Any]]:
    """The ``script`` of a ``scripted`` profile (SPEC 7.1) that plays ``profile``'s recorded ``llm`` turns:
    each turn's text and its first tool call (``call``, ``args``), with its token counts. Raises ``magic``
    when the cassette holds none."""
    script: list[dict[str, Any]] = []
    for entry in entries:
        result = entry.get("outcome", {}).get("result")
        if entry.get("kind") != "llm" or entry.get("profile") != profile or type(result) is not dict:
            continue
        turn: dict[str, Any] = {}
        if result.get("text"):
            turn["text"] = result["text"]
        calls = result.get("tool_calls") or []
        if calls and type(calls[0]) is dict:
            turn["call"] = calls[0].get("name")
            turn["args"] = calls[0].get("arguments") or {}
        for key in ("input_tokens", "output_tokens"):
            if type(result.get(key)) is int:
                turn[key] = result[key]
        script.append(turn)
    if not script:
        raise S2OError("magic", f"the cassette holds no recorded turn of the llm profile {profile!r}")
    return script


def _drop_nulls(value: Any) -> Any:
    """``value`` without the ``None`` values of its objects (TOML has no null)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value if v is not None]
    return value


def _to_script(call: MagicCall, profile: str, file: str | None) -> None:
    cassette = _cassette(call.ctx.require_session())
    if cassette is None:
        raise S2OError("magic", "no cassette is in use: %replay MODE FILE first")
    script = script_of(cassette.entries, profile)
    try:
        text = call.ctx.redact(tomli_w.dumps({"profiles": {"llm": {profile: {
            "adapter": "scripted", "model": "scripted", "script": _drop_nulls(script)}}}}))
    except (RecursionError, TypeError, ValueError) as exc:
        raise S2OError("magic", f"the recorded turns of {profile!r} cannot be written as TOML "
                       f"({type(exc).__name__})") from None
    if file is not None:
        write_text(file, text)
        call.ctx.emit_stream("stdout", f"Wrote {len(script)} turns of {profile!r} to {file} (%config {file}).\n")
        return
    call.ctx.emit_result({"text/plain": text.rstrip("\n")})


def handle(call: MagicCall) -> None:
    """``%replay``: show or set the replay mode and cassette, or turn recorded turns into a script (SPEC 13)."""
    args = PARSER.parse_words(call.arg)
    if args.action is None:
        _report(call)
    elif args.action == "to-script":
        if not args.rest or len(args.rest) > 2:
            raise S2OError("magic", "%replay to-script PROFILE [FILE]")
        _to_script(call, args.rest[0], args.rest[1] if len(args.rest) > 1 else None)
    elif args.action in REPLAY_MODES:
        if len(args.rest) > 1:
            raise S2OError("magic", "%replay MODE [FILE]")
        _set_mode(call, args.action, args.rest[0] if args.rest else None)
    else:
        raise S2OError("magic", f"%replay takes a mode ({', '.join(REPLAY_MODES)}) or to-script, not {args.action!r}")


MAGIC = Magic("replay", __doc__, line=handle)
