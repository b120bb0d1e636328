"""``gpucheck compare BASE NEW``: what changed between two pytest-benchmark runs (a driver, CUDA or
TensorFlow upgrade between them), and whether it got slower beyond noise.

DESIGN.md, "Contract: comparing runs". Inputs are two pytest-benchmark JSON files (``--benchmark-json``,
``--benchmark-save``), or run ids in a pytest-benchmark storage folder (``0001 0002``: the files
``<storage>/*/0001_*.json``). gpucheck's own benchmarks and a user's are treated alike.

First what differs between the two machines (``machine_info["gpucheck"]``: driver, CUDA, cuDNN,
TensorFlow, GPUs; then Python and the CPU). Then, per benchmark in both runs, the change of the chosen
statistic (median by default; times, lower is better) and a verdict that accounts for noise:

- where both runs saved their per-round times (``stats.data``: pytest-benchmark's ``--benchmark-json``
  keeps them, ``--benchmark-save`` with ``--benchmark-save-data``), a two-sided Mann–Whitney U rank test,
  as Go's benchstat does: a change whose p-value is above ``alpha`` (0.05) is **same (within noise)**;
- otherwise the saved statistics: a change inside either run's interquartile range (relative to its
  median) is **same (within noise)**.

A significant change no larger than ``--threshold`` is **same (within threshold)**; beyond it, **slower** or
**faster**, and a slower benchmark is a regression. ``extra_info`` figures
(TFLOP/s, GB/s, samples/s: higher is better; latencies: lower is better) are compared beside them.
Exit status: 0 no regression, 1 at least one, 2 unusable input (one sentence, no traceback).

Standard library only; matplotlib is imported for ``--plot`` alone (the ``plot`` extra).
"""

from __future__ import annotations

import bisect
import glob
import io
import json
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from gpucheck.jsonfile import Unreadable, number, read_json

#: Exit statuses (DESIGN.md, "Contract: comparing runs").
NO_REGRESSION, REGRESSION, UNUSABLE = 0, 1, 2
#: The significance level of the rank test (benchstat's default).
ALPHA = 0.05
#: Fewer rounds than this in either run: the rank test cannot tell, the saved statistics decide.
MIN_ROUNDS_FOR_TEST = 4
#: ``extra_info`` figures compared, and whether higher is better.
FIGURES: dict[str, bool] = {
    "tflops": True,
    "gbps": True,
    "memory_gbps": True,
    "algbw_gbps": True,
    "busbw_gbps": True,
    "samples_per_s": True,
    "speedup": True,
    "efficiency": True,
    "latency_us": False,
}
#: What is compared between the two machines: (label, where in machine_info).
MACHINE_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("driver", ("gpucheck", "driver")),
    ("CUDA driver API", ("gpucheck", "cuda_driver")),
    ("CUDA (TensorFlow's build)", ("gpucheck", "cuda_build")),
    ("CUDA runtime (loaded)", ("gpucheck", "cuda_loaded")),
    ("cuDNN (TensorFlow's build)", ("gpucheck", "cudnn_build")),
    ("cuDNN (loaded)", ("gpucheck", "cudnn_loaded")),
    ("TensorFlow", ("gpucheck", "tensorflow")),
    ("Python", ("python_version",)),
    ("CPU", ("cpu", "brand_raw")),
    ("CPU count", ("cpu", "count")),
    ("host", ("node",)),
)


class UnusableInput(Exception):
    """An input that cannot be compared, with the sentence that says why."""


@dataclass(frozen=True)
class Bench:
    name: str
    stats: dict[str, float]
    data: tuple[float, ...] | None
    extra_info: dict[str, Any]


@dataclass(frozen=True)
class Run:
    label: str
    path: str
    datetime: str | None
    machine_info: dict[str, Any]
    benchmarks: dict[str, Bench]


@dataclass(frozen=True)
class Row:
    name: str
    base: float
    new: float
    #: new / base - 1 (for times: positive is slower).
    change: float
    verdict: str
    #: "rank test (Mann-Whitney U)", "saved statistics (median, IQR)", or without a saved spread.
    method: str
    p_value: float | None
    #: The runs' own spread, relative to their statistic: the larger of the two relative IQRs.
    noise: float
    regression: bool


@dataclass(frozen=True)
class FigureRow:
    name: str
    figure: str
    base: float
    new: float
    change: float
    higher_is_better: bool
    verdict: str


@dataclass(frozen=True)
class Comparison:
    base: Run
    new: Run
    metric: str
    threshold: float
    machine: list[tuple[str, Any, Any]]
    rows: list[Row]
    figures: list[FigureRow]
    only_base: list[str]
    only_new: list[str]

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.regression]

    @property
    def exit_status(self) -> int:
        return REGRESSION if self.regressions else NO_REGRESSION


# --- reading the inputs ---------------------------------------------------------------------------------

_RUN_ID = re.compile(r"^\d{4,}(?:_[^/\\]*)?$")


def resolve(arg: str, storage: str) -> str:
    """A file path as given, or a pytest-benchmark run id (``0001``) found in ``storage``."""
    if os.path.isfile(arg):
        return arg
    if os.path.isdir(arg):
        raise UnusableInput(f"{arg} is a folder, not a pytest-benchmark JSON file: give a file, or run ids with --storage {arg}")
    if _RUN_ID.match(arg):
        found = sorted(glob.glob(os.path.join(glob.escape(storage), "*", f"{glob.escape(arg)}*.json")))
        found = [f for f in found if os.path.basename(f).startswith(arg if "_" in arg else f"{arg}_")]
        if len(found) == 1:
            return found[0]
        if not found:
            raise UnusableInput(f"no run {arg} in the pytest-benchmark storage {storage} (look for {storage}/*/{arg}_*.json)")
        raise UnusableInput(f"run {arg} is ambiguous in {storage}: {', '.join(found[:4])}; give the file")
    raise UnusableInput(f"{arg} is not a file (nor a run id like 0001 in {storage})")


def load(arg: str, storage: str = ".benchmarks") -> Run:
    path = resolve(arg, storage)
    try:
        raw = read_json(path, "pytest-benchmark's JSON")
    except Unreadable as exc:
        raise UnusableInput(str(exc)) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("benchmarks"), list):
        raise UnusableInput(f"{path} is not in pytest-benchmark's format (no 'benchmarks' list)")
    benches: dict[str, Bench] = {}
    for i, item in enumerate(raw["benchmarks"]):
        bench = _bench(item)
        if bench is None:
            raise UnusableInput(f"{path} is not in pytest-benchmark's format (benchmark {i + 1} has no name or stats)")
        bad = next((k for k in ("median", "mean", "min", "max") if not bench.stats[k] > 0), None)
        if bad is not None:
            raise UnusableInput(f"{path}: benchmark {bench.name} has a {bad} time of {bench.stats[bad]!r}, not a positive number")
        if bench.name in benches:
            raise UnusableInput(f"{path} has the benchmark {bench.name} twice")
        benches[bench.name] = bench
    mi = raw.get("machine_info")
    return Run(arg, path, _str(raw.get("datetime")), mi if isinstance(mi, dict) else {}, benches)


def _bench(item: Any) -> Bench | None:
    if not isinstance(item, dict):
        return None
    name = item.get("fullname") or item.get("name")
    stats = item.get("stats")
    if not isinstance(name, str) or not isinstance(stats, dict):
        return None
    numbers = {k: f for k, v in stats.items() if (f := number(v)) is not None}
    if not all(k in numbers for k in ("median", "min", "max", "mean")):
        return None
    data = stats.get("data")
    rounds: tuple[float, ...] | None = None
    if isinstance(data, list) and data and all(type(x) is float or type(x) is int for x in data):
        try:
            rounds = tuple(map(float, data))
        except OverflowError:
            rounds = None
        if rounds is not None and not (math.isfinite(math.fsum(rounds)) and min(rounds) >= 0):
            rounds = None
    extra = item.get("extra_info")
    return Bench(name, numbers, rounds, extra if isinstance(extra, dict) else {})


def _number(x: Any) -> bool:
    return number(x) is not None


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


# --- statistics -----------------------------------------------------------------------------------------


#: Rounds beyond this are thinned to it (evenly over the sorted rounds: the same distribution) before the
#: rank test: fast micro-benchmarks save hundreds of thousands.
MAX_TEST_ROUNDS = 2000


def _thin(xs: Sequence[float]) -> list[float]:
    ordered = sorted(xs)
    if len(ordered) <= MAX_TEST_ROUNDS:
        return ordered
    step = len(ordered) / MAX_TEST_ROUNDS
    return [ordered[int(i * step)] for i in range(MAX_TEST_ROUNDS)]


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p-value of the Mann–Whitney U test (normal approximation with the tie correction and
    a continuity correction), as scipy.stats.mannwhitneyu(..., method="asymptotic") computes it. Each
    sample is thinned to MAX_TEST_ROUNDS first."""
    xs, ys = _thin(a), _thin(b)
    n1, n2 = len(xs), len(ys)
    if not n1 or not n2:
        return 1.0
    # U of the first sample: for each of its values, the values of the second below it, and half those equal.
    u1 = 0.0
    for x in xs:
        lo = bisect.bisect_left(ys, x)
        u1 += lo + (bisect.bisect_right(ys, x, lo) - lo) / 2
    ties = sum(t**3 - t for t in Counter(xs + ys).values() if t > 1)
    mean = n1 * n2 / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - mean) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def _relative_iqr(b: Bench, metric: str) -> float:
    iqr, centre = b.stats.get("iqr"), b.stats.get(metric)
    if iqr is None or not centre:
        return 0.0
    return abs(iqr / centre)


def compare_runs(base: Run, new: Run, threshold: float = 0.05, metric: str = "median", alpha: float = ALPHA) -> Comparison:
    common = [name for name in base.benchmarks if name in new.benchmarks]
    if not common:
        raise UnusableInput(f"{base.path} and {new.path} have no benchmark in common")
    rows, figures = [], []
    for name in common:
        b, n = base.benchmarks[name], new.benchmarks[name]
        rows.append(_row(name, b, n, threshold, metric, alpha))
        figures += _figures(name, b, n, threshold)
    return Comparison(
        base,
        new,
        metric,
        threshold,
        machine_diff(base.machine_info, new.machine_info),
        rows,
        figures,
        [x for x in base.benchmarks if x not in new.benchmarks],
        [x for x in new.benchmarks if x not in base.benchmarks],
    )


def _row(name: str, b: Bench, n: Bench, threshold: float, metric: str, alpha: float) -> Row:
    before, after = b.stats[metric], n.stats[metric]  # positive and finite (load checks)
    change = after / before - 1
    noise = max(_relative_iqr(b, metric), _relative_iqr(n, metric))
    p: float | None = None
    if b.data and n.data and min(len(b.data), len(n.data)) >= MIN_ROUNDS_FOR_TEST:
        method = "rank test (Mann-Whitney U)"
        p = mann_whitney_p(b.data, n.data)
        differs = p < alpha
    elif "iqr" in b.stats and "iqr" in n.stats and min(b.stats.get("rounds", 0), n.stats.get("rounds", 0)) >= 2:
        # The saved statistics: a change inside either run's interquartile range is within noise.
        method = "saved statistics (median, IQR)"
        differs = abs(change) > noise
    else:
        method = "saved statistics without spread (the threshold alone)"
        differs = abs(change) > threshold
    if not differs or change == 0:
        verdict = "same (within noise)"
    elif abs(change) <= threshold:
        # Beyond noise but not beyond the threshold: with hundreds of rounds a 1 % shift is significant.
        verdict = "same (within threshold)"
    else:
        verdict = "slower" if change > 0 else "faster"
    return Row(name, before, after, change, verdict, method, p, noise, verdict == "slower")


def _figures(name: str, b: Bench, n: Bench, threshold: float) -> list[FigureRow]:
    out = []
    for key, higher in FIGURES.items():
        x: Any = b.extra_info.get(key)
        y: Any = n.extra_info.get(key)
        if not (_number(x) and _number(y)) or x == 0:
            continue
        change = float(y) / float(x) - 1
        better = change > 0 if higher else change < 0
        verdict = "same" if abs(change) <= threshold else ("better" if better else "worse")
        out.append(FigureRow(name, key, float(x), float(y), change, higher, verdict))
    return out


def _dig(mi: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = mi
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _gpus(mi: dict[str, Any]) -> str | None:
    gpus = _dig(mi, ("gpucheck", "gpus"))
    if not isinstance(gpus, list):
        return None
    names = [
        f"{g.get('name')} ({g.get('pci_bus_id') or g.get('uuid') or '?'})" if isinstance(g, dict) else "?" for g in gpus
    ]
    return f"{len(names)}: " + ", ".join(names) if names else "none"


def machine_diff(base: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """What differs between the two machines (label, base, new), in the order a person reads it."""
    out = []
    for label, path in MACHINE_KEYS[:7]:
        a, b = _dig(base, path), _dig(new, path)
        if a != b:
            out.append((label, a, b))
    a_gpus, b_gpus = _gpus(base), _gpus(new)
    if a_gpus != b_gpus:
        out.append(("GPUs", a_gpus, b_gpus))
    for label, path in MACHINE_KEYS[7:]:
        a, b = _dig(base, path), _dig(new, path)
        if a != b:
            out.append((label, a, b))
    return out


# --- output ---------------------------------------------------------------------------------------------


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)):
        if abs(seconds) * scale >= 1 or unit == "ns":
            return f"{seconds * scale:.4g} {unit}"
    return f"{seconds:.4g} s"


def _pct(change: float) -> str:
    return "inf" if math.isinf(change) else f"{change:+.1%}"


def _methods(c: Comparison) -> str:
    used = sorted({r.method for r in c.rows})
    return " and ".join(used)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def text_report(c: Comparison, out: TextIO) -> None:
    w = out.write
    w(f"gpucheck compare: {c.base.path} ({c.base.datetime or 'no date'}) -> {c.new.path} ({c.new.datetime or 'no date'})\n\n")
    if c.machine:
        w("What differs between the two machines:\n")
        width = max(len(label) for label, _a, _b in c.machine)
        for label, a, b in c.machine:
            w(f"  {label:<{width}}  {a if a is not None else 'unknown'} -> {b if b is not None else 'unknown'}\n")
    else:
        w(same_machines(c) + "\n")
    w(
        f"\nBenchmarks ({c.metric} time, lower is better; noise judged by {_methods(c)}; a slower benchmark beyond "
        f"{c.threshold:.0%} is a regression):\n"
    )
    rows = [
        [r.name, _time(r.base), _time(r.new), _pct(r.change), r.verdict + (" REGRESSION" if r.regression else ""),
         _noise_text(r)]
        for r in c.rows
    ]
    for line in _table(["benchmark", "base", "new", "change", "verdict", "noise"], rows):
        w(f"  {line}\n")
    moved = [f for f in c.figures if f.verdict != "same"]
    if c.figures:
        w(f"\nFigures (extra_info): {len(c.figures) - len(moved)} of {len(c.figures)} within {c.threshold:.0%}")
        w(":\n" if moved else ".\n")
    if moved:
        frows = [
            [f.name, f.figure + ("" if f.higher_is_better else " (lower is better)"), f"{f.base:.4g}", f"{f.new:.4g}",
             _pct(f.change), f.verdict]
            for f in moved
        ]
        for line in _table(["benchmark", "figure", "base", "new", "change", "verdict"], frows):
            w(f"  {line}\n")
    for label, names in (("Only in the base run", c.only_base), ("Only in the new run", c.only_new)):
        if names:
            w(f"\n{label} ({len(names)}):\n")
            for name in names:
                w(f"  {name}\n")
    w("\n" + summary(c) + "\n")


def _noise_text(r: Row) -> str:
    parts = []
    if r.p_value is not None:
        parts.append("p<1e-300" if r.p_value < 1e-300 else f"p={r.p_value:.2g}")
    if not r.method.endswith("(the threshold alone)"):
        parts.append(f"IQR {r.noise:.1%}")
    return ", ".join(parts) or "no spread saved"


def same_machines(c: Comparison) -> str:
    if "gpucheck" in c.base.machine_info or "gpucheck" in c.new.machine_info:
        return "The two machines are the same: driver, CUDA, cuDNN, TensorFlow, GPUs, Python and CPU."
    return (
        "The two machines are the same as far as pytest-benchmark recorded them (Python, CPU); neither run "
        "recorded its GPU stack (machine_info['gpucheck']: run the benchmarks with --gpucheck)."
    )


def summary(c: Comparison) -> str:
    regs = c.regressions
    if not regs:
        return f"No regression beyond {c.threshold:.0%} ({len(c.rows)} benchmark{'s' if len(c.rows) != 1 else ''} compared)."
    names = ", ".join(f"{r.name} ({_pct(r.change)})" for r in regs[:10]) + (" ..." if len(regs) > 10 else "")
    return f"{len(regs)} regression(s) beyond {c.threshold:.0%}: {names}."


def markdown_report(c: Comparison, out: TextIO) -> None:
    w = out.write
    w(f"### gpucheck compare: `{os.path.basename(c.base.path)}` → `{os.path.basename(c.new.path)}`\n\n")
    if c.machine:
        w("| | base | new |\n| --- | --- | --- |\n")
        for label, a, b in c.machine:
            w(f"| {label} | {_md(a)} | {_md(b)} |\n")
        w("\n")
    else:
        w(same_machines(c) + "\n\n")
    w("| benchmark | base | new | change | verdict |\n| --- | ---: | ---: | ---: | --- |\n")
    for r in c.rows:
        verdict = f"**{r.verdict}**" if r.regression else r.verdict
        w(f"| `{_md(r.name)}` | {_time(r.base)} | {_time(r.new)} | {_pct(r.change)} | {verdict} |\n")
    moved = [f for f in c.figures if f.verdict != "same"]
    if moved:
        w("\n| benchmark | figure | base | new | change | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n")
        for f in moved:
            w(f"| `{_md(f.name)}` | {f.figure} | {f.base:.4g} | {f.new:.4g} | {_pct(f.change)} | {f.verdict} |\n")
    for label, names in (("Only in the base run", c.only_base), ("Only in the new run", c.only_new)):
        if names:
            w(f"\n{label}: " + ", ".join(f"`{_md(x)}`" for x in names) + "\n")
    w(f"\n{c.metric} times; noise judged by {_methods(c)}. {summary(c)}\n")


def _md(x: Any) -> str:
    return str(x if x is not None else "unknown").replace("|", "\\|")


def json_report(c: Comparison) -> dict[str, Any]:
    return {
        "schema": "gpucheck-compare/1",
        "base": {"path": c.base.path, "datetime": c.base.datetime},
        "new": {"path": c.new.path, "datetime": c.new.datetime},
        "metric": c.metric,
        "threshold": c.threshold,
        "machine": [{"what": label, "base": a, "new": b} for label, a, b in c.machine],
        "benchmarks": [asdict(r) for r in c.rows],
        "figures": [asdict(f) for f in c.figures],
        "only_base": c.only_base,
        "only_new": c.only_new,
        "regressions": [r.name for r in c.regressions],
        "exit_status": c.exit_status,
    }


def plot(c: Comparison, fmt: str) -> bytes:
    """One bar per benchmark: its change, with the runs' own spread as a band around zero, coloured by
    verdict; drawn in memory (``fmt``: png or svg), written by the caller."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UnusableInput("--plot needs matplotlib: pip install 'pytest-gpucheck[plot]'") from None
    with matplotlib.rc_context({"text.parse_math": False}):  # benchmark names may hold '$'
        return _draw(c, fmt, plt)


def _draw(c: Comparison, fmt: str, plt: Any) -> bytes:
    colours = {
        "slower": "#d62728", "faster": "#2ca02c", "same (within noise)": "#7f7f7f", "same (within threshold)": "#bcbcbc"
    }
    rows = c.rows
    height = max(2.5, 0.32 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(9, min(height, 60)))
    ys = list(range(len(rows)))
    changes = [0.0 if math.isinf(r.change) else r.change * 100 for r in rows]
    ax.barh(ys, changes, color=[colours[r.verdict] for r in rows], height=0.6, zorder=3)
    for y, r in zip(ys, rows, strict=True):
        ax.fill_betweenx([y - 0.4, y + 0.4], -r.noise * 100, r.noise * 100, color="#1f77b4", alpha=0.15, zorder=2)
    ax.axvline(c.threshold * 100, color="#d62728", linestyle="--", linewidth=1, zorder=4)
    ax.axvline(0, color="black", linewidth=0.8, zorder=4)
    ax.set_yticks(ys, [r.name if len(r.name) <= 60 else "…" + r.name[-59:] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"change of the {c.metric} time, % (right: slower); band: the runs' own spread (IQR)")
    ax.set_title(f"{os.path.basename(c.base.path)} → {os.path.basename(c.new.path)}: {summary(c)}", fontsize=9)
    ax.grid(axis="x", alpha=0.3, zorder=0)
    fig.tight_layout()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format=fmt)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def plot_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".png", ".svg"):
        raise UnusableInput(f"--plot {path}: the file must end in .png or .svg")
    return ext[1:]


@dataclass
class Options:
    base: str
    new: str
    threshold: float = 0.05
    metric: str = "median"
    storage: str = ".benchmarks"
    plot: str | None = None
    as_json: bool = False
    markdown: bool = False


def run(opts: Options, out: TextIO) -> int:
    """Compare and print; raises :class:`UnusableInput` for an input that cannot be compared (before
    anything is printed: the plot is drawn and its file checked first)."""
    fmt = plot_format(opts.plot) if opts.plot is not None else None
    c = compare_runs(load(opts.base, opts.storage), load(opts.new, opts.storage), opts.threshold, opts.metric)
    image = plot(c, fmt) if fmt is not None else None
    if opts.plot is not None and image is not None:
        _write(opts.plot, image)
    if opts.as_json:
        json.dump(json_report(c), out, indent=2, allow_nan=False)
        out.write("\n")
    elif opts.markdown:
        markdown_report(c, out)
    else:
        text_report(c, out)
    return c.exit_status


def _write(path: str, image: bytes) -> None:
    if os.path.isdir(path):
        raise UnusableInput(f"cannot write the plot to {path}: it is a folder")
    try:
        with open(path, "wb") as fh:
            fh.write(image)
    except OSError as exc:
        raise UnusableInput(f"cannot write the plot to {path} ({exc.strerror or exc})") from None


def parse_threshold(text: str) -> float:
    """A percentage: ``5%`` or ``5``."""
    t = text.strip().removesuffix("%")
    try:
        value = float(t) / 100
    except ValueError:
        raise ValueError(f"--threshold {text}: must be a percentage like 5%") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"--threshold {text}: must be a percentage of 0 or more")
    return value
