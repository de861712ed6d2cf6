"""The code cache on the parent's side of a contained worker (issue 12; :mod:`..codecache`).

The worker reads and writes no file of the cache (SPEC 12): a forked worker finds what its parent loaded
already in its process-wide compile cache, and reports the sources it compiled cold
(:class:`~..codecache.Recorder`). Its parent, which ran no rule on the worker's code, compiles each reported
source again itself and writes that (:class:`Mirror`). This module sits above both the engine, which it
makes, and the code cache, which it fills.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ...bounds import MAX_CACHED_SOURCE, MAX_REPORTED, MIRROR_BUDGET
from ..language.compiled import Compiled
from ..run.codecache import CodeCache
from ..run.engine import Engine
from ..settings import Settings, default_settings


class Mirror:
    """The parent's side of a contained worker (:class:`.client.IsolatedSession`); ``Mirror(cache)``, ``cache``
    a :class:`~..codecache.CodeCache` or ``None`` (then it only counts what the worker reports). Before each fork
    it loads the records of the worker's settings (the child inherits them, :meth:`prepare`); it compiles again,
    itself, what the worker reports having compiled, and writes it (:meth:`compile`).

    Only for settings whose allowlist is the embedded default's or empty (:func:`mirrors`): loading any
    other would import, in this unconfined process, modules that only the confined worker may import.
    What it compiles is written, never kept in this process; a report costs it at most
    :data:`MIRROR_BUDGET` seconds and :data:`~..codecache.MAX_REPORTED` sources, and only one report per request counts.
    """

    def __init__(self, cache: CodeCache | None) -> None:
        self.cache = cache
        #: Sources the worker reported having compiled cold (none a forked worker found cached).
        self.reported = 0
        #: Sources the worker reported having first used of the records this process loaded before the fork.
        self.used = 0
        self._engine: Engine | None = None
        self._settings: Settings | None = None
        self._request: int | None = None  # the request whose report was served
        self._written: set[int] = set()  # hashes of (source, fields) written, or written again as used, here

    def engine(self, settings: Settings) -> Engine | None:
        """This process's engine for ``settings`` (made on first use, the cache loaded into it), or ``None``."""
        if self.cache is None:
            return None
        if settings is not self._settings:
            self._settings, self._engine = settings, None
            if mirrors(settings):
                try:
                    self._engine = Engine(settings)
                except Exception:  # pragma: no cover - the worker reports refused settings itself
                    self._engine = None
                else:
                    self.cache.load(self._engine)
        return self._engine

    def prepare(self, settings: Settings) -> None:
        """Before a fork: the records of ``settings``, those written since the last fork included, loaded."""
        engine = self.engine(settings)
        if engine is not None and self.cache is not None:
            self.cache.load(engine, again=True)

    def compile(self, settings: Settings, sources: Sequence[tuple[str, Sequence[str] | None]],
                request: int | None = None) -> int:
        """Compile each reported ``(source, command fields)`` here, within the budget, and write those that
        compile; returns how many records were written. A source this process's engine has from the file
        already (loaded before the fork) is the worker's first use of that record: its record, this
        process's own, is written again as the most recently used (:meth:`.CodeCache.used`), once per
        process. A second report for the same ``request`` is ignored."""
        if request is not None and request == self._request:
            self.reported += len(sources)
            return 0
        self._request = request
        engine = self.engine(settings)
        if engine is None or self.cache is None or self.cache.problem is not None:
            self.reported += len(sources)
            return 0
        done: list[tuple[frozenset[str] | None, Compiled]] = []
        uses: list[tuple[frozenset[str] | None, Compiled]] = []
        stop = time.perf_counter() + MIRROR_BUDGET
        self.reported += max(0, len(sources) - MAX_REPORTED)
        for source, names in sources[:MAX_REPORTED]:
            if type(source) is not str or len(source) > MAX_CACHED_SOURCE:
                self.reported += 1
                continue
            fields = frozenset(names) if names is not None else None
            mark = hash((source, fields))
            known = engine.cached_compiled(source, fields)
            if known is not None:
                self.used += 1
                if mark not in self._written:
                    uses.append((fields, known))
                    self._remember(mark)
                continue
            self.reported += 1
            if time.perf_counter() > stop or mark in self._written or engine.has_compiled(source, fields):
                continue
            try:
                compiled = engine.compile_uncached(source, fields)
            except (RecursionError, MemoryError):  # pragma: no cover - compile_uncached codes them itself
                continue
            if not isinstance(compiled, Compiled):
                continue  # refused here: never written
            done.append((fields, compiled))
            self._remember(mark)
        if uses:
            self.cache.used(engine, uses)
        return self.cache.write(engine, done)

    def _remember(self, mark: int) -> None:
        """Keep ``mark`` (a hash of a source and its fields) as written or used by this process."""
        if len(self._written) >= 65_536:
            self._written.clear()
        self._written.add(mark)


def mirrors(settings: Settings) -> bool:
    """Whether a parent process may compile for ``settings`` (see :class:`Mirror`)."""
    return not settings.allow_unsafe_entries and settings.allowlist in ("", default_settings().allowlist)
