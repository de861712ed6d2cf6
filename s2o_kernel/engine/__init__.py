"""The s2o engine: agent expressions and fragments, checked and run safely (SPEC 1-8, 10-12).

It imports nothing from Jupyter; :mod:`s2o_kernel.kernel` adapts it to the
Jupyter protocol. Public API::

    from s2o_kernel.engine import Engine, Session, Settings, S2OError, load_settings

    engine = Engine(load_settings())          # s2o.toml merged over the embedded default
    Engine(make_settings({"limits": {"time": 1}}))   # a dict merged over the embedded default
    Engine(bare_settings({"allowlist": "len"}))      # from nothing: only len, every operator on
    session = Session(engine)
    session.evaluate("len([1, 2])")           # -> 2
    session.evaluate_dynamic("{ 1 + 1 }")     # -> 2 (SPEC 1)
    engine.validate("x.__class__").errors     # -> [S2OError('underscore', ...)]
    session.run_fragment({"var": {"x": "{ 2 * 3 }"}})   # -> RunResult(code='success')
    session.dataflow({"var": {"x": "\u2020conv.a || \u2020agent.b"}}).reads   # -> ['agent.b', 'conv.a'] (SPEC 8)
    run = session.run_fragment({"var": {"x": 1}}); run.trace["root"]["spans"][0]["name"]   # -> 'var' (SPEC 14)
    trace_to_otlp(run.trace)                  # -> {"resourceSpans": [...]}: OTLP JSON for OpenTelemetry back ends

Every failure is an :class:`S2OError` with ``code``, ``message``, ``line``,
``col``, ``path`` and ``stage``.
"""

from ..bounds import WRITTEN_LIMIT
from .commands.registry import fragment_words
from .commands.var import parse_target
from .errors import ErrorGroup, S2OError
from .fragments.dataflow import Access, Dataflow
from .fragments.kind import fragment_hint, fragment_kind
from .fragments.otlp import to_otlp as trace_to_otlp
from .fragments.otlp import to_protobuf as trace_to_protobuf
from .language.compiled import Compiled
from .outside.ask import ask_each
from .outside.cassette import ENV as REPLAY_ENV
from .outside.cassette import MODES as REPLAY_MODES
from .outside.cassette import Cassette, cassette_for, effective_mode
from .policy.written import shown_text, too_large_text, written_size
from .run.codecache import CodeCache, default_cache
from .run.engine import Engine, Validation
from .run.scopes import RemoteValue, as_json
from .run.session import RunResult, Session
from .settings import (
    Settings,
    bare_settings,
    default_settings,
    load_settings,
    make_settings,
    read_toml,
    switched_off,
)
from .spelling import near_misses
from .worker import IsolatedSession

__all__ = [
    "REPLAY_ENV",
    "REPLAY_MODES",
    "WRITTEN_LIMIT",
    "Access",
    "Cassette",
    "CodeCache",
    "Compiled",
    "Dataflow",
    "Engine",
    "ErrorGroup",
    "IsolatedSession",
    "RemoteValue",
    "RunResult",
    "S2OError",
    "Session",
    "Settings",
    "Validation",
    "as_json",
    "ask_each",
    "bare_settings",
    "cassette_for",
    "default_cache",
    "default_settings",
    "effective_mode",
    "fragment_hint",
    "fragment_kind",
    "fragment_words",
    "load_settings",
    "make_settings",
    "near_misses",
    "parse_target",
    "read_toml",
    "shown_text",
    "switched_off",
    "too_large_text",
    "trace_to_otlp",
    "trace_to_protobuf",
    "written_size",
]
