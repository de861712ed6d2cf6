"""Host objects that hand out dangerous values (simpleeval's security tests, in s2o's terms).

Granted in tests through the allowlist (``s2o_reach_hosts.thing``) or given as locals; each one is a
path by which a module, a refused built-in or an instance of a refused class could reach an
expression. Nothing here is called by the tests themselves.
"""

from __future__ import annotations

import os
import os.path
import string
import subprocess
from typing import Any

MARKER = "s2o-markers/reach-escape"


class Thing:
    """``thing.p`` holds ``os.path``; ``thing.e`` holds ``exec``."""

    p = os.path
    e = exec


class Container:
    """Methods and properties that return a module, ``exec`` or a format-string walker."""

    @staticmethod
    def get_os() -> Any:
        return os

    @staticmethod
    def get_exec() -> Any:
        return exec

    @property
    def evil(self) -> Any:
        return exec

    @property
    def mod(self) -> Any:
        return os

    def formatter(self) -> Any:
        return string.Formatter()

    def popen_class(self) -> Any:
        return subprocess.Popen

    def funcs(self) -> list[Any]:
        return [exec, eval]

    def nested(self) -> dict[str, Any]:
        return {"nested": {"funcs": [exec], "mods": {"p": os.path}}}

    def tuple_of(self) -> tuple[Any, ...]:
        return (os.path, os.system)

    def iterate(self) -> Any:
        return iter([exec])

    def generate(self) -> Any:
        yield os

    def mapping(self) -> Any:
        return _Lookup()

    def plain(self) -> dict[str, Any]:
        return {"a": [1, 2.5, "x"], "b": None}

    def __add__(self, other: Any) -> Any:
        return os

    def __lt__(self, other: Any) -> Any:
        return exec

    def __getitem__(self, key: Any) -> Any:
        return exec if key == "exec" else key

    async def coro(self) -> Any:
        return os


class _Lookup:
    """A mapping-like object whose values are dangerous."""

    def keys(self) -> list[str]:
        return ["key"]

    def __getitem__(self, key: str) -> Any:
        return exec


thing = Thing()
c = Container()


def get_evil() -> Any:
    """A granted function that returns ``exec``."""
    return exec


def get_module() -> Any:
    """A granted function that returns a module."""
    return os.path


def double(x: Any) -> Any:
    """An ordinary host function."""
    return x * 2
