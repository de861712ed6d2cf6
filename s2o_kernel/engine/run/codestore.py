"""The engine and its code cache as each sees the other (typing.Protocol), so neither imports the other.

An :class:`~.engine.Engine` is given a :class:`CodeStore` (``code_cache=``): the on-disk
:class:`~.codecache.CodeCache`, or the worker's :class:`~.codecache.Recorder`. It loads the records of the
engine's fingerprint into the engine's compile cache and writes what the engine compiled. The store sees the
engine as a :class:`CachingEngine`: its fingerprint, whether it grants a host object, and where a loaded
entry goes; the engine tells the store the first use of each entry the store loaded. This module sits below
both and imports only :mod:`.compiled`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..language.compiled import Compiled


class CachingEngine(Protocol):
    """What a code store needs of an engine (:class:`~.engine.Engine`)."""

    #: Everything compilation depends on (:meth:`~.engine.Engine.compile_fingerprint`).
    fingerprint: tuple[Any, ...]
    #: Whether its allowlist grants a host object (then nothing of it is kept on disk).
    host_entries: bool

    def stored(self, key: tuple[str, frozenset[str] | None], hit: Compiled) -> None:
        """Put a compiled expression, read from the store, into the engine's compile cache; its first use there
        is told to the store (:meth:`CodeStore.used`)."""


class CodeStore(Protocol):
    """What an engine needs of a code store (:class:`~.codecache.CodeCache`, :class:`~.codecache.Recorder`)."""

    def load(self, engine: CachingEngine) -> int:
        """Put the stored entries of ``engine``'s fingerprint into its compile cache; how many."""

    def write(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """Keep ``(command fields, compiled)`` entries ``engine`` compiled itself; how many were written."""

    def used(self, engine: CachingEngine, entries: Sequence[tuple[frozenset[str] | None, Compiled]]) -> int:
        """``engine`` used these entries, which the store loaded into it (once each per process); how many
        uses were kept (a store that evicts the least recently used keeps them as the most recent)."""
