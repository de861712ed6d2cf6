"""Telling a fragment from other JSON, and naming why JSON that looks like one is not (SPEC 7, 9).

:func:`fragment_kind` is the rule of SPEC 9: a command object, a non-empty list of command objects, a
function object or an agent definition is a fragment; any other JSON is read as an expression (a dict
or a list). That reading hides a spelling mistake: ``{"vars": {"i": 0}}`` or ``[{"var": …}, {"retrun":
…}]`` is a dict or a list, shown back, and nothing runs. :func:`misspelled` finds those: JSON every key
of which is a command name, ``onError`` or a near miss of one (a different case, the same letters in
another order, or close by ``difflib``'s ratio: one rule, :mod:`..spelling`), with at least one near miss. It names
each (``'vars'`` → ``'var'``) so the kernel can say so (:func:`fragment_hint`), and the engine's
``fragment`` error for JSON that is not a fragment carries the same hint. So does an object holding a
command and a key beside it that no command object takes (:func:`stray_keys`).
"""

from __future__ import annotations

import functools
from typing import Any

from ...bounds import MAX_LOOKED_AT, MAX_NEAR_MISSES, NEAR_MISS_CACHE
from ..commands import registry
from ..spelling import closest

#: Keys a fragment may have beside command names (function objects, agent definitions).
FRAGMENT_KEYS = ("onError", "functions", "args", "commands")
def _is_command(obj: Any) -> bool:
    names = registry.COMMAND_NAMES
    return (isinstance(obj, dict) and bool(obj)
            and any(k in names for k in obj) and all(k in names or k == "onError" for k in obj))


def fragment_kind(obj: Any) -> str | None:
    """``"command"``, ``"commands"``, ``"function"``, ``"agent"`` or ``None`` for other JSON (SPEC 7, 9)."""
    if _is_command(obj):
        return "command"
    if isinstance(obj, list) and obj and all(_is_command(x) for x in obj):
        return "commands"
    if isinstance(obj, dict) and isinstance(obj.get("functions"), dict):
        return "agent"
    if isinstance(obj, dict) and "commands" in obj and set(obj) <= {"args", "commands", "onError"}:
        return "function"
    return None


def unknown_commands(obj: Any) -> list[str]:
    """Keys of a would-be command object (or of the objects of a list) that are neither commands nor
    fragment keys, in order, at most :data:`MAX_NEAR_MISSES` (to name them in a message)."""
    items = obj if isinstance(obj, list) else [obj]
    found: list[str] = []
    for item in items:
        if isinstance(item, dict):
            found.extend(k for k in item if isinstance(k, str) and k not in registry.COMMAND_NAMES
                         and k not in FRAGMENT_KEYS and k not in found)
    return found[:MAX_NEAR_MISSES]


@functools.lru_cache(maxsize=NEAR_MISS_CACHE)
def near_miss(key: str) -> str | None:
    """The command name (or ``onError``) ``key`` is a near miss of, or ``None``.

    ``Var`` → ``var``, ``fro`` → ``for``, ``vars`` → ``var``, ``retrun`` → ``return``, ``onEror`` →
    ``onError``; cached (a list of a million commands asks about one key a million times), and a key
    far longer than any command is none (``difflib`` on a 10-million-character key took seconds); a name
    that is itself a command or ``onError`` is no miss.
    """
    return closest(key, [*registry.COMMAND_NAMES, "onError"])


def misspelled(obj: Any) -> list[tuple[str, str]]:
    """``[(key, meant)]`` when ``obj`` is not a fragment but would be a command object or a list of them
    with the keys spelled right (see the module doc); ``[]`` otherwise. Never raises."""
    if fragment_kind(obj) is not None:
        return []
    items = obj if isinstance(obj, list) else [obj]
    if not items or len(items) > MAX_LOOKED_AT or not all(isinstance(item, dict) and item for item in items) \
            or sum(len(item) for item in items) > MAX_LOOKED_AT:
        return []  # data: a misspelled fragment is a few commands (each near miss costs difflib's ~0.4 ms)
    found: list[tuple[str, str]] = []
    for item in items:
        for key in item:
            if not isinstance(key, str):
                return []
            if key in registry.COMMAND_NAMES or key == "onError":
                continue
            meant = near_miss(key)
            if meant is None:
                return []  # a key that is nothing like a command: data, not a misspelled fragment
            if (key, meant) not in found:
                found.append((key, meant))
    return found[:MAX_NEAR_MISSES]


def describe_misses(misses: list[tuple[str, str]]) -> str:
    """``'vars' is not a command (did you mean 'var'?)``, joined with ``;`` for several."""
    return "; ".join(f"{key!r} is not {'a field' if meant == 'onError' else 'a command'} (did you mean {meant!r}?)"
                     for key, meant in misses)


def stray_keys(obj: Any) -> list[tuple[str, str]]:
    """``[(key, command)]`` for each key of an object of ``obj`` (one object, or a list of them) that holds a
    command and keys that are not one, when the command's value is an object (fields) or a stray key is
    ``outputPath`` (put beside its command instead of inside its fields): ``{"var": {…}, "extra": 2}`` is not
    a fragment, and nothing of it runs. ``[]`` for a fragment and for data (``{"var": 1.5, "mean": 3}``); at
    most :data:`MAX_NEAR_MISSES`. Never raises."""
    if fragment_kind(obj) is not None or (isinstance(obj, list) and len(obj) > MAX_LOOKED_AT):
        return []
    found: list[tuple[str, str]] = []
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, dict):
            continue
        command = next((k for k in item if isinstance(k, str) and k in registry.COMMAND_NAMES), None)
        if command is None:
            continue
        stray = [k for k in item if isinstance(k, str) and k not in registry.COMMAND_NAMES and k != "onError"]
        if isinstance(item[command], dict) or "outputPath" in stray:  # data ({"var": 1.5, "mean": 3}) is left be
            found.extend((k, command) for k in stray)
    return found[:MAX_NEAR_MISSES]


def fragment_hint(obj: Any) -> str | None:
    """Why ``obj``, JSON that is not a fragment, looks like a misspelled one (``'vars' is not a command
    (did you mean 'var'?)``: :func:`misspelled`) or a command with a key beside it that no command object
    takes (:func:`stray_keys`), or ``None`` when it does not."""
    misses = misspelled(obj)
    if misses:
        return describe_misses(misses)
    stray = stray_keys(obj)
    return "; ".join(f"{key!r} is not a key of a command object beside {command!r} (a command object holds one "
                     f"command and, optionally, onError; the command's own fields go inside it)"
                     for key, command in stray) or None
