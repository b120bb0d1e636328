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
import shutil
import statistics
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import repeat
from operator import sub
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
#: The GPU stack gpucheck records (``machine_info["gpucheck"]``): label, key.
GPU_STACK: tuple[tuple[str, str], ...] = (
    ("driver", "driver"),
    ("CUDA driver API", "cuda_driver"),
    ("CUDA (TensorFlow's build)", "cuda_build"),
    ("CUDA runtime (loaded)", "cuda_loaded"),
    ("cuDNN (TensorFlow's build)", "cudnn_build"),
    ("cuDNN (loaded)", "cudnn_loaded"),
    ("TensorFlow", "tensorflow"),
)
#: What pytest-benchmark (2.5 to 5.x: ``platform`` module) and py-cpuinfo (``cpu``: ``brand`` before 6.0,
#: ``brand_raw`` since; ``vendor_id`` / ``vendor_id_raw`` likewise) have recorded: label, then the places
#: it may be, the first one recorded wins.
HOST_KEYS: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("Python", (("python_version",),)),
    ("Python implementation", (("python_implementation",),)),
    ("Python build", (("python_build",),)),
    ("compiler", (("python_compiler",),)),
    ("CPU", (("cpu", "brand_raw"), ("cpu", "brand"))),
    ("CPU vendor", (("cpu", "vendor_id_raw"), ("cpu", "vendor_id"))),
    ("CPU count", (("cpu", "count"),)),
    ("CPU clock (advertised)", (("cpu", "hz_advertised_friendly"), ("cpu", "hz_advertised"))),
    ("architecture", (("machine",), ("cpu", "arch_string_raw"), ("cpu", "arch"))),
    ("processor", (("processor",),)),
    ("OS", (("system",),)),
    ("OS release (kernel)", (("release",),)),
    ("host", (("node",),)),
)
#: machine_info's keys read above; any other key a conftest added (``runner``, ``ci``) is compared as it is.
_KNOWN_TOP = frozenset(
    {"gpucheck", "cpu", "node", "processor", "machine", "python_compiler", "python_implementation",
     "python_implementation_version", "python_version", "python_build", "release", "system"}
)


class UnusableInput(Exception):
    """An input that cannot be compared, with the sentence that says why."""


@dataclass(frozen=True)
class Bench:
    name: str
    stats: dict[str, float]
    data: tuple[float, ...] | None
    extra_info: dict[str, Any]
    #: pytest-benchmark's ``group`` (``@pytest.mark.benchmark(group=...)``, ``--benchmark-group-by``).
    group: str | None = None
    #: pytest-benchmark's ``name``: the test without its file (``test_x[param]``), for narrow output.
    short: str = ""


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
    #: new / base - 1 of the chosen metric (for times: positive is slower). It reports; it does not decide.
    change: float
    verdict: str
    #: "rank test (Mann-Whitney U)", "saved statistics (Welch's t on mean, stddev, rounds)", or without a
    #: saved spread.
    method: str
    p_value: float | None
    #: The runs' own spread, relative to their statistic: the larger of the two relative IQRs.
    noise: float
    regression: bool
    #: The change the test itself estimates, relative to the base run (positive is slower): the
    #: Hodges-Lehmann shift of the rounds (the median of every new - base difference) over the base median
    #: with the rank test, the change of the mean with Welch's t. Its sign is the verdict's direction.
    shift: float | None = None
    group: str | None = None
    short: str = ""


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
class MachineItem:
    """One thing about the machines (CPU, OS release, driver ...) as each run recorded it (None: not)."""

    what: str
    base: str | None
    new: str | None

    @property
    def state(self) -> str:
        """``same``, ``differs``, ``base only``, ``new only`` or ``neither`` (recorded by neither run)."""
        if self.base is None and self.new is None:
            return "neither"
        if self.base is None:
            return "new only"
        if self.new is None:
            return "base only"
        return "same" if self.base == self.new else "differs"


@dataclass(frozen=True)
class Comparison:
    base: Run
    new: Run
    metric: str
    threshold: float
    #: What differs between the machines, or is recorded by one run only: (label, base, new), None where
    #: a run did not record it.
    machine: list[tuple[str, Any, Any]]
    rows: list[Row]
    figures: list[FigureRow]
    only_base: list[str]
    only_new: list[str]
    #: Every item of the machines, whatever its state.
    machine_items: tuple[MachineItem, ...] = ()

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
    if not raw["benchmarks"]:
        raise UnusableInput(f"{path} has no benchmarks (its 'benchmarks' list is empty): nothing to compare")
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
    if isinstance(data, list) and data and set(map(type, data)) <= {float, int}:  # not bool, not str
        try:
            rounds = tuple(map(float, data))
        except OverflowError:
            rounds = None
        if rounds is not None and not (math.isfinite(math.fsum(rounds)) and min(rounds) >= 0):
            rounds = None
    saved_rounds = numbers.get("rounds")
    if rounds is not None and saved_rounds is not None and len(rounds) != saved_rounds:
        rounds = None  # a sample of the rounds (cut to keep a file small) is not the run
    extra = item.get("extra_info")
    group = item.get("group")
    short = item.get("name")
    return Bench(
        name,
        numbers,
        rounds,
        extra if isinstance(extra, dict) else {},
        group if isinstance(group, str) and group else None,
        short if isinstance(short, str) and short else name,
    )


def _number(x: Any) -> bool:
    return number(x) is not None


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


# --- statistics -----------------------------------------------------------------------------------------


#: Rounds beyond this are thinned to it (evenly over the sorted rounds: the same distribution) before the
#: rank test: fast micro-benchmarks save hundreds of thousands.
MAX_TEST_ROUNDS = 2000
#: The same for the Hodges-Lehmann shift, whose search counts pairs once per step.
MAX_SHIFT_ROUNDS = 500


def _thin(xs: Sequence[float], most: int = MAX_TEST_ROUNDS) -> list[float]:
    ordered = sorted(xs)
    if len(ordered) <= most:
        return ordered
    step = len(ordered) / most
    return [ordered[int(i * step)] for i in range(most)]


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p-value of the Mann–Whitney U test (normal approximation with the tie correction and
    a continuity correction), as scipy.stats.mannwhitneyu(..., method="asymptotic") computes it. Each
    sample is thinned to MAX_TEST_ROUNDS first."""
    xs, ys = _thin(a), _thin(b)
    n1, n2 = len(xs), len(ys)
    if not n1 or not n2:
        return 1.0
    # U of the first sample: for each of its values, the values of the second below it, and half those equal
    # (whole and half numbers: the sums are exact in any order).
    below = sum(map(bisect.bisect_left, repeat(ys, n1), xs))
    u1 = below + (sum(map(bisect.bisect_right, repeat(ys, n1), xs)) - below) / 2
    ties = sum(t**3 - t for t in Counter(xs + ys).values() if t > 1)
    mean = n1 * n2 / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - mean) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def hodges_lehmann(a: Sequence[float], b: Sequence[float]) -> float:
    """The Hodges–Lehmann estimate of the shift from ``a`` to ``b``: the median of every difference
    ``b[j] - a[i]`` (as floats: ``statistics.median`` of the n·m differences, the mean of the two middle
    ones for an even count), the estimate that goes with the rank test. Each sample is thinned to
    MAX_SHIFT_ROUNDS first. Exact, without listing the n·m differences: _ranked_differences."""
    xs, ys = _thin(a, MAX_SHIFT_ROUNDS), _thin(b, MAX_SHIFT_ROUNDS)
    total = len(xs) * len(ys)
    if not total:
        return 0.0
    if total % 2:
        middle = _ranked_differences(xs, ys, (total // 2 + 1,))[0]
    else:
        low, high = _ranked_differences(xs, ys, (total // 2, total // 2 + 1))
        middle = (low + high) / 2
    return middle + 0.0  # a zero is +0.0, whichever of 0.0 and -0.0 (equal) the ranks landed on


#: Up to this many pairs the differences are listed and sorted; beyond, the search below.
LIST_ALL_PAIRS = 1024
#: The search stops narrowing when this many differences per row (or fewer) are left to list.
LEFT_PER_ROW = 4
#: ... or after this many counts, whatever is left (ties: many pairs with one difference) then listed.
MAX_NARROWING_STEPS = 16
#: A row's window longer than this is checked for being one value (ties), counted rather than listed.
RUN_CHECK = 16


def _ranked_differences(xs: list[float], ys: list[float], ranks: tuple[int, ...]) -> list[float]:
    """The differences ``y - x`` (computed as floats) of the given ranks (1-based, ascending) among all
    n·m of them; ``xs`` and ``ys`` sorted, finite. Exactly what sorting every difference gives (equal
    values aside: 0.0 and -0.0), at a few counts of O(m log n) each (at most MAX_NARROWING_STEPS; 3 to 6
    measured on ordinary samples) and one listing of about LEFT_PER_ROW·m pairs, m the shorter sample:

    1. narrow a range of values ``(lo, hi]`` that holds the ranks, by counting the differences at or below
       a value with one C-level binary search per row (``x >= y - v``, rounded once: an estimate of the
       count, which is all the narrowing needs) — interpolating on the counts and halving in turn;
    2. list the differences in ``[lo, hi]`` widened by a margin far above rounding, row by row, computed
       and sorted as floats, and count those below it (``y - x`` is monotone in x, even rounded: a window
       of x per row); the counts must hold the ranks, or every difference is listed.
    """
    n, m = len(xs), len(ys)
    total = n * m
    scale = max(abs(xs[0]), abs(xs[-1])) + max(abs(ys[0]), abs(ys[-1]))
    if scale == 0:
        return [0.0 for _ in ranks]  # every value is zero, and so every difference
    if total <= LIST_ALL_PAIRS or not scale < math.inf:
        return _listed(xs, ys, ranks)
    if m > n:
        # One row per value of the shorter sample: y - x == -(x - y) exactly (rounding is symmetric).
        flipped = _ranked_differences(ys, xs, tuple(total + 1 - r for r in reversed(ranks)))
        return [-v for v in reversed(flipped)]
    margin = scale * 2.0**-48  # sixteen times the rounding errors (below scale * 2**-52)

    def at_or_below(v: float) -> int:  # about how many y - x <= v: pairs with x >= y - v
        return total - sum(map(bisect.bisect_left, repeat(xs, m), map(sub, ys, repeat(v, m))))

    lo, hi = ys[0] - xs[-1] - margin, ys[-1] - xs[0]  # below every difference, at or above every one
    below_lo, up_to_hi = 0, total
    first, last = ranks[0], ranks[-1]
    stalled = False  # the last step left most pairs: a dense cluster of values (or ties) in the range
    for step in range(MAX_NARROWING_STEPS):
        left = up_to_hi - below_lo
        if left <= LEFT_PER_ROW * m or hi - lo <= 4 * margin:
            break
        guess = ys[m // 2] - xs[n // 2]  # the medians' difference: the shift itself for samples of one shape
        if stalled:
            v = _middle_pair(xs, ys, lo, hi)
        elif step == 0 and lo < guess < hi:
            v = guess
        elif step % 2:  # where a straight line through the two counts reaches the middle of the ranks
            share = ((first + last) / 2 - below_lo) / left
            v = lo + (hi - lo) * min(max(share, 1 / 64), 63 / 64)
        else:
            v = (lo + hi) / 2
        if not lo < v < hi:
            break
        count = at_or_below(v)
        if count < first:
            lo, below_lo = v, count
        elif count >= last:
            hi, up_to_hi = v, count
        else:  # the two middle ranks on either side of v: each found on its own side
            return _ranked_differences_within(xs, ys, lo, v, (first,), margin) + _ranked_differences_within(
                xs, ys, v, hi, (last,), margin
            )
        stalled = up_to_hi - below_lo > left * 3 // 4
    return _ranked_differences_within(xs, ys, lo, hi, ranks, margin)


def _middle_pair(xs: list[float], ys: list[float], lo: float, hi: float) -> float:
    """A difference in ``(lo, hi]`` (about) with at least a quarter of those on each side: the weighted
    median of each row's middle one (Johnson and Mizoguchi's pivot), for a step that values alone cannot
    place (many differences within a sliver of the range). Ties: it is the tied value."""
    m = len(ys)
    starts = map(bisect.bisect_left, repeat(xs, m), map(sub, ys, repeat(hi, m)))
    ends = map(bisect.bisect_left, repeat(xs, m), map(sub, ys, repeat(lo, m)))
    middles = sorted((y - xs[(s + e) // 2], e - s) for y, s, e in zip(ys, starts, ends, strict=True) if e > s)
    if not middles:
        return hi
    half, seen = sum(w for _, w in middles) / 2, 0
    for d, w in middles:
        seen += w
        if seen >= half:
            return d
    return hi


def _ranked_differences_within(
    xs: list[float], ys: list[float], lo: float, hi: float, ranks: tuple[int, ...], margin: float
) -> list[float]:
    """_ranked_differences's step 2: the ranks from the differences in ``[lo - margin, hi + margin]``."""
    n, m = len(xs), len(ys)
    low, high = lo - margin, hi + margin
    # Each row's window of x. Before its start, x < y - (high + margin) rounded, so y - x > high + margin
    # exactly and, rounded (rounding is monotone), at least high + margin: above high. Past its end, likewise
    # below low. (Were the margin too small to move them, such a pair could equal high or low: then the
    # ranks check below fails, or the ranks land on the same values.)
    starts = list(map(bisect.bisect_left, repeat(xs, m), map(sub, ys, repeat(high + margin, m))))
    ends = list(map(bisect.bisect_right, repeat(xs, m), map(sub, ys, repeat(low - margin, m)), starts))
    below = n * m - sum(ends)
    runs: list[tuple[float, int]] = []  # (difference, how many): a long window of one value (ties)
    if max(map(sub, ends, starts)) <= RUN_CHECK:
        listed = [y - x for y, s, e in zip(ys, starts, ends, strict=True) for x in xs[s:e]]
    else:
        listed = []
        for y, s, e in zip(ys, starts, ends, strict=True):
            if e - s > RUN_CHECK and y - xs[s] == y - xs[e - 1]:
                d = y - xs[s]
                if d < low:
                    below += e - s
                elif d <= high:
                    runs.append((d, e - s))
            else:
                listed += [y - x for x in xs[s:e]]
    listed.sort()
    inside, beyond = bisect.bisect_left(listed, low), bisect.bisect_right(listed, high)
    below += inside
    # The ranks must fall among the differences in [low, high]: all of those below low are counted, all
    # the others are above high.
    if not below < ranks[0] or below + beyond - inside + sum(c for _, c in runs) < ranks[-1]:
        return _listed(xs, ys, ranks)
    if not runs:
        return [listed[inside + r - below - 1] for r in ranks]
    counted = sorted([(d, 1) for d in listed[inside:beyond]] + runs)
    out: list[float] = []
    seen, i = below, 0
    for r in ranks:
        while seen + counted[i][1] < r:
            seen += counted[i][1]
            i += 1
        out.append(counted[i][0])
    return out


def _listed(xs: Sequence[float], ys: Sequence[float], ranks: tuple[int, ...]) -> list[float]:
    """Every difference ``y - x``, sorted: the definition, for few pairs (and the fallback)."""
    every = sorted([y - x for y in ys for x in xs])
    return [every[r - 1] for r in ranks]


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), by its continued fraction (modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for i in range(2, 1000):  # the terms d_2, d_3, ... (d_1 is in the start above)
        m = i // 2
        if i % 2:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        else:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        if i % 2 and abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def student_t_p(t: float, df: float) -> float:
    """The two-sided p-value of Student's t with ``df`` degrees of freedom: I_{df/(df+t²)}(df/2, 1/2)."""
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, max(0.0, _betainc(df / 2, 0.5, df / (df + t * t))))


def welch_p(b: Bench, n: Bench) -> float | None:
    """Welch's t-test from what pytest-benchmark saves of each run (mean, stddev, rounds), or None where a
    run saved no stddev or fewer than two rounds."""
    m1, m2 = b.stats["mean"], n.stats["mean"]
    s1, s2 = b.stats.get("stddev"), n.stats.get("stddev")
    r1, r2 = b.stats.get("rounds", 0), n.stats.get("rounds", 0)
    if s1 is None or s2 is None or r1 < 2 or r2 < 2 or s1 < 0 or s2 < 0:
        return None
    v1, v2 = s1 * s1 / r1, s2 * s2 / r2
    if v1 + v2 == 0:
        return 1.0 if m1 == m2 else 0.0
    t = (m2 - m1) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / ((v1 * v1 / (r1 - 1) if v1 else 0.0) + (v2 * v2 / (r2 - 1) if v2 else 0.0))
    return student_t_p(t, df)


def _relative_iqr(b: Bench, metric: str) -> float:
    iqr, centre = b.stats.get("iqr"), b.stats.get(metric)
    if iqr is None or not centre:
        return 0.0
    return abs(iqr / centre)


def compare_runs(base: Run, new: Run, threshold: float = 0.05, metric: str = "median", alpha: float = ALPHA) -> Comparison:
    common = [name for name in base.benchmarks if name in new.benchmarks]
    if not common:
        raise UnusableInput(f"{base.path} and {new.path} have no benchmark in common")
    # pytest-benchmark's groups kept together, in the order they first appear; the base run's order within.
    order = {g: i for i, g in enumerate(dict.fromkeys(base.benchmarks[x].group for x in common))}
    common.sort(key=lambda x: order[base.benchmarks[x].group])
    rows, figures = [], []
    for name in common:
        b, n = base.benchmarks[name], new.benchmarks[name]
        rows.append(_row(name, b, n, threshold, metric, alpha))
        figures += _figures(name, b, n, threshold)
    items = machine_items(base.machine_info, new.machine_info)
    return Comparison(
        base,
        new,
        metric,
        threshold,
        [(i.what, i.base, i.new) for i in items if i.state not in ("same", "neither")],
        rows,
        figures,
        [x for x in base.benchmarks if x not in new.benchmarks],
        [x for x in new.benchmarks if x not in base.benchmarks],
        tuple(items),
    )


RANK_TEST = "rank test (Mann-Whitney U)"
WELCH = "saved statistics (Welch's t on mean, stddev, rounds)"
NO_SPREAD = "saved statistics without spread (the threshold alone)"


def _row(name: str, b: Bench, n: Bench, threshold: float, metric: str, alpha: float) -> Row:
    before, after = b.stats[metric], n.stats[metric]  # positive and finite (load checks)
    change = after / before - 1
    noise = max(_relative_iqr(b, metric), _relative_iqr(n, metric))
    p: float | None = None
    if b.data and n.data and min(len(b.data), len(n.data)) >= MIN_ROUNDS_FOR_TEST:
        # Significance and direction from the same rounds: the rank test, and the shift that goes with it.
        method = RANK_TEST
        p = mann_whitney_p(b.data, n.data)
        centre = statistics.median(b.data)
        shift = hodges_lehmann(b.data, n.data) / centre if centre > 0 else change
    elif (p := welch_p(b, n)) is not None:
        # Without rounds, what was saved of them: mean, standard deviation and their number.
        method = WELCH
        shift = n.stats["mean"] / b.stats["mean"] - 1
    else:
        method = NO_SPREAD
        shift = change
    differs = p < alpha if p is not None else abs(shift) > threshold
    if not differs:
        # (A shift of exactly 0 that the test calls significant, as ties can give, reads "within threshold"
        # below: beyond noise, not beyond the threshold.)
        verdict = "same (within noise)"
    elif abs(shift) <= threshold:
        # Beyond noise but not beyond the threshold: with hundreds of rounds a 1 % shift is significant.
        verdict = "same (within threshold)"
    else:
        verdict = "slower" if shift > 0 else "faster"
    return Row(name, before, after, change, verdict, method, p, noise, verdict == "slower", shift, b.group, b.short)


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


# --- the machines ---------------------------------------------------------------------------------------


def _dig(mi: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = mi
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _text(value: Any) -> str | None:
    """A recorded value as text; None where nothing was recorded (missing, null, an empty string)."""
    if value is None or isinstance(value, (dict,)):
        return None
    if isinstance(value, (list, tuple)):
        parts = [p for v in value if (p := _text(v)) is not None]
        return ", ".join(parts) if parts else None
    text = str(value).strip()
    return text or None


def _gpus(mi: dict[str, Any]) -> str | None:
    gpus = _dig(mi, ("gpucheck", "gpus"))
    if not isinstance(gpus, list):
        return None
    names = [
        f"{g.get('name')} ({g.get('pci_bus_id') or g.get('uuid') or '?'})" if isinstance(g, dict) else "?" for g in gpus
    ]
    return f"{len(names)}: " + ", ".join(names) if names else "none"


def _implementation(mi: dict[str, Any]) -> str | None:
    name = _text(mi.get("python_implementation"))
    version = _text(mi.get("python_implementation_version"))
    if name is None:
        return None
    # PyPy's own version (7.3.17) beside the Python it implements; CPython's is the Python version.
    return f"{name} {version}" if version and version != _text(mi.get("python_version")) else name


def _host_value(mi: dict[str, Any], what: str, places: tuple[tuple[str, ...], ...]) -> str | None:
    if what == "Python implementation":
        return _implementation(mi)
    for place in places:
        value = _text(_dig(mi, place))
        if value is not None:
            return value
    return None


def machine_items(base: dict[str, Any], new: dict[str, Any]) -> list[MachineItem]:
    """Everything either run recorded of its machine, in the order a person reads it: gpucheck's GPU stack,
    then what pytest-benchmark and py-cpuinfo recorded (whichever of their keys a version wrote), then any
    other key a conftest added."""
    out = [MachineItem(label, _text(_dig(base, ("gpucheck", key))), _text(_dig(new, ("gpucheck", key))))
           for label, key in GPU_STACK]
    out.append(MachineItem("GPUs", _gpus(base), _gpus(new)))
    out += [MachineItem(label, _host_value(base, label, places), _host_value(new, label, places))
            for label, places in HOST_KEYS]
    for key in sorted((set(base) | set(new)) - _KNOWN_TOP):
        if isinstance(key, str):
            out.append(MachineItem(key, _text(base.get(key)), _text(new.get(key))))
    return out


def machine_diff(base: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """What differs between the two machines (label, base, new; None: not recorded by that run)."""
    return [(i.what, i.base, i.new) for i in machine_items(base, new) if i.state not in ("same", "neither")]


# --- output ---------------------------------------------------------------------------------------------

#: Where standard output is no terminal (a pipe, a CI log) and COLUMNS is not set.
DEFAULT_WIDTH = 120
#: The narrowest the benchmark column gets, however narrow the terminal.
MIN_NAME_WIDTH = 24


def terminal_width() -> int:
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def threshold_text(threshold: float) -> str:
    """The threshold as the person gave it: 2.5 -> "2.5%", 0.05 -> "0.05%", 5 -> "5%"."""
    return f"{threshold * 100:.10g}%"


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


def fit(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters: its start and its end (the file and the test's
    parameters), an ellipsis for the middle."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 3
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def _levels(name: str) -> list[str]:
    """``name`` ever shorter: as it is, without the file's folders, without the file (pytest's ``name``)."""
    path, sep, rest = name.partition("::")
    if not sep:
        return [name]
    return list(dict.fromkeys([name, f"{os.path.basename(path)}::{rest}", rest]))


def fit_names(names: list[str], width: int) -> list[str]:
    """The names in at most ``width`` characters each: the shortest spelling that leaves them all tell-apart
    (the file's folders dropped, then the file), then an ellipsis in the middle of those still too long."""
    levels = [_levels(n) for n in names]
    chosen = list(names)
    for depth in (1, 2):
        if max(map(len, chosen), default=0) <= width:
            break
        shorter = [lv[min(depth, len(lv) - 1)] for lv in levels]
        if len(set(shorter)) < len(set(names)):
            break
        chosen = shorter
    fitted = [fit(n, width) for n in chosen]
    if len(set(fitted)) == len(set(names)) or width < 3:
        return fitted
    # Cut where the names differ: the same head and tail lengths for all, the first split that keeps
    # them apart (where there is one).
    for head in range(width - 1):
        tail = width - 1 - head
        cut = [n if len(n) <= width else n[:head] + "…" + n[len(n) - tail :] for n in chosen]
        if len(set(cut)) == len(set(names)):
            return cut
    return fitted


def _table(headers: list[str], rows: list[list[str]], width: int | None = None, fitted: int = 0) -> list[str]:
    """Columns padded to their widest cell. With ``width``, column ``fitted`` (the names) gets what the
    other columns leave of it, no narrower than MIN_NAME_WIDTH."""
    def widths_of(table_rows: list[list[str]]) -> list[int]:
        return [max(len(h), *(len(r[i]) for r in table_rows)) if table_rows else len(h) for i, h in enumerate(headers)]

    widths = widths_of(rows)
    if width is not None and rows and sum(widths) + 2 * (len(widths) - 1) > width:
        others = sum(wd for i, wd in enumerate(widths) if i != fitted) + 2 * (len(widths) - 1)
        names = fit_names([r[fitted] for r in rows], max(MIN_NAME_WIDTH, width - others))
        rows = [[names[k] if i == fitted else cell for i, cell in enumerate(r)] for k, r in enumerate(rows)]
        widths = widths_of(rows)
    line = "  ".join(h.ljust(wd) for h, wd in zip(headers, widths, strict=True))
    out = [line.rstrip(), "  ".join("-" * wd for wd in widths)]
    out += ["  ".join(cell.ljust(wd) for cell, wd in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def _grouped(c: Comparison) -> bool:
    return any(r.group is not None for r in c.rows)


def _wrap(text: str, width: int, indent: str = "", keep: tuple[str, ...] = ()) -> str:
    """``text`` wrapped to ``width``; the phrases in ``keep`` (a method's name) never broken across lines."""
    for phrase in keep:
        text = text.replace(phrase, phrase.replace(" ", "\0"))
    wrapped = textwrap.fill(text, width=max(20, width), subsequent_indent=indent, break_on_hyphens=False,
                            break_long_words=False)
    return wrapped.replace("\0", " ")


def text_report(c: Comparison, out: TextIO, width: int | None = None) -> None:
    width = width or terminal_width()
    w = out.write
    w(_wrap(f"gpucheck compare: {c.base.path} ({c.base.datetime or 'no date'}) -> {c.new.path} "
            f"({c.new.datetime or 'no date'})", width, "  ") + "\n\n")
    for line in machine_lines(c, width):
        w(line + "\n")
    w("\n" + _wrap(
        f"Benchmarks ({c.metric} time, lower is better; noise judged by {_methods(c)}, whose own estimate of the "
        f"change gives the verdict its direction; a slower benchmark beyond {threshold_text(c.threshold)} is a "
        "regression):", width, keep=(RANK_TEST, WELCH, NO_SPREAD)) + "\n")
    headers = ["benchmark", "base", "new", "change", "verdict", "noise"]
    cells = [
        [r.name, _time(r.base), _time(r.new), _pct(r.change), verdict_text(r) + (" REGRESSION" if r.regression else ""),
         _noise_text(r)]
        for r in c.rows
    ]
    lines = _table(headers, cells, width - 2)
    dropped = False
    if max(map(len, lines)) > width - 2 or _cut(lines[2:], cells):
        # Too narrow for the names beside the noise column: the names first, the noise in --json/--markdown.
        lines = _table(headers[:-1], [r[:-1] for r in cells], width - 2)
        dropped = True
    room = len(lines[1].split("  ")[0])  # the names' column, as _table cut it
    apart = len(set(fit_names([r.name for r in c.rows], room))) == len({r.name for r in c.rows})
    stacked = max(map(len, lines)) > width - 2 or not apart
    if stacked:
        # Narrower still: each name on a line of its own, its figures on the next.
        names = fit_names([r.name for r in c.rows], width - 2)
        figures = _table(headers[1:-1], [r[1:-1] for r in cells])
        lines = [headers[0], f"  {figures[0]}\n    {figures[1]}", *(f"{n}\n    {f}" for n, f in zip(names, figures[2:], strict=True))]
    w(f"  {lines[0]}\n  {lines[1]}\n")
    group: object = object()
    grouped = _grouped(c)  # once: asked for every row, it scanned every row (1,000 rows: a million looks)
    for r, line in zip(c.rows, lines[2:], strict=True):
        if grouped and r.group != group:
            group = r.group
            w(f"  {fit('group: ' + (r.group or '(none)'), width - 2)}\n")
        w(f"  {line}\n")
    moved = [f for f in c.figures if f.verdict != "same"]
    if c.figures:
        w(f"\nFigures (extra_info): {len(c.figures) - len(moved)} of {len(c.figures)} within {threshold_text(c.threshold)}")
        w(":\n" if moved else ".\n")
    if moved:
        frows = [
            [f.name, f.figure + ("" if f.higher_is_better else " (lower is better)"), f"{f.base:.4g}", f"{f.new:.4g}",
             _pct(f.change), f.verdict]
            for f in moved
        ]
        for line in _table(["benchmark", "figure", "base", "new", "change", "verdict"], frows, width - 2):
            w(f"  {line}\n")
    for label, names in (("Only in the base run", c.only_base), ("Only in the new run", c.only_new)):
        if names:
            w(f"\n{label} ({len(names)}):\n")
            for name in names:
                w(f"  {fit(name, width - 2)}\n")
    if dropped:
        w("\n" + _wrap("(The noise column is left out at this width: a wider terminal, --markdown or --json "
                       "show it.)", width) + "\n")
    w("\n" + _wrap(summary(c, width), width, "  ") + "\n")


def _cut(lines: list[str], cells: list[list[str]]) -> bool:
    """Whether some name in the table lines had to be shortened (its folders or file dropped, or cut)."""
    return any(not (line + " ").startswith(row[0] + " ") for line, row in zip(lines, cells, strict=True))


def _estimate(r: Row) -> str:
    """The test's own estimate of the change, named: the Hodges-Lehmann shift, the mean's change."""
    if r.shift is None or r.method == NO_SPREAD:
        return _pct(r.change)
    return f"{'shift' if r.method == RANK_TEST else 'mean'} {_pct(r.shift)}"


def verdict_text(r: Row) -> str:
    """The verdict with the change that decided it (the test's estimate, which the threshold is held to):
    ``slower (mean +6.1%)``, ``faster (shift -12.0%)``, ``same (within noise)``."""
    if r.verdict in ("slower", "faster"):
        return f"{r.verdict} ({_estimate(r)})"
    return r.verdict


def _noise_text(r: Row) -> str:
    parts = []
    if r.p_value is not None:
        parts.append("p<1e-300" if r.p_value < 1e-300 else f"p={r.p_value:.2g}")
    if r.method != NO_SPREAD:
        parts.append(f"IQR {r.noise:.1%}")
    return ", ".join(parts) or "no spread saved"


def _shown(value: Any) -> str:
    return "not recorded" if value is None else str(value)


def machine_lines(c: Comparison, width: int) -> list[str]:
    """The machine section: what differs (a value recorded by one run only reads "not recorded"), what is the
    same, and what neither run recorded."""
    items = list(c.machine_items) or [MachineItem(label, a, b) for label, a, b in c.machine]
    differs = [i for i in items if i.state not in ("same", "neither")]
    same = [i.what for i in items if i.state == "same"]
    neither = [i.what for i in items if i.state == "neither"]
    out: list[str] = []
    if differs:
        out.append("What differs between the two machines:")
        label_width = max(len(i.what) for i in differs)
        for i in differs:
            out.append(f"  {i.what:<{label_width}}  {_shown(i.base)} -> {_shown(i.new)}")
        if same:
            out.append(_wrap("The same in both runs: " + ", ".join(same) + ".", width, "  "))
    elif same:
        out.append(_wrap("The two machines are the same in what both runs recorded: " + ", ".join(same) + ".", width, "  "))
    else:
        out.append("Neither run recorded anything of its machine: they may or may not be the same.")
    stack = {label for label, _key in GPU_STACK} | {"GPUs"}
    if stack <= set(neither):
        neither = [x for x in neither if x not in stack]
        out.append(_wrap("Neither run recorded its GPU stack (machine_info['gpucheck']: run the benchmarks with "
                         "--gpucheck).", width, "  "))
    if neither:
        out.append(_wrap("Not recorded by either run: " + ", ".join(neither) + ".", width, "  "))
    return out


def same_machines(c: Comparison) -> str:
    """The machine section in one paragraph (Markdown)."""
    return " ".join(machine_lines(c, 10_000))


def summary(c: Comparison, width: int | None = None) -> str:
    """The closing line. With ``width`` (the terminal's), regressions are named by their short names as far as
    the line fits, then counted; without, by their full names (Markdown)."""
    regs = c.regressions
    faster = sum(r.verdict == "faster" for r in c.rows)
    tail = f"; {faster} faster" if faster else ""
    if not regs:
        return (f"No regression beyond {threshold_text(c.threshold)} ({len(c.rows)} benchmark"
                f"{'s' if len(c.rows) != 1 else ''} compared{tail}).")
    head = f"{len(regs)} regression{'s' if len(regs) != 1 else ''} beyond {threshold_text(c.threshold)}: "
    if width is None:
        names = [f"{r.name} ({_estimate(r)})" for r in regs]
        shown = names[:10]
        rest = len(names) - len(shown)
        return head + ", ".join(shown) + (f" and {rest} more" if rest else "") + f"{tail}."
    shown = []
    for i, r in enumerate(regs):
        entry = f"{fit(r.short or r.name, max(MIN_NAME_WIDTH, width // 2))} ({_estimate(r)})"
        rest = len(regs) - i - 1
        more = f" and {rest} more (in the table)" if rest else ""
        if shown and len(head) + len(", ".join([*shown, entry])) + len(more) + len(tail) + 1 > width:
            break
        shown.append(entry)
    rest = len(regs) - len(shown)
    return head + ", ".join(shown) + (f" and {rest} more (in the table)" if rest else "") + f"{tail}."


def markdown_report(c: Comparison, out: TextIO) -> None:
    w = out.write
    w(f"### gpucheck compare: `{os.path.basename(c.base.path)}` → `{os.path.basename(c.new.path)}`\n\n")
    if c.machine:
        w("| | base | new |\n| --- | --- | --- |\n")
        for label, a, b in c.machine:
            w(f"| {label} | {_md(_shown(a))} | {_md(_shown(b))} |\n")
        w("\n")
        rest = [x for x in machine_lines(c, 10_000) if not x.startswith("  ") and not x.startswith("What differs")]
        if rest:
            w(" ".join(_md(x) for x in rest) + "\n\n")
    else:
        w(_md(same_machines(c)) + "\n\n")
    w("| benchmark | base | new | change | verdict | noise |\n| --- | ---: | ---: | ---: | --- | --- |\n")
    group: object = object()
    grouped = _grouped(c)
    for r in c.rows:
        if grouped and r.group != group:
            group = r.group
            w(f"| **group: {_md(r.group or '(none)')}** | | | | | |\n")
        verdict = f"**{verdict_text(r)}**" if r.regression else verdict_text(r)
        w(f"| `{_md(r.name)}` | {_time(r.base)} | {_time(r.new)} | {_pct(r.change)} | {verdict} | {_md(_noise_text(r))} |\n")
    moved = [f for f in c.figures if f.verdict != "same"]
    if moved:
        w("\n| benchmark | figure | base | new | change | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n")
        for f in moved:
            w(f"| `{_md(f.name)}` | {f.figure} | {f.base:.4g} | {f.new:.4g} | {_pct(f.change)} | {f.verdict} |\n")
    for label, names in (("Only in the base run", c.only_base), ("Only in the new run", c.only_new)):
        if names:
            w(f"\n{label}: " + ", ".join(f"`{_md(x)}`" for x in names) + "\n")
    w(f"\n{c.metric} times; noise judged by {_methods(c)}. {_md(summary(c))}\n")


def _md(x: Any) -> str:
    return str(x if x is not None else "unknown").replace("|", "\\|")


def json_report(c: Comparison) -> dict[str, Any]:
    return {
        "schema": "gpucheck-compare/1",
        "base": {"path": c.base.path, "datetime": c.base.datetime},
        "new": {"path": c.new.path, "datetime": c.new.datetime},
        "metric": c.metric,
        "threshold": c.threshold,
        "threshold_text": threshold_text(c.threshold),
        "machine": [{"what": label, "base": a, "new": b} for label, a, b in c.machine],
        "machine_same": [{"what": i.what, "value": i.base} for i in c.machine_items if i.state == "same"],
        "machine_not_recorded": [i.what for i in c.machine_items if i.state == "neither"],
        "benchmarks": [asdict(r) for r in c.rows],
        "figures": [asdict(f) for f in c.figures],
        "only_base": c.only_base,
        "only_new": c.only_new,
        "regressions": [r.name for r in c.regressions],
        "exit_status": c.exit_status,
    }


# --- the plot -------------------------------------------------------------------------------------------

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
    """Read, compare, and draw the plot if asked (its file written): everything that may fail on the input,
    before anything is printed. Raises :class:`UnusableInput`."""
    fmt = plot_format(opts.plot) if opts.plot is not None else None
    c = compare_runs(load(opts.base, opts.storage), load(opts.new, opts.storage), opts.threshold, opts.metric)
    if opts.plot is not None and fmt is not None:
        _write(opts.plot, plot(c, fmt))
    return c


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
