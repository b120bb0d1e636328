"""``gpucheck compare --plot``: the changes drawn, one bar per benchmark (matplotlib, imported only here and only
then: the ``plot`` extra)."""

from __future__ import annotations

import io
import math
import os
from typing import Any

from gpucheck.compare.files import UnusableInput
from gpucheck.compare.render import _grouped, _wrap, fit, threshold_text
from gpucheck.compare.verdicts import NO_SPREAD, RANK_TEST, WELCH, Comparison, Row

#: At most this many benchmarks are drawn (a bar each): beyond it, those that moved most, and the title
#: says how many of how many. 50 rows at 0.26 in are 13 in, 1,300 px at 100 dpi.
MAX_PLOT_ROWS = 50
ROW_INCHES = 0.26
PLOT_WIDTH_INCHES = 10.0
NAME_CHARS = 60


def plot(c: Comparison, fmt: str) -> bytes:
    """One bar per benchmark: its change, with the runs' own spread as a band around zero, coloured by
    verdict; drawn in memory (``fmt``: png or svg), written by the caller."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnusableInput("--plot needs matplotlib: pip install 'pytest-gpucheck[plot]'") from None
    # Benchmark names may hold '$'; an SVG keeps its words as text (searchable, selectable).
    with matplotlib.rc_context({"text.parse_math": False, "svg.fonttype": "none"}):
        fig = figure(c, plt)
        buffer = io.BytesIO()
        try:
            # "tight": the image is the drawing's own extent, so no title, label or name is cut off.
            fig.savefig(buffer, format=fmt, dpi=100, bbox_inches="tight", pad_inches=0.2)
        finally:
            plt.close(fig)
    return buffer.getvalue()


def plotted_rows(c: Comparison) -> list[Row]:
    """The rows drawn: all of them, or (more than MAX_PLOT_ROWS) those that moved most, in table order."""
    if len(c.rows) <= MAX_PLOT_ROWS:
        return list(c.rows)
    def weight(r: Row) -> tuple[int, float]:
        moved = r.verdict in ("slower", "faster")
        return (0 if moved else 1, -abs(r.shift if r.shift is not None else r.change))
    keep = {id(r) for r in sorted(c.rows, key=weight)[:MAX_PLOT_ROWS]}
    return [r for r in c.rows if id(r) in keep]


def figure(c: Comparison, plt: Any) -> Any:
    """The matplotlib figure of :func:`plot`, laid out by matplotlib's constrained layout."""
    colours = {
        "slower": "#d62728", "faster": "#2ca02c", "same (within noise)": "#7f7f7f", "same (within threshold)": "#bcbcbc"
    }
    rows = plotted_rows(c)
    height = max(3.0, ROW_INCHES * len(rows) + 2.0)
    fig, ax = plt.subplots(figsize=(PLOT_WIDTH_INCHES, height), layout="constrained")
    ys = list(range(len(rows)))
    # The bar: the change the verdict rests on (the test's own estimate); the dot: the metric's change.
    estimates = [_finite(r.shift if r.shift is not None else r.change) * 100 for r in rows]
    changes = [_finite(r.change) * 100 for r in rows]
    ax.barh(ys, estimates, color=[colours[r.verdict] for r in rows], height=0.6, zorder=3)
    ax.scatter(changes, ys, s=12, color="black", marker="D", zorder=5)
    for y, r in zip(ys, rows, strict=True):
        ax.fill_betweenx([y - 0.4, y + 0.4], -r.noise * 100, r.noise * 100, color="#1f77b4", alpha=0.15, zorder=2)
    ax.axvline(c.threshold * 100, color="#d62728", linestyle="--", linewidth=1, zorder=4)
    ax.axvline(0, color="black", linewidth=0.8, zorder=4)
    labels = [fit(r.short if _grouped(c) and r.short else r.name, NAME_CHARS) for r in rows]
    if _grouped(c):
        labels = [f"{fit(r.group or '', 24)}: {label}" if r.group else label for r, label in zip(rows, labels, strict=True)]
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(_wrap(f"change, % (right: slower). Bar: the test's own estimate ({_estimates(c)}), which decides; "
                        f"dot: the {c.metric} time; band: the runs' own spread (IQR); dashed: the threshold, "
                        f"{threshold_text(c.threshold)}", 110))
    regs = len(c.regressions)
    faster = sum(r.verdict == "faster" for r in c.rows)
    drawn = "" if len(rows) == len(c.rows) else f"; {len(rows)} of {len(c.rows)} drawn, those that moved most"
    title = (f"{os.path.basename(c.base.path)} → {os.path.basename(c.new.path)}: {regs} regression"
             f"{'s' if regs != 1 else ''} beyond {threshold_text(c.threshold)}, {faster} faster{drawn}")
    ax.set_title(_wrap(title, 90), fontsize=9)
    ax.grid(axis="x", alpha=0.3, zorder=0)
    return fig


def _finite(x: float) -> float:
    return 0.0 if math.isinf(x) or math.isnan(x) else x


def _estimates(c: Comparison) -> str:
    names = {RANK_TEST: "Hodges-Lehmann shift", WELCH: "change of the mean", NO_SPREAD: f"change of the {c.metric}"}
    return ", ".join(dict.fromkeys(names[r.method] for r in c.rows))
