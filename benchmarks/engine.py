"""Engine section: the twelve expressions hot and cold, against CPython's ``eval`` and four libraries (issue 12).

Hot: a prepared expression evaluated again (s2o: ``Session.evaluate(source)`` on the compile cache),
floor ``eval(code, g)`` of code compiled once. Cold: a source never seen before
(``"(EXPR) if K else None"``, ``K`` unique in the run), floor ``eval(source, g)``. Tools interleave
in shuffled order per round; ratios are medians of per-round paired ratios
(``../shared/notes/perf-anchors.md``). ``s2o-guarded`` is the same engine compiling guarded code
(when the allowlist grants a host object), ``s2o-isolated`` the worker round trip the kernel pays
per cell; every s2o column runs the kernel's default configuration (``*``, ``**``, ``<<``, ``%``
rewritten to bounded forms). ``eval in a method`` is the least any evaluator with a Python-level entry
point pays (the anchors' DIY hot path): the ratio no design can beat. The ``cold-stages`` group
splits s2o's cold path into its stages (text checks + parse, rules walk, rewrite, compile).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import itertools
import math
import shutil
import statistics
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import tools
from .common import Figure, Target, collect, geomean, interleaved, ratio_of

SECTION = "engine"
#: The expressions every tool runs in its canonical form (the anchors' "common 7").
COMMON = ("arith", "fstring", "subscr", "cond", "builtins", "strmeth", "boolean")
_UNIQUE = itertools.count(1)
#: The teaching notebooks (``reopen`` figures).
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _fresh(src: str) -> str:
    return f"({src}) if {next(_UNIQUE)} else None"


def _prepare_all(tool: tools.Evaluator, key: str, src: str, expected: Any) -> tuple[Any, str] | None:
    """``(prepared, note)`` when ``tool`` computes ``expected`` for ``src`` (or its list form, note ``†``)."""
    candidates = [(src, "")]
    if key in tools.LIST_FORMS:
        candidates.append((tools.LIST_FORMS[key], "†"))
    for text, note in candidates:
        try:
            prepared = tool.prepare(text)
            got = eval(compile(tool.hot_stmt, "<stmt>", "eval"), {**tool.ns, "p": prepared})
        except Exception:  # a tool that refuses the expression is n/a for it
            continue
        if got == expected:
            return prepared, note
    return None


def _hot_timer(tool: tools.Evaluator, prepared: Any) -> Callable[[int], float]:
    return timeit.Timer(tool.hot_stmt, globals={**tool.ns, "p": prepared}).timeit


def _cold_timer(cold: Callable[[str], Any], src: str) -> Callable[[int], float]:
    def run(n: int) -> float:
        sources = [_fresh(src) for _ in range(n)]
        return loop_timer_over(cold, sources)
    return run


def loop_timer_over(fn: Callable[[str], Any], args: list[str]) -> float:
    """Seconds for ``fn(a)`` over every ``a`` in ``args``."""
    import time

    t0 = time.perf_counter()
    for a in args:
        fn(a)
    return time.perf_counter() - t0


def _figures(group: str, key: str, floor: str, unit_scale: float, unit: str,
             results: dict[str, tuple[float, float]], notes: dict[str, str], all_tools: list[str]) -> list[Figure]:
    out = []
    for name in all_tools:
        if name in results:
            value, ratio = results[name]
            out.append(Figure(SECTION, f"{group}/{key}", name, value * unit_scale, unit, floor, ratio,
                              notes.get(name, "")))
        else:
            out.append(Figure(SECTION, f"{group}/{key}", name, math.nan, unit, floor, math.nan,
                              notes.get(name, "n/a")))
    return out


def _geomeans(group: str, figures: list[Figure], floor: str, all_tools: list[str]) -> list[Figure]:
    """Geomean rows: over the common seven, and over every expression each tool ran (n in the note)."""
    mine = [f for f in figures if f.case.startswith(group + "/")]
    out = []
    for name in all_tools:
        common = [ratio_of(mine, f"{group}/{k}", name) for k in COMMON]
        ran = [f.ratio for f in mine if f.tool == name and not math.isnan(f.ratio)]
        out.append(Figure(SECTION, f"{group}/geomean common 7", name, math.nan, "", floor, geomean(common)))
        out.append(Figure(SECTION, f"{group}/geomean all it ran", name, math.nan, "", floor, geomean(ran),
                          f"n={len(ran)}"))
    return out


def _hot(quick: bool) -> list[Figure]:
    evaluators = [make() for make in tools.HOT_TOOLS]
    names = [e.name for e in evaluators]
    rounds, budget = (3, 0.01) if quick else (9, 0.05)
    figures: list[Figure] = []
    try:
        for key, src in tools.SUITE.items():
            expected = eval(src, {"__builtins__": tools.ALLOW, **tools.DATA})
            timers, notes = {}, {}
            for tool in evaluators:
                found = _prepare_all(tool, key, src, expected)
                if found is None:
                    continue
                timers[tool.name], notes[tool.name] = _hot_timer(tool, found[0]), found[1]
            collect()
            results = interleaved(timers, "eval", rounds, budget)
            figures += _figures("hot", key, "eval", 1e9, "ns", results, notes, names)
    finally:
        for tool in evaluators:
            tool.close()
    return figures + _geomeans("hot", figures, "eval", names)


def _cold(quick: bool) -> list[Figure]:
    evaluators = [make() for make in tools.COLD_TOOLS]
    names = [e.name for e in evaluators]
    rounds, budget = (3, 0.005) if quick else (7, 0.03)
    figures: list[Figure] = []
    for key, src in tools.SUITE.items():
        expected = eval(src, {"__builtins__": tools.ALLOW, **tools.DATA})
        timers, notes = {}, {}
        for tool in evaluators:
            for text, note in [(src, ""), *([(tools.LIST_FORMS[key], "†")] if key in tools.LIST_FORMS else [])]:
                try:
                    ok = tool.cold(_fresh(text)) == expected
                except Exception:  # refused: n/a
                    ok = False
                if ok:
                    timers[tool.name], notes[tool.name] = _cold_timer(tool.cold, text), note
                    break
        collect()
        results = interleaved(timers, "eval", rounds, budget)
        figures += _figures("cold", key, "eval(source)", 1e6, "µs", results, notes, names)
    return figures + _geomeans("cold", figures, "eval(source)", names)


def _walk(ctx: Any, validators: list[Any], tree: ast.Expression) -> None:
    from s2o_kernel.engine.language import rules as s2o_rules

    v = s2o_rules.Validator(ctx, s2o_rules.Checked(source=""))
    v.walk(tree)
    validators.append(v)


def _stage_times(engine: Any, src: str, n: int) -> dict[str, float]:
    """Seconds for each cold stage over ``n`` fresh sources of ``src`` (each stage timed alone)."""
    from s2o_kernel.engine.language.parsing import check_text, parse
    from s2o_kernel.engine.language.rewrites import apply_rewrites

    sources = [_fresh(src) for _ in range(n)]
    limit = engine.settings.limits.definition_length
    timings = {"eval(source)": loop_timer_over(lambda s: compile(s, "<expr>", "eval"), sources),
               "text+parse": loop_timer_over(lambda s: (check_text(s, limit), parse(s)), sources)}
    trees = [parse(s) for s in sources]
    validators: list[Any] = []
    timings["rules"] = loop_timer_over(functools.partial(_walk, engine.rule_context, validators), trees)  # type: ignore[arg-type]
    pairs = list(zip(trees, validators, strict=True))
    timings["rewrite"] = loop_timer_over(lambda p: apply_rewrites(p[0], p[1].rewrites), pairs)  # type: ignore[arg-type]
    timings["compile(tree)"] = loop_timer_over(lambda t: compile(t, "<s2o>", "eval"), trees)  # type: ignore[arg-type]
    timings["engine.compile"] = loop_timer_over(engine.compile, [_fresh(src) for _ in range(n)])
    return timings


def _stages(quick: bool) -> list[Figure]:
    """s2o's cold path by stage, in µs per expression: each stage timed alone on fresh sources, in
    rounds, with the garbage collector off; the ratio is the median over rounds of the stage's time over
    ``compile(source)``'s."""
    from s2o_kernel.engine import Engine, default_settings

    engine = Engine(default_settings())
    n, rounds = (200, 3) if quick else (1000, 7)
    figures = []
    for key, src in tools.SUITE.items():
        collect()
        gc.disable()  # a thousand trees kept alive for the stages would make GC passes land anywhere
        try:
            per_round = [_stage_times(engine, src, n) for _ in range(rounds)]
        finally:
            gc.enable()
        for stage in per_round[0]:
            seconds = statistics.median(r[stage] for r in per_round)
            ratio = statistics.median(r[stage] / r["eval(source)"] for r in per_round)
            figures.append(Figure(SECTION, f"cold-stages/{key}", stage, seconds / n * 1e6, "µs", "eval(source)",
                                  ratio))
    return figures


def notebook_expressions(path: Path) -> list[str]:
    """Every expression a notebook's code cells hold, in order: expression cells, the dynamic-string
    form, and every dynamic string inside a fragment's JSON (magic cells are left out)."""
    import nbformat

    from s2o_kernel.engine.fragments.parser import fragment_kind
    from s2o_kernel.engine.language.dynamic import expression_of
    from s2o_kernel.kernel import cells

    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str) and (hit := expression_of(value)) is not None:
            found.append(hit[0])
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        read = cells.classify(cell.source, fragment_kind)
        if read.kind == cells.EXPRESSION:
            found.append(read.text)
        elif read.kind == cells.DYNAMIC:
            walk(read.text)
        elif read.kind == cells.FRAGMENT:
            walk(read.data)
    return found


def _reopen(quick: bool) -> list[Figure]:
    """What a notebook reopened in a new kernel pays for all its expressions, in ms, against ``compile(source)``
    of the same expressions: compiled again (``s2o``: no code cache, or a new fingerprint), or read from the
    user's code cache (``s2o, code cache``: the records read and checked, then each expression looked up), as
    a new process does (:mod:`s2o_kernel.engine.run.codecache`)."""
    import tempfile

    from s2o_kernel.engine import CodeCache, Engine, default_settings
    from s2o_kernel.engine.run import codecache

    engine = Engine(default_settings())
    folder = tempfile.mkdtemp(prefix="s2o-bench-cache-")

    def s2o(sources: list[str]) -> None:
        engine._cache.clear()
        engine.compiled.clear()
        for src in sources:
            with contextlib.suppress(Exception):  # a refusal costs its check too
                engine.compile(src)

    def cached(sources: list[str]) -> None:
        engine._cache.clear()
        engine.compiled.clear()
        codecache._DIGESTS.clear()  # a new process: its fingerprint's digest, key and records read again
        if CodeCache(folder).load(engine) == 0:
            raise RuntimeError("the code cache served nothing")
        for src in sources:
            with contextlib.suppress(Exception):
                engine.compile(src)

    def floor(sources: list[str]) -> None:
        for src in sources:
            with contextlib.suppress(SyntaxError):
                compile(src, "<expr>", "eval")

    figures = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        sources = notebook_expressions(path)
        shutil.rmtree(folder, ignore_errors=True)
        writer = Engine(default_settings(), code_cache=CodeCache(folder))
        writer._cache.clear()
        for src in sources:
            with contextlib.suppress(Exception):
                writer.compile(src)
        timers = {name: functools.partial(_repeat, fn, sources)
                  for name, fn in (("s2o", s2o), ("s2o, code cache", cached), ("compile", floor))}
        collect()
        results = interleaved(timers, "compile", 3 if quick else 7, 0.02 if quick else 0.1)
        for tool, (seconds, ratio) in results.items():
            figures.append(Figure(SECTION, f"reopen/{path.stem}", tool, seconds * 1e3, "ms", "compile", ratio,
                                  f"{len(sources)} expressions"))
    shutil.rmtree(folder, ignore_errors=True)
    return figures


def _repeat(fn: Callable[[list[str]], None], sources: list[str], n: int) -> float:
    start = timeit.default_timer()
    for _ in range(n):
        fn(sources)
    return timeit.default_timer() - start


def measure(quick: bool) -> list[Figure]:
    """Hot and cold figures of the twelve expressions for every tool, s2o's cold stages, and the compile
    cost of each teaching notebook reopened."""
    return _hot(quick) + _cold(quick) + _stages(quick) + _reopen(quick)


def _max_hot(figures: list[Figure]) -> float | None:
    ratios = [f.ratio for f in figures if f.tool == "s2o" and f.case.startswith("hot/")
              and "geomean" not in f.case and not math.isnan(f.ratio)]
    return max(ratios) if ratios else None


TARGETS = [
    Target(SECTION, "hot-geomean", "hot: s2o ≤ 1.10× precompiled eval (geomean of 12)", 1.10,
           lambda figs: ratio_of(figs, "hot/geomean all it ran", "s2o")),
    Target(SECTION, "hot-max", "hot: no expression kind above 1.5× precompiled eval", 1.5, _max_hot),
    Target(SECTION, "cold-geomean", "cold: s2o ≤ 1.7× eval(source) (geomean of 12)", 1.7,
           lambda figs: ratio_of(figs, "cold/geomean all it ran", "s2o")),
]
