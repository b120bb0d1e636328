"""The Hodges–Lehmann shift of ``gpucheck compare`` against its definition, computed the long way:
``statistics.median`` of every difference ``new - base`` (each sample thinned to MAX_SHIFT_ROUNDS first),
bit for bit, on random, tie-heavy, odd and even inputs, and on the search's own steps taken out of order.

The fast path (more than LIST_ALL_PAIRS pairs) narrows the values by counting and then lists a few pairs;
the inputs below are drawn both sides of that bound, with either sample the longer one.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucheck import compare
from gpucheck.compare import stats, verdicts

BENCHFILES = Path(__file__).parent / "benchfiles"
SHIFT = settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def every_difference_median(a: list[float], b: list[float]) -> float:
    """The definition: the median of all n·m differences b[j] - a[i] (of the thinned samples)."""
    xs, ys = stats._thin(a, compare.MAX_SHIFT_ROUNDS), stats._thin(b, compare.MAX_SHIFT_ROUNDS)
    if not xs or not ys:
        return 0.0
    return statistics.median([y - x for x in xs for y in ys])


def same(got: float, want: float) -> bool:
    """Bit for bit, except that a zero comes out as +0.0 whichever sign the definition's zero had."""
    return got == want and (got != 0 or math.copysign(1, got) == 1)


# Round times: positive, of any scale, a sample spread around one value (as a benchmark's rounds are).
TIMES = st.floats(min_value=1e-9, max_value=10.0, allow_nan=False, allow_infinity=False)


@st.composite
def samples(draw: st.DrawFn, ties: bool) -> list[float]:
    size = draw(st.integers(1, 90))
    if ties:  # a coarse timer: a few distinct values, each many times
        quantum = draw(TIMES)
        return [quantum * draw(st.integers(0, 6)) for _ in range(size)]
    centre, spread = draw(TIMES), draw(st.sampled_from([1e-6, 1e-3, 0.05, 0.5, 3.0]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    return [centre * math.exp(rng.gauss(0, spread)) for _ in range(size)]


@SHIFT
@given(samples(ties=False), samples(ties=False))
def test_the_shift_is_the_median_of_every_difference(a: list[float], b: list[float]) -> None:
    assert same(compare.hodges_lehmann(a, b), every_difference_median(a, b))


@SHIFT
@given(samples(ties=True), samples(ties=True))
def test_the_shift_is_the_median_of_every_difference_with_ties(a: list[float], b: list[float]) -> None:
    assert same(compare.hodges_lehmann(a, b), every_difference_median(a, b))


@SHIFT
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=70),
       st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=70))
def test_any_finite_values(a: list[float], b: list[float]) -> None:
    """Negative, zero, far apart in scale: still the definition."""
    assert same(compare.hodges_lehmann(a, b), every_difference_median(a, b))


def test_even_and_odd_counts_and_thinned_samples() -> None:
    """Odd n·m: the middle difference; even: the mean of the two middle ones (statistics.median's
    convention); past MAX_SHIFT_ROUNDS, the thinned samples' median."""
    assert compare.hodges_lehmann([1.0, 2.0, 3.0], [4.0, 6.0, 8.0]) == 4.0  # 1 2 3 3 [4] 5 5 6 7
    assert compare.hodges_lehmann([1.0, 2.0], [4.0, 7.0]) == 4.0  # 2 [3 5] 6: the mean of the middle two
    rng = random.Random(7)
    for n, m in ((33, 34), (34, 34), (35, 33), (101, 100), (100, 101), (3, 700), (501, 499), (1200, 40)):
        a = [1e-3 * math.exp(rng.gauss(0, 0.1)) for _ in range(n)]
        b = [1.02e-3 * math.exp(rng.gauss(0, 0.1)) for _ in range(m)]
        assert same(compare.hodges_lehmann(a, b), every_difference_median(a, b)), (n, m)
    assert compare.hodges_lehmann([], [1.0]) == 0.0 == compare.hodges_lehmann([1.0], [])


@SHIFT
@given(samples(ties=False), samples(ties=True), st.floats(-2.0, 2.0), st.floats(0.0, 2.0),
       st.sampled_from([0.0, 1e-300, 1e-12, 1e-3]))
def test_the_listing_step_checks_its_range(a: list[float], b: list[float], lo: float, width: float,
                                           margin: float) -> None:
    """The second step given any range of values at all, the wrong one or a margin of nothing: it lists,
    checks the counts against the ranks, and where they do not hold them lists every difference."""
    xs, ys = sorted(a), sorted(b)
    every = sorted(y - x for y in ys for x in xs)
    total = len(every)
    ranks = (total // 2 + 1,) if total % 2 else (total // 2, total // 2 + 1)
    scale = max(map(abs, xs + ys))
    got = stats._ranked_differences_within(xs, ys, lo * scale, (lo + width) * scale, ranks, margin * scale)
    assert got == [every[r - 1] for r in ranks]


def test_a_run_against_itself_shifts_by_exactly_nothing() -> None:
    """The real file from github-action-benchmark (INDEX.md) whose ``test_sleep_2`` saved its five rounds:
    against itself the rank test's shift is 0.0 (the bisection this replaced gave -1.1e-16)."""
    run = compare.load(str(BENCHFILES / "github-action-benchmark_pytest_several_units.json"))
    rows = [r for r in compare.compare_runs(run, run).rows if r.method == compare.RANK_TEST]
    assert [r.name for r in rows] == ["bench.py::test_sleep_2"]
    assert rows[0].shift == 0.0 and rows[0].verdict == "same (within noise)"
    rounds = list(run.benchmarks["bench.py::test_sleep_2"].data or ())
    assert same(compare.hodges_lehmann(rounds, rounds[1:]), every_difference_median(rounds, rounds[1:]))


def test_a_significant_zero_shift_reads_within_threshold(tmp_path: Path) -> None:
    """A coarse timer: rounds of 1.0 or 1.1 ms, the new run's 1.1 ms rounds more often. The rank test
    calls it significant; the median of the differences is exactly 0: beyond noise, not beyond the
    threshold (as the compare output read before this estimate was exact)."""
    base = [1e-3] * 150 + [1.1e-3] * 50
    new = [1e-3] * 110 + [1.1e-3] * 90
    assert compare.hodges_lehmann(base, new) == 0.0 and compare.mann_whitney_p(base, new) < compare.ALPHA
    row = verdicts._row("t", _bench(base), _bench(new), 0.05, "median", compare.ALPHA)
    assert (row.shift, row.verdict, row.regression) == (0.0, "same (within threshold)", False)
    assert json.dumps(row.shift) == "0.0"


def _bench(rounds: list[float]) -> compare.Bench:
    return compare.Bench("t", {"median": statistics.median(rounds), "mean": statistics.fmean(rounds)},
                         tuple(rounds), {})
