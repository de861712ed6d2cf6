"""Rendering figures: the text tables, the targets table and the PNG chart (issue 12).

Cases may carry a group prefix, ``group/case`` (``hot/arith``, ``cold/arith``): each group of a
section is one table and one panel of the chart. A table cell is ``value unit (×ratio)``; a tool that
could not run a case shows its note (``n/a``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from .common import Figure, Target


def split_case(case: str) -> tuple[str, str]:
    """``'hot/arith'`` → ``('hot', 'arith')``; a case without a group is in group ``''``."""
    group, _, name = case.rpartition("/")
    return group, name


def _fmt_value(value: float, unit: str) -> str:
    if math.isnan(value):
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    if abs(value) >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.3g} {unit}"


def fmt_ratio(ratio: float) -> str:
    """``×1.07``, ``×12.3``, ``×140``; ``n/a`` for ``nan``."""
    if math.isnan(ratio):
        return "n/a"
    if ratio >= 100:
        return f"×{ratio:.0f}"
    if ratio >= 10:
        return f"×{ratio:.1f}"
    return f"×{ratio:.2f}"


def _groups(figures: Sequence[Figure]) -> dict[tuple[str, str], list[Figure]]:
    groups: dict[tuple[str, str], list[Figure]] = {}
    for f in figures:
        groups.setdefault((f.section, split_case(f.case)[0]), []).append(f)
    return groups


def _cell(f: Figure | None) -> str:
    if f is None:
        return ""
    if math.isnan(f.value) and math.isnan(f.ratio):
        return f.note or "n/a"
    parts = [] if math.isnan(f.value) else [_fmt_value(f.value, f.unit)]
    if f.floor and not math.isnan(f.ratio):
        parts.append(f"({fmt_ratio(f.ratio)})" if parts else fmt_ratio(f.ratio))
    if f.note:
        parts.append(f.note)
    return " ".join(parts)


def render_tables(figures: Sequence[Figure]) -> str:
    """One markdown table per (section, group): a row per case, a column per tool."""
    out: list[str] = []
    for (section, group), figs in _groups(figures).items():
        tools = list(dict.fromkeys(f.tool for f in figs))
        cases = list(dict.fromkeys(split_case(f.case)[1] for f in figs))
        by = {(split_case(f.case)[1], f.tool): f for f in figs}
        floors = sorted({f.floor for f in figs if f.floor})
        title = f"## {section}" + (f" — {group}" if group else "")
        if floors:
            title += f" (× = paired ratio to {', '.join(floors)})"
        out += ["", title, "", "| case | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
        for case in cases:
            out.append(f"| {case} | " + " | ".join(_cell(by.get((case, t))) for t in tools) + " |")
    return "\n".join(out)


def render_targets(targets: Sequence[Target], figures: Sequence[Figure]) -> str:
    """The issue-12 targets with the observed value and met / missed."""
    if not targets:
        return ""
    out = ["", "## targets (issue 12)", "",
           "| section | target | limit | observed | verdict |", "|---|---|---|---|---|"]
    for t in targets:
        observed, verdict = t.verdict(list(figures))
        sign = "≥" if t.higher_is_better else "≤"
        shown = "—" if observed is None else f"{observed:.3g}{t.unit}"
        out.append(f"| {t.section} | {t.description} | {sign} {t.limit:g}{t.unit} | {shown} | {verdict} |")
    return "\n".join(out)


def render_chart(figures: Sequence[Figure], info: dict[str, str], path: Path) -> Path | None:
    """Write a PNG of the ratios (log scale, the floor at 1.0), one panel per section group.

    Returns ``path``, or ``None`` when matplotlib is missing or nothing has a ratio.
    """
    try:
        import matplotlib  # optional: only for the chart

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    panels = [(key, [f for f in figs if f.floor and not math.isnan(f.ratio) and f.ratio > 0])
              for key, figs in _groups(figures).items()]
    panels = [(key, figs) for key, figs in panels if figs]
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 3.6 * len(panels)), squeeze=False)
    for ax, ((section, group), figs) in zip(axes[:, 0], panels, strict=True):
        tools = list(dict.fromkeys(f.tool for f in figs))
        cases = list(dict.fromkeys(split_case(f.case)[1] for f in figs))
        width = 0.8 / len(tools)
        for i, tool in enumerate(tools):
            values = {split_case(f.case)[1]: f.ratio for f in figs if f.tool == tool}
            xs = [c + (i - (len(tools) - 1) / 2) * width for c in range(len(cases))]
            ax.bar(xs, [values.get(c, math.nan) for c in cases], width, label=tool)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)), cases, rotation=20, ha="right", fontsize=8)
        floor = ", ".join(sorted({f.floor for f in figs}))
        ax.set_title(f"{section}{' — ' + group if group else ''}: ratio to {floor} (1.0 = floor)", fontsize=10)
        ax.set_ylabel("× floor (log)")
        ax.legend(fontsize=7, ncol=min(len(tools), 6))
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.suptitle(f"s2o-kernel — {info['cpu']}, {info['cores']} cores, Python {info['python']}, {info['date']}",
                 fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
