"""``gpucheck compare BASE NEW``: what changed between two pytest-benchmark runs (a driver, CUDA or
TensorFlow upgrade between them), and whether it got slower beyond noise.

DESIGN.md, "Contract: comparing runs". Inputs are two pytest-benchmark JSON files (``--benchmark-json``,
``--benchmark-save``), or run ids in a pytest-benchmark storage folder (``0001 0002``: the files
``<storage>/*/0001_*.json``). gpucheck's own benchmarks and a user's are treated alike.

First the two machines: everything pytest-benchmark and py-cpuinfo recorded, whatever their versions
(``cpu.brand`` before py-cpuinfo 6, ``cpu.brand_raw`` since; OS, release (the kernel), architecture,
compiler, Python implementation and build ...), gpucheck's GPU stack (``machine_info["gpucheck"]``: driver,
CUDA, cuDNN, TensorFlow, GPUs), and any other key a conftest added. What only one run recorded reads "not
recorded", never "the same". Then, per benchmark in both runs (pytest-benchmark's groups kept together), the
change of the chosen statistic (median by default; times, lower is better) and a verdict that accounts for
noise. Significance *and direction* come from one test, the metric only reports its change:

- where both runs saved their per-round times (``stats.data``: pytest-benchmark's ``--benchmark-json``
  keeps them, ``--benchmark-save`` with ``--benchmark-save-data``), a two-sided Mann–Whitney U rank test,
  as Go's benchstat does, and its Hodges–Lehmann shift (the median of every new − base difference) for the
  direction and size: a few outlier rounds lift a max or a mean, not the shift;
- otherwise what was saved of the rounds: Welch's t on the mean, standard deviation and number of rounds
  (a change inside a wide IQR is still a change when fifty rounds pin the mean down);
- a run with neither: the metric's change against the threshold alone.

A p-value above ``alpha`` (0.05) is **same (within noise)**; a significant change whose estimate is no
larger than ``--threshold`` is **same (within threshold)**; beyond it, **slower** or **faster**, and a slower
benchmark is a regression. ``extra_info`` figures (TFLOP/s, GB/s, samples/s: higher is better; latencies:
lower is better) are compared beside them. Names are fitted to the terminal's width (full in ``--json``
and ``--markdown``); the plot draws at most MAX_PLOT_ROWS bars.
Exit status: 0 no regression, 1 at least one, 2 unusable input (one sentence, no traceback). ``--plot`` onto one
of the inputs, or onto a folder, is refused before anything is printed; a plot that cannot be drawn or written is
said after the comparison is printed, and the comparison's own status stands (1 for a regression, else 2).

The code, by what it does: ``files`` (reading the inputs), ``stats`` (the rank test, the shift, Welch's t),
``verdicts`` (a verdict per benchmark and figure, the exit status), ``machines`` (the machine section),
``render`` (text, Markdown, JSON), ``chart`` (``--plot``); this module is the command (``Options``, ``run``) and
the names the CLI and tests use.

Standard library only; matplotlib is imported for ``--plot`` alone (the ``plot`` extra).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import TextIO

from gpucheck.compare.chart import MAX_PLOT_ROWS, figure, plot, plotted_rows
from gpucheck.compare.files import Bench, Run, UnusableInput, load, resolve
from gpucheck.compare.machines import GPU_STACK, HOST_KEYS, MachineItem, machine_items
from gpucheck.compare.render import (
    fit,
    fit_names,
    json_report,
    machine_lines,
    markdown_report,
    summary,
    terminal_width,
    text_report,
    threshold_text,
    verdict_text,
)
from gpucheck.compare.stats import (
    MAX_SHIFT_ROUNDS,
    MAX_TEST_ROUNDS,
    hodges_lehmann,
    mann_whitney_p,
    student_t_p,
    welch_p,
)
from gpucheck.compare.verdicts import (
    ALPHA,
    FIGURES,
    MIN_ROUNDS_FOR_TEST,
    NO_REGRESSION,
    NO_SPREAD,
    RANK_TEST,
    REGRESSION,
    UNUSABLE,
    WELCH,
    Comparison,
    FigureRow,
    Row,
    compare_runs,
)
from gpucheck.reportfile import same_file

#: What the CLI (``gpucheck.cli``) and the tests use, wherever it is defined.
__all__ = [
    "ALPHA", "FIGURES", "GPU_STACK", "HOST_KEYS", "MAX_PLOT_ROWS", "MAX_SHIFT_ROUNDS", "MAX_TEST_ROUNDS",
    "MIN_ROUNDS_FOR_TEST", "NO_REGRESSION", "NO_SPREAD", "RANK_TEST", "REGRESSION", "UNUSABLE", "WELCH",
    "Bench", "Comparison", "FigureRow", "MachineItem", "Options", "Row", "Run", "UnusableInput", "compare_runs",
    "exit_status", "figure", "fit", "fit_names", "hodges_lehmann", "json_report", "load", "machine_items", "machine_lines",
    "mann_whitney_p", "markdown_report", "parse_threshold", "plot", "plot_format", "plotted_rows", "prepare",
    "resolve", "run", "save_plot", "student_t_p", "summary", "terminal_width", "text_report", "threshold_text",
    "verdict_text", "welch_p", "write",
]


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
    #: The text report's width; None: the terminal's (``shutil.get_terminal_size``, COLUMNS).
    width: int | None = None


def prepare(opts: Options) -> Comparison:
    """Read and compare, and check where the plot goes (not onto a folder, nor onto an input it would overwrite):
    everything that may fail on the input, before anything is printed. Raises :class:`UnusableInput`."""
    if opts.plot is not None:
        plot_format(opts.plot)
        if os.path.isdir(opts.plot):
            raise UnusableInput(f"cannot write the plot to {opts.plot}: it is a folder")
    base, new = load(opts.base, opts.storage), load(opts.new, opts.storage)
    if opts.plot is not None:
        for run_ in (base, new):
            if same_file(opts.plot, run_.path):
                raise UnusableInput(f"--plot {opts.plot} is an input of the comparison: it would be overwritten")
    return compare_runs(base, new, opts.threshold, opts.metric)


def save_plot(c: Comparison, opts: Options) -> str | None:
    """Draw the plot and write it, after the comparison was printed: None, or the sentence of why it could not be."""
    if opts.plot is None:
        return None
    try:
        _write(opts.plot, plot(c, plot_format(opts.plot)))
    except UnusableInput as exc:
        return str(exc)
    return None


def exit_status(c: Comparison, plot_error: str | None) -> int:
    """The comparison's own status; a plot that could not be made is 2 only where no regression says 1."""
    return c.exit_status if plot_error is None or c.regressions else UNUSABLE


def write(c: Comparison, opts: Options, out: TextIO) -> None:
    if opts.as_json:
        json.dump(json_report(c), out, indent=2, allow_nan=False)
        out.write("\n")
    elif opts.markdown:
        markdown_report(c, out)
    else:
        text_report(c, out, opts.width)


def run(opts: Options, out: TextIO) -> int:
    """Compare and print; raises :class:`UnusableInput` for an input that cannot be compared (before
    anything is printed: the plot is drawn and its file checked first)."""
    c = prepare(opts)
    write(c, opts, out)
    return exit_status(c, save_plot(c, opts))


def _write(path: str, image: bytes) -> None:
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
