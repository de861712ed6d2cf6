"""Fragments (SPEC 7): parsed whole by :mod:`.parser`, run by :mod:`.interpreter`, commands in :mod:`..commands`."""

from .interpreter import Interpreter, run_program
from .parser import Parser, fragment_kind, parse_fragment
from .tree import Command, Function, Program

__all__ = ["Command", "Function", "Interpreter", "Parser", "Program", "fragment_kind", "parse_fragment",
           "run_program"]
