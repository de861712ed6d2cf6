"""Fragments (SPEC 7): :mod:`.tree` (the parsed form), :mod:`.parser` (checked whole before anything
runs) and :mod:`.interpreter` (one run on the session's loop); the commands live in :mod:`..commands`.

The package imports nothing itself, so a command module can import :mod:`.tree` without importing the
parser that imports the command registry (no import cycle).
"""
