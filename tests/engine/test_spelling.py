"""Near misses (:mod:`s2o_kernel.engine.spelling`): one rule for commands, fields and settings."""

from __future__ import annotations

from typing import Any

import pytest

from s2o_kernel.engine import Settings
from s2o_kernel.engine.commands.ask import AskFields
from s2o_kernel.engine.spelling import closest, did_you_mean, words_at


@pytest.mark.parametrize(("key", "words", "meant"), [
    ("els", ["then", "else", "condition"], "else"),
    ("Else", ["then", "else"], "else"),
    ("fro", ["for", "if"], "for"),
    ("scirpt", ["adapter", "script", "model"], "script"),
    ("else", ["then", "else"], None),  # a word is no miss of itself
    ("colour", ["then", "else"], None),  # nothing like any word
    ("e" * 10_000, ["else"], None),  # far longer than every word: not handed to difflib
    (3, ["else"], None),  # not text
    ("x", [], None),
])
def test_closest(key: Any, words: list[str], meant: str | None) -> None:
    assert closest(key, words) == meant
    assert did_you_mean(key, words) == ("" if meant is None else f" (did you mean {meant!r}?)")


@pytest.mark.parametrize(("model", "loc", "expected"), [
    (AskFields, ("inputs", 0), {"name", "type", "label", "options", "default"}),
    (Settings, ("limits",), {"time", "memory"}),
    (Settings, ("profiles", "llm", "mine"), {"adapter", "script", "key"}),
    (Settings, ("profiles", "api", "x"), {"url", "headers", "query"}),
    (Settings, ("no-such-key", "deeper"), set()),
])
def test_words_at_walks_nested_models(model: Any, loc: tuple[Any, ...], expected: set[str]) -> None:
    words = set(words_at(model, loc))
    assert expected <= words if expected else words == set()
