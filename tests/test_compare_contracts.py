"""``gpucheck compare``'s verdicts and exit status (``gpucheck/compare/``) as pure functions, in-process, so that
``tox -e mutation`` sees its mutants (docs/mutation.md). Each test states a promise of ../shared/DESIGN.md
("Contract: comparing runs": exit 0 no regression, 1 a regression beyond the threshold; a change within the runs'
own spread is not a regression) or docs/benchmarks.md ("Did it get slower?": faster, slower, same (within noise),
same (within threshold); the rank test where both runs kept their rounds, Welch's t on the saved mean, stddev and
rounds otherwise, the threshold alone without either; the test's own estimate gives the direction; ``extra_info``
figures higher or lower is better).

The statistics are checked against values computed here from formulas with their source (scipy is no dependency):
Student's t distribution's closed forms for 1 to 4 degrees of freedom and its density integrated numerically,
the regularised incomplete beta function's closed forms, the Mann–Whitney U statistic counted pair by pair.
Real pytest-benchmark files are those of ``tests/benchfiles/`` (INDEX.md gives their sources).
"""

from __future__ import annotations

import io
import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.stats import Stats

from gpucheck import compare
from gpucheck.compare import NO_SPREAD, RANK_TEST, WELCH, Bench, Run, stats, verdicts
from tests.test_compare import bench_entry
from tests.test_compare_real import CACHEW_8, CACHEW_9, GAB_NEW, GAB_OLD, PB_1, PB_30

# --- building runs --------------------------------------------------------------------------------------


def rounds_of(rng: random.Random, centre: float, sigma: float, n: int) -> list[float]:
    """Round times around ``centre``, log-normally spread by ``sigma`` (as real rounds are)."""
    return [centre * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def bench(times: list[float] | None = None, /, *, keep_rounds: bool = True, name: str = "t", group: str | None = None,
          extra: dict[str, Any] | None = None, **stats: float) -> Bench:
    """A benchmark as ``compare.load`` reads it: pytest-benchmark's own ``Stats`` of the rounds (median, mean,
    stddev, iqr, rounds ...), the rounds kept or not, ``stats`` given directly where there are no rounds."""
    figures: dict[str, float] = {}
    if times is not None:
        s = Stats()
        for r in times:
            s.update(r)
        figures = {k: float(v) for k, v in s.as_dict().items() if isinstance(v, (int, float))}
    figures.update(stats)
    data = tuple(times) if times is not None and keep_rounds else None
    return Bench(name, figures, data, extra or {}, group, name)


def run(*benches: Bench, label: str = "base", machine: dict[str, Any] | None = None) -> Run:
    return Run(label, f"{label}.json", None, machine or {}, {b.name: b for b in benches})


def row(b: Bench, n: Bench, threshold: float = 0.05, metric: str = "median", alpha: float = compare.ALPHA) -> compare.Row:
    [only] = compare.compare_runs(run(b), run(n, label="new"), threshold, metric, alpha).rows
    return only


def saved(mean: float, stddev: float | None, rounds: float, median: float | None = None, **more: float) -> Bench:
    """What ``--benchmark-save`` keeps without ``--benchmark-save-data``: the statistics, no rounds."""
    stats = {"mean": mean, "median": mean if median is None else median, "min": mean / 2, "max": mean * 2,
             "rounds": rounds, **more}
    if stddev is not None:
        stats["stddev"] = stddev
    return bench(**stats)


# --- independent formulas -------------------------------------------------------------------------------


def t_cdf_closed_form(t: float, df: int) -> float:
    """Student's t CDF for 1 to 4 degrees of freedom in closed form (Wikipedia, "Student's t-distribution",
    the cumulative distribution function's "Special cases")."""
    if df == 1:
        return 0.5 + math.atan(t) / math.pi
    if df == 2:
        return 0.5 + t / (2 * math.sqrt(2 + t * t))
    if df == 3:
        return 0.5 + (t / (math.sqrt(3) * (1 + t * t / 3)) + math.atan(t / math.sqrt(3))) / math.pi
    if df == 4:
        return 0.5 + 3 / 8 * t / math.sqrt(1 + t * t / 4) * (1 - t * t / (12 * (1 + t * t / 4)))
    raise ValueError(df)


def t_two_sided_integrated(t: float, df: float, steps: int = 4000) -> float:
    """1 - 2·∫₀^|t| f(x) dx, f Student's t density Γ((ν+1)/2) / (√(νπ) Γ(ν/2)) (1 + x²/ν)^(-(ν+1)/2),
    by Simpson's rule (error far below 1e-10 for |t| <= 10)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    h = abs(t) / steps
    total = sum((1 if i in (0, steps) else 4 if i % 2 else 2) * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2)
                for i in range(steps + 1))
    return 1 - 2 * c * total * h / 3


def welch_by_hand(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> tuple[float, float]:
    """Welch's t and the Welch–Satterthwaite degrees of freedom (Welch 1947; Wikipedia, "Welch's t-test")."""
    v1, v2 = s1 * s1 / n1, s2 * s2 / n2
    t = (m2 - m1) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    return t, df


def mann_whitney_by_hand(a: list[float], b: list[float]) -> float:
    """The two-sided asymptotic p of the Mann–Whitney U test, the long way (Wikipedia, "Mann–Whitney U test",
    "Normal approximation and tie correction"; continuity correction 0.5 as scipy.stats.mannwhitneyu applies):
    U₁ counts the pairs (x, y) with x > y, and half those with x = y."""
    u1 = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    n1, n2 = len(a), len(b)
    n = n1 + n2
    counts: dict[float, int] = {}
    for v in a + b:
        counts[v] = counts.get(v, 0) + 1
    ties = sum(t**3 - t for t in counts.values())
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


# --- the verdicts and the exit status ---------------------------------------------------------------------


def test_a_slowdown_beyond_noise_and_threshold_is_slower_a_regression_and_exit_1() -> None:
    """DESIGN: exit 1 for a regression beyond the threshold. 100 rounds 10 % slower, spread 2 %: the rank test
    decides (p, and the Hodges–Lehmann shift over the base median for the direction and size)."""
    rng = random.Random(1)
    base, new = rounds_of(rng, 1e-3, 0.02, 100), rounds_of(rng, 1.1e-3, 0.02, 100)
    c = compare.compare_runs(run(bench(base)), run(bench(new), label="new"))
    [r] = c.rows
    assert (r.verdict, r.regression, r.method) == ("slower", True, RANK_TEST)
    assert r.p_value == compare.mann_whitney_p(base, new) and r.p_value < 1e-20
    assert r.shift == compare.hodges_lehmann(base, new) / statistics.median(base)
    assert 0.08 < r.shift < 0.12
    assert (r.base, r.new) == (statistics.median(base), statistics.median(new))
    assert r.change == statistics.median(new) / statistics.median(base) - 1
    assert c.regressions == [r] and c.exit_status == compare.REGRESSION == 1


def test_a_speed_up_beyond_the_threshold_is_faster_and_exit_0() -> None:
    rng = random.Random(2)
    base, new = rounds_of(rng, 1e-3, 0.02, 100), rounds_of(rng, 0.9e-3, 0.02, 100)
    c = compare.compare_runs(run(bench(base)), run(bench(new), label="new"))
    [r] = c.rows
    assert (r.verdict, r.regression) == ("faster", False) and r.shift < -0.05
    assert c.regressions == [] and c.exit_status == compare.NO_REGRESSION == 0


def test_a_significant_change_inside_the_threshold_is_the_same_and_exit_0() -> None:
    """docs/benchmarks.md: "same (within threshold)": a real change, but no larger than --threshold. 400 rounds
    2 % slower with a spread of 0.5 % is significant; at 5 % it is no regression, at 1 % it is."""
    rng = random.Random(3)
    base, new = bench(rounds_of(rng, 1e-3, 0.005, 400)), bench(rounds_of(rng, 1.02e-3, 0.005, 400))
    at_5 = compare.compare_runs(run(base), run(new, label="new"))
    [r] = at_5.rows
    assert r.p_value is not None and r.p_value < 1e-10 and 0.015 < r.shift < 0.025
    assert (r.verdict, r.regression, at_5.exit_status) == ("same (within threshold)", False, 0)
    at_1 = compare.compare_runs(run(base), run(new, label="new"), threshold=0.01)
    assert (at_1.rows[0].verdict, at_1.exit_status, at_1.threshold) == ("slower", 1, 0.01)


def test_a_change_inside_the_noise_is_no_regression_even_beyond_the_threshold() -> None:
    """DESIGN: a change within the runs' own spread is not a regression. Five rounds a side spread by 50 %, the
    new median 30 % above: the rank test cannot tell (p > 0.05), so "same (within noise)", exit 0."""
    base = [1.0, 0.5, 1.6, 0.8, 1.2]
    new = [1.3, 0.6, 2.0, 0.9, 1.5]
    r = row(bench(base), bench(new))
    assert r.change == pytest.approx(0.3) and r.shift > 0.05
    assert r.p_value is not None and r.p_value > 0.05
    assert (r.verdict, r.regression, r.method) == ("same (within noise)", False, RANK_TEST)
    # The same rounds a hundred times over are no longer noise.
    r = row(bench(base * 100), bench(new * 100))
    assert (r.verdict, r.regression) == ("slower", True)


def test_the_threshold_and_alpha_are_bounds_a_change_must_pass() -> None:
    """A shift of exactly the threshold is "within threshold" (no larger than it); a p of exactly alpha is
    within noise (p < alpha is significant); the sign of the shift, not of the change, is the direction."""
    rng = random.Random(4)
    base, new = bench(rounds_of(rng, 1e-3, 0.01, 60)), bench(rounds_of(rng, 1.1e-3, 0.01, 60))
    r = row(base, new)
    assert r.verdict == "slower" and r.shift is not None and r.p_value is not None
    assert row(base, new, threshold=r.shift).verdict == "same (within threshold)"
    assert row(base, new, threshold=math.nextafter(r.shift, 0)).verdict == "slower"
    # Faster by the same: |shift| is held to the threshold.
    f = row(new, base)
    assert f.verdict == "faster" and f.shift is not None and f.shift < 0
    assert row(new, base, threshold=-f.shift).verdict == "same (within threshold)"
    assert row(new, base, threshold=math.nextafter(-f.shift, 0)).verdict == "faster"
    # alpha: p must be below it.
    assert row(base, new, alpha=r.p_value).verdict == "same (within noise)"
    assert row(base, new, alpha=math.nextafter(r.p_value, 1)).verdict == "slower"


def test_the_direction_comes_from_the_test_not_the_metric() -> None:
    """docs/benchmarks.md: ten outlier rounds cannot make a faster benchmark read slower under --metric max.
    The new run is 20 % faster at every percentile up to the 99th; ten of its 1,000 rounds are 50 times longer."""
    rng = random.Random(5)
    base = rounds_of(rng, 1e-3, 0.05, 1000)
    new = rounds_of(rng, 0.8e-3, 0.05, 1000)
    for i in rng.sample(range(1000), 10):
        new[i] *= 50
    for metric in ("max", "mean", "median", "min"):
        r = row(bench(base), bench(new), metric=metric)
        assert (r.verdict, r.regression) == ("faster", False), metric
        assert -0.25 < r.shift < -0.15  # type: ignore[operator]
        assert (r.base, r.new) == (bench(base).stats[metric], bench(new).stats[metric])
    assert row(bench(base), bench(new), metric="max").change > 0  # the metric reports what it saw
    assert row(bench(base), bench(new), metric="mean").change > 0


def test_without_rounds_welchs_t_on_the_saved_statistics_decides_and_the_mean_gives_the_direction() -> None:
    """Without rounds: Welch's t on mean, stddev and rounds; its estimate is the change of the mean (here +20 %,
    while the median fell by 10 %: the row is slower, a regression)."""
    base = saved(1.0, 0.05, 50, median=1.0)
    new = saved(1.2, 0.05, 50, median=0.9)
    r = row(base, new)
    assert (r.method, r.verdict, r.regression) == (WELCH, "slower", True)
    assert r.shift == pytest.approx(0.2) and r.change == pytest.approx(-0.1)
    assert r.p_value == compare.welch_p(base, new) and r.p_value < 1e-20
    # The other way round: faster, by the mean.
    back = row(new, base)
    assert (back.verdict, back.regression) == ("faster", False) and back.shift == pytest.approx(1 / 1.2 - 1)
    # A wide spread over few rounds: within noise.
    assert row(saved(1.0, 0.5, 3), saved(1.2, 0.5, 3)).verdict == "same (within noise)"


def test_the_rank_test_needs_four_rounds_in_each_run() -> None:
    """MIN_ROUNDS_FOR_TEST: with four rounds a side the rank test decides; with three in either, or the rounds
    kept by one run only, the saved statistics do."""
    four = [1.0, 1.1, 0.9, 1.05]
    assert compare.MIN_ROUNDS_FOR_TEST == 4
    assert row(bench(four), bench([x * 2 for x in four])).method == RANK_TEST
    assert row(bench(four[:3]), bench([x * 2 for x in four])).method == WELCH
    assert row(bench(four), bench([x * 2 for x in four[:3]])).method == WELCH
    assert row(bench(four, keep_rounds=False), bench(four)).method == WELCH
    assert row(bench(four), bench(four, keep_rounds=False)).method == WELCH


def test_without_spread_the_change_is_held_to_the_threshold_alone() -> None:
    """A run with neither rounds nor a stddev (or fewer than two rounds): the metric's change against the threshold;
    no p-value. Exactly the threshold is no regression."""
    base = saved(1.0, None, 10)
    r = row(base, saved(1.25, None, 10))
    assert (r.method, r.p_value, r.verdict, r.regression, r.shift) == (NO_SPREAD, None, "slower", True, 0.25)
    assert row(base, saved(1.25, None, 10), threshold=0.25).verdict == "same (within noise)"
    assert row(base, saved(1.25, None, 10), threshold=math.nextafter(0.25, 0)).verdict == "slower"
    assert row(base, saved(0.75, None, 10)).verdict == "faster"
    assert row(base, saved(0.75, None, 10), threshold=0.25).verdict == "same (within noise)"
    assert row(base, saved(1.02, None, 10)).verdict == "same (within noise)"
    # The metric's change (not the mean's) is the estimate here.
    r = row(saved(1.0, None, 10, median=2.0), saved(1.0, None, 10, median=3.0))
    assert (r.shift, r.verdict) == (0.5, "slower")
    # One round, or a stddev that is no spread (negative): no test either.
    assert row(saved(1.0, 0.1, 1), saved(1.5, 0.1, 50)).method == NO_SPREAD
    assert row(saved(1.0, 0.1, 50), saved(1.5, 0.1, 1)).method == NO_SPREAD
    assert row(saved(1.0, -0.1, 50), saved(1.5, 0.1, 50)).method == NO_SPREAD
    assert row(saved(1.0, 0.1, 50), saved(1.5, -0.1, 50)).method == NO_SPREAD
    assert row(saved(1.0, 0.1, 50), saved(1.5, None, 50)).method == NO_SPREAD


def test_the_noise_column_is_the_larger_relative_iqr_of_the_chosen_statistic() -> None:
    base = bench(median=2.0, mean=4.0, min=1.0, max=8.0, iqr=0.5)
    new = bench(median=2.0, mean=4.0, min=1.0, max=8.0, iqr=0.2)
    assert row(base, new).noise == 0.25 and row(new, base).noise == 0.25
    assert row(base, new, metric="mean").noise == 0.125
    assert row(bench(median=2.0, mean=4.0, min=1.0, max=8.0), new).noise == 0.1  # no IQR saved: none
    assert verdicts._relative_iqr(bench(median=2.0, mean=4.0, min=1.0, max=8.0, iqr=-0.5), "median") == 0.25


def test_the_exit_status_is_1_exactly_when_a_row_is_slower() -> None:
    """Several benchmarks: one slower beyond noise and threshold is enough for exit 1, and it alone is named."""
    rng = random.Random(6)
    same_b, same_n = rounds_of(rng, 1e-3, 0.02, 50), rounds_of(rng, 1e-3, 0.02, 50)
    fast_b, fast_n = rounds_of(rng, 2e-3, 0.02, 50), rounds_of(rng, 1e-3, 0.02, 50)
    slow_b, slow_n = rounds_of(rng, 3e-3, 0.02, 50), rounds_of(rng, 6e-3, 0.02, 50)
    base = run(bench(same_b, name="same"), bench(fast_b, name="fast"), bench(slow_b, name="slow"))
    new = run(bench(same_n, name="same"), bench(fast_n, name="fast"), bench(slow_n, name="slow"), label="new")
    c = compare.compare_runs(base, new)
    assert [(r.name, r.verdict) for r in c.rows] == [("same", "same (within noise)"), ("fast", "faster"),
                                                     ("slow", "slower")]
    assert [r.name for r in c.regressions] == ["slow"] and c.exit_status == 1
    without = compare.compare_runs(run(*base.benchmarks.values()), run(*list(new.benchmarks.values())[:2], label="n"))
    assert without.regressions == [] and without.exit_status == 0
    assert (without.only_base, without.only_new) == (["slow"], [])


def test_benchmarks_are_paired_by_name_groups_kept_together_in_the_base_runs_order() -> None:
    x = [1.0, 1.1, 0.9, 1.0]
    base = run(bench(x, name="a", group="g1"), bench(x, name="b", group="g2"), bench(x, name="c", group="g1"),
               bench(x, name="gone"))
    new = run(bench(x, name="c", group="g1"), bench(x, name="b", group="g2"), bench(x, name="a", group="g1"),
              bench(x, name="added"), label="new")
    c = compare.compare_runs(base, new)
    assert [r.name for r in c.rows] == ["a", "c", "b"]
    assert [r.group for r in c.rows] == ["g1", "g1", "g2"]
    assert (c.only_base, c.only_new) == (["gone"], ["added"])
    assert (c.metric, c.threshold) == ("median", 0.05)
    with pytest.raises(compare.UnusableInput, match="have no benchmark in common"):
        compare.compare_runs(run(bench(x, name="a")), run(bench(x, name="b"), label="new"))


def test_the_default_threshold_is_5_percent_and_the_default_metric_the_median() -> None:
    base = saved(1.0, None, 10, median=1.0)
    assert compare.compare_runs(run(base), run(saved(1.0, None, 10, median=1.06), label="n")).exit_status == 1
    assert compare.compare_runs(run(base), run(saved(1.0, None, 10, median=1.04), label="n")).exit_status == 0
    # The mean is not the default: it moved by 60 %.
    assert compare.compare_runs(run(base), run(saved(1.6, None, 10, median=1.04), label="n")).exit_status == 0


def test_figures_higher_or_lower_is_better() -> None:
    """extra_info figures: TFLOP/s, GB/s, samples/s higher is better, latency lower; a change no larger than the
    threshold is the same; a figure one run lacks, or not a number, or a base of zero, is not compared."""
    x = [1.0, 1.1, 0.9, 1.0]
    base = bench(x, extra={"tflops": 100.0, "gbps": 10.0, "latency_us": 50, "samples_per_s": 8.0, "speedup": 0.0,
                           "efficiency": 0.9, "memory_gbps": True, "algbw_gbps": "12", "busbw_gbps": 4.0})
    new = bench(x, extra={"tflops": 110.0, "gbps": 9.0, "latency_us": 60, "samples_per_s": 8.2, "speedup": 1.0,
                          "efficiency": 0.9, "memory_gbps": 3.0, "algbw_gbps": 13.0})
    c = compare.compare_runs(run(base), run(new, label="new"))
    got = {f.figure: (f.verdict, f.higher_is_better) for f in c.figures}
    assert got == {"tflops": ("better", True), "gbps": ("worse", True), "latency_us": ("worse", False),
                   "samples_per_s": ("same", True), "efficiency": ("same", True)}
    assert [f.figure for f in c.figures] == ["tflops", "gbps", "samples_per_s", "efficiency", "latency_us"]
    tflops = c.figures[0]
    assert (tflops.name, tflops.base, tflops.new, tflops.change) == ("t", 100.0, 110.0, pytest.approx(0.1))
    lat = verdicts._figures("t", bench(x, extra={"latency_us": 60}), bench(x, extra={"latency_us": 50}), 0.05)
    assert [(f.verdict, f.change) for f in lat] == [("better", pytest.approx(-1 / 6))]
    # The threshold bounds a figure as it bounds a time: exactly the threshold is the same.
    assert [f.verdict for f in verdicts._figures("t", bench(x, extra={"gbps": 4.0}), bench(x, extra={"gbps": 5.0}),
                                                 0.25)] == ["same"]
    assert [f.verdict for f in verdicts._figures("t", bench(x, extra={"gbps": 4.0}), bench(x, extra={"gbps": 5.0}),
                                                 math.nextafter(0.25, 0))] == ["better"]
    assert [f.verdict for f in verdicts._figures("t", bench(x, extra={"latency_us": 4}),
                                                 bench(x, extra={"latency_us": 3}), 0.25)] == ["same"]
    # Figures never decide the exit status.
    assert c.exit_status == 0
    # Each benchmark's figures, in the order of the rows.
    two = compare.compare_runs(run(bench(x, name="a", extra={"tflops": 1.0}), bench(x, name="b", extra={"gbps": 1.0})),
                               run(bench(x, name="a", extra={"tflops": 2.0}), bench(x, name="b", extra={"gbps": 0.5}),
                                   label="new"))
    assert [(f.name, f.figure, f.verdict) for f in two.figures] == [("a", "tflops", "better"), ("b", "gbps", "worse")]


def test_the_machine_section_lists_what_differs_or_one_run_alone_recorded() -> None:
    """DESIGN: first what differs between the two machine_infos (driver 550.54.15 -> 560.35.03 ...); what only one
    run recorded reads "not recorded", never "the same"; what is the same, or recorded by neither, is not listed
    (but kept among all the items)."""
    x = [1.0, 1.1, 0.9, 1.0]
    base_mi = {"gpucheck": {"driver": "550.54.15", "tensorflow": "2.21.0"}, "python_version": "3.12.3",
               "cpu": {"brand_raw": "AMD EPYC 9454"}}
    new_mi = {"gpucheck": {"driver": "560.35.03", "tensorflow": "2.21.0"}, "python_version": "3.12.3",
              "runner": "ci-7"}
    c = compare.compare_runs(run(bench(x), machine=base_mi), run(bench(x), label="new", machine=new_mi))
    assert c.machine == [("driver", "550.54.15", "560.35.03"), ("CPU", "AMD EPYC 9454", None), ("runner", None, "ci-7")]
    states = {i.what: i.state for i in c.machine_items}
    assert (states["TensorFlow"], states["Python"], states["cuDNN (loaded)"]) == ("same", "same", "neither")
    assert len(c.machine_items) == len(compare.machine_items(base_mi, new_mi)) > len(c.machine)


def test_rounds_mostly_zero_beside_a_positive_median_do_not_break_the_verdict() -> None:
    """A file whose kept rounds are mostly 0.0 (a coarse timer) while its saved median is positive: the shift cannot
    be taken relative to a median of nothing, so the metric's change stands in (no ZeroDivisionError: exit 2 is for
    unusable input, and this input is read)."""
    base = bench(median=1e-3, mean=1e-3, min=1e-3, max=2e-3)
    base = Bench("t", base.stats, (0.0, 0.0, 0.0, 1e-3, 0.0), {}, None, "t")
    new = bench([2e-3, 2.1e-3, 1.9e-3, 2e-3, 2.05e-3])
    r = row(base, new)
    assert r.method == RANK_TEST and r.shift == r.change == new.stats["median"] / 1e-3 - 1
    assert (r.verdict, r.regression) == ("slower", True)


# --- the statistics against their formulas ----------------------------------------------------------------


@pytest.mark.parametrize("df", [1, 2, 3, 4])
def test_student_t_against_its_closed_forms(df: int) -> None:
    for t in (0.1, 0.5, 1.0, 1.7, 2.5, 4.0, 9.0, 30.0):
        want = 2 * (1 - t_cdf_closed_form(t, df))
        assert compare.student_t_p(t, df) == pytest.approx(want, rel=1e-9, abs=1e-14), t
        assert compare.student_t_p(-t, df) == compare.student_t_p(t, df)


def test_student_t_against_its_density_integrated() -> None:
    """Non-integer degrees of freedom (Welch's are): the density integrated by Simpson's rule."""
    for df in (1.5, 2.7, 7.3, 19.9, 58.6, 250.0):
        for t in (0.3, 1.2, 2.1, 3.4, 5.0):
            assert compare.student_t_p(t, df) == pytest.approx(t_two_sided_integrated(t, df), rel=1e-7, abs=1e-12)
    assert compare.student_t_p(1.959963984540054, 1e9) == pytest.approx(0.05, rel=1e-6)  # the normal limit
    assert compare.student_t_p(0.0, 5) == 1.0 and compare.student_t_p(math.nan, 5) == 1.0
    assert compare.student_t_p(math.inf, 5) == 0.0 == compare.student_t_p(-math.inf, 5)


def test_the_incomplete_beta_function_against_its_closed_forms() -> None:
    """From its definition I_x(a, b) = ∫₀^x t^(a-1) (1-t)^(b-1) dt / B(a, b) (DLMF §8.17), integrated by hand:
    I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b; the symmetry I_x(a, b) = 1 - I_{1-x}(b, a), so I_½(a, a) = ½;
    I_0 = 0 and I_1 = 1."""
    for x in (0.01, 0.2, 0.5, 0.77, 0.99):
        for a in (0.5, 1.0, 2.5, 7.0, 40.0):
            assert stats._betainc(a, 1.0, x) == pytest.approx(x**a, rel=1e-10, abs=1e-300)
            assert stats._betainc(1.0, a, x) == pytest.approx(1 - (1 - x) ** a, rel=1e-10, abs=1e-300)
            assert stats._betainc(a, 3.0, x) == pytest.approx(1 - stats._betainc(3.0, a, 1 - x), rel=1e-9, abs=1e-12)
    for a in (0.5, 3.0, 12.5, 100.0):
        assert stats._betainc(a, a, 0.5) == pytest.approx(0.5, rel=1e-12)
    # I_x(1/2, 1/2) = (2/π) arcsin(√x): the arcsine distribution's CDF (Wikipedia, "Arcsine distribution").
    for x in (0.1, 0.4, 0.9):
        assert stats._betainc(0.5, 0.5, x) == pytest.approx(2 / math.pi * math.asin(math.sqrt(x)), rel=1e-10)
    assert stats._betainc(2.0, 3.0, 0.0) == 0.0 and stats._betainc(2.0, 3.0, -1.0) == 0.0
    assert stats._betainc(2.0, 3.0, 1.0) == 1.0 and stats._betainc(2.0, 3.0, 2.0) == 1.0


def test_welchs_t_against_its_formula() -> None:
    """Welch's t and Welch–Satterthwaite's degrees of freedom from mean, stddev and rounds: equal spreads and
    rounds give whole degrees of freedom (2(n - 1)), checked against the closed forms; unequal ones against the
    density integrated."""
    # n = 2 a side: df = 2; n = 3: df = 4.
    for n, df in ((2, 2), (3, 4)):
        b, new = saved(1.0, 0.2, n), saved(1.3, 0.2, n)
        t, got_df = welch_by_hand(1.0, 0.2, n, 1.3, 0.2, n)
        assert got_df == pytest.approx(df)
        assert compare.welch_p(b, new) == pytest.approx(2 * (1 - t_cdf_closed_form(abs(t), df)), rel=1e-9)
    for (m1, s1, n1), (m2, s2, n2) in (((1.0, 0.1, 10), (1.1, 0.3, 7)), ((5.0, 2.0, 50), (4.2, 0.5, 12)),
                                         ((2e-3, 1e-4, 200), (2.02e-3, 3e-4, 30))):
        t, df = welch_by_hand(m1, s1, n1, m2, s2, n2)
        want = t_two_sided_integrated(t, df)
        assert 1e-4 < want < 0.9
        assert compare.welch_p(saved(m1, s1, n1), saved(m2, s2, n2)) == pytest.approx(want, rel=1e-7)
        assert compare.welch_p(saved(m2, s2, n2), saved(m1, s1, n1)) == pytest.approx(want, rel=1e-7)
    # One run without spread: the other's alone, df = its rounds - 1.
    t = (1.3 - 1.0) / math.sqrt(0.2**2 / 5)
    assert compare.welch_p(saved(1.0, 0.0, 9), saved(1.3, 0.2, 5)) == pytest.approx(
        2 * (1 - t_cdf_closed_form(t, 4)), rel=1e-9)
    assert compare.welch_p(saved(1.3, 0.2, 5), saved(1.0, 0.0, 9)) == pytest.approx(
        2 * (1 - t_cdf_closed_form(t, 4)), rel=1e-9)
    # Neither has spread: the means are equal or they are not.
    assert compare.welch_p(saved(1.0, 0.0, 5), saved(1.0, 0.0, 5)) == 1.0
    assert compare.welch_p(saved(1.0, 0.0, 5), saved(1.1, 0.0, 5)) == 0.0
    # Not a test: no stddev, fewer than two rounds (or none recorded), a negative stddev.
    assert compare.welch_p(saved(1.0, None, 5), saved(1.1, 0.1, 5)) is None
    assert compare.welch_p(saved(1.0, 0.1, 5), saved(1.1, None, 5)) is None
    no_rounds = bench(mean=1.0, median=1.0, min=0.5, max=2.0, stddev=0.1)
    assert compare.welch_p(no_rounds, saved(1.1, 0.1, 5)) is None
    assert compare.welch_p(saved(1.1, 0.1, 5), no_rounds) is None
    assert compare.welch_p(saved(1.0, 0.1, 2), saved(1.1, 0.1, 2)) is not None


def test_mann_whitney_against_u_counted_pair_by_pair() -> None:
    """U counted over every pair, ties as halves, and the tie-corrected normal approximation: on random and
    tie-heavy samples, either order (the two-sided p is symmetric)."""
    rng = random.Random(8)
    for _ in range(30):
        n1, n2 = rng.randint(2, 40), rng.randint(2, 40)
        if rng.random() < 0.5:
            a = [float(rng.randint(0, 6)) for _ in range(n1)]
            b = [float(rng.randint(1, 7)) for _ in range(n2)]
        else:
            a = [rng.gauss(0, 1) for _ in range(n1)]
            b = [rng.gauss(0.6, 1) for _ in range(n2)]
        want = mann_whitney_by_hand(a, b)
        assert compare.mann_whitney_p(a, b) == pytest.approx(want, rel=1e-12), (a, b)
        assert compare.mann_whitney_p(b, a) == pytest.approx(want, rel=1e-12)
    # The smallest samples (one round against two, three): still the formula, not "no information".
    for a, b in (([1.0], [2.0, 3.0]), ([5.0], [1.0, 2.0, 3.0]), ([1.0, 1.0], [1.0, 2.0])):
        assert compare.mann_whitney_p(a, b) == pytest.approx(mann_whitney_by_hand(a, b), rel=1e-12), (a, b)
        assert compare.mann_whitney_p(a, b) < 1.0
    assert compare.mann_whitney_p([2.0], [1.0, 3.0]) == 1.0  # U at its mean
    assert compare.mann_whitney_p([1.0] * 6, [1.0] * 4) == 1.0  # every value tied: no information
    assert compare.mann_whitney_p([], [1.0, 2.0]) == 1.0 == compare.mann_whitney_p([1.0, 2.0], [])
    assert compare.mann_whitney_p([], [1.0]) == 1.0 == compare.mann_whitney_p([1.0], [])
    # Completely separated samples: the smallest p this size allows.
    assert compare.mann_whitney_p([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]) == pytest.approx(
        mann_whitney_by_hand([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]), rel=1e-12)


def test_long_samples_are_thinned_to_the_same_distribution() -> None:
    """Beyond MAX_TEST_ROUNDS (MAX_SHIFT_ROUNDS for the shift) a sample is thinned evenly over its sorted rounds:
    a sample listed twice thins to itself, so the p-value (and the shift) of the doubled samples are the
    originals'; unthinned, doubling every round would shrink p."""
    rng = random.Random(9)
    a = [rng.gauss(10, 1) for _ in range(compare.MAX_TEST_ROUNDS)]
    b = [rng.gauss(10.05, 1) for _ in range(compare.MAX_TEST_ROUNDS)]
    p = compare.mann_whitney_p(a, b)
    assert 1e-4 < p < 0.9
    assert compare.mann_whitney_p(a + a, b + b) == p
    assert compare.mann_whitney_p(a + a, b) == p
    assert compare.mann_whitney_p(a[:1500] * 2, b[:1500]) != compare.mann_whitney_p(a[:1500], b[:1500])
    xs, ys = a[: compare.MAX_SHIFT_ROUNDS], b[: compare.MAX_SHIFT_ROUNDS]
    assert compare.hodges_lehmann(xs + xs, ys + ys) == compare.hodges_lehmann(xs, ys)
    assert stats._thin([3.0, 1.0, 2.0]) == [1.0, 2.0, 3.0]
    assert stats._thin([float(i) for i in range(10)], 4) == [0.0, 2.0, 5.0, 7.0]


# --- real files ------------------------------------------------------------------------------------------


def test_real_runs_regression_and_exit_status_in_process(tmp_path: Path) -> None:
    """github-action-benchmark's two pytest outputs (INDEX.md): both benchmarks slower by Welch's t (the first
    file's rounds are cut to four and a string, so not kept), exit 1 from ``compare.run``; pytest-benchmark's own
    storage runs 0001 and 0030, the same benchmark twice: within noise, exit 0."""
    old, new = compare.load(str(GAB_OLD)), compare.load(str(GAB_NEW))
    assert old.benchmarks["bench.py::test_fib_10"].data is None
    c = compare.compare_runs(old, new)
    assert [(r.name, r.verdict, r.method) for r in c.rows] == [("bench.py::test_fib_10", "slower", WELCH),
                                                                ("bench.py::test_fib_20", "slower", WELCH)]
    fib_20 = c.rows[1]
    b, n = old.benchmarks["bench.py::test_fib_20"].stats, new.benchmarks["bench.py::test_fib_20"].stats
    assert fib_20.shift == n["mean"] / b["mean"] - 1
    assert fib_20.change == n["median"] / b["median"] - 1
    out = io.StringIO()
    assert compare.run(compare.Options(str(GAB_OLD), str(GAB_NEW)), out) == 1 == c.exit_status
    assert out.getvalue().rstrip().splitlines()[-1].startswith("2 regressions beyond 5%: test_fib_10")
    assert compare.run(compare.Options(str(PB_1), str(PB_30)), io.StringIO()) == 0
    [same] = compare.compare_runs(compare.load(str(PB_1)), compare.load(str(PB_30))).rows
    assert same.verdict == "same (within noise)" and same.p_value is not None and same.p_value > 0.05
    # Written as pytest-benchmark writes --benchmark-json: a run against a copy slowed by half exits 1.
    rng = random.Random(10)
    rounds = rounds_of(rng, 1e-3, 0.03, 30)
    for name, scale in (("base.json", 1.0), ("new.json", 1.5)):
        (tmp_path / name).write_text(json.dumps({"machine_info": {}, "benchmarks": [
            bench_entry("test_a", [r * scale for r in rounds]), bench_entry("test_b", rounds)]}))
    assert compare.run(compare.Options(str(tmp_path / "base.json"), str(tmp_path / "new.json")), io.StringIO()) == 1
    assert compare.run(compare.Options(str(tmp_path / "new.json"), str(tmp_path / "base.json")), io.StringIO()) == 0


def test_cachews_real_runs_verdict_by_verdict() -> None:
    """cachew's runs 0008 and 0009 (208 benchmarks, 50 rounds each, no rounds kept): every verdict follows the
    rule, its p-value is Welch's t computed here, and some of each verdict occur; a speed-up commit that left
    nine benchmarks slower exits 1."""
    old, new = compare.load(str(CACHEW_8)), compare.load(str(CACHEW_9))
    c = compare.compare_runs(old, new)
    seen = set()
    checked = 0
    for r in c.rows:
        b, n = old.benchmarks[r.name].stats, new.benchmarks[r.name].stats
        assert r.method == WELCH and r.shift == n["mean"] / b["mean"] - 1
        t, df = welch_by_hand(b["mean"], b["stddev"], int(b["rounds"]), n["mean"], n["stddev"], int(n["rounds"]))
        if 0.001 < (p := r.p_value or 0) < 0.9 and abs(t) < 8 and checked < 12:
            assert p == pytest.approx(t_two_sided_integrated(t, df), rel=1e-7)
            checked += 1
        want = ("same (within noise)" if not p < 0.05 else "same (within threshold)" if abs(r.shift) <= 0.05
                else "slower" if r.shift > 0 else "faster")
        assert r.verdict == want and r.regression == (want == "slower")
        seen.add(r.verdict)
    assert checked == 12
    assert seen == {"same (within noise)", "same (within threshold)", "slower", "faster"}
    assert len(c.regressions) == 9 and c.exit_status == 1


def test_a_real_run_against_itself_is_within_noise_by_the_rank_test() -> None:
    """github-action-benchmark's ``test_sleep_2`` kept its five rounds: the rank test, p = 1, shift exactly 0."""
    run_ = compare.load(str(GAB_NEW))
    c = compare.compare_runs(run_, run_)
    rows = {r.name: r for r in c.rows}
    sleep = rows["bench.py::test_sleep_2"]
    assert (sleep.method, sleep.verdict, sleep.shift, sleep.p_value) == (RANK_TEST, "same (within noise)", 0.0, 1.0)
    assert c.exit_status == 0 and all(r.verdict == "same (within noise)" for r in c.rows)


def test_the_shift_of_small_samples_of_any_scale() -> None:
    """The Hodges–Lehmann shift of a few rounds, worked by hand: the median of every new - base difference, for
    samples whose largest values add up to 1, 2, a half or nothing (the search takes its scale from them)."""
    assert compare.hodges_lehmann([0.25, 0.5], [0.5]) == 0.125  # differences 0.25, 0: their mean
    assert compare.hodges_lehmann([0.5], [0.5, 0.25, 0.0]) == -0.25  # 0, -0.25, -0.5
    assert compare.hodges_lehmann([1.0, 0.5], [1.0]) == 0.25  # 0, 0.5
    assert compare.hodges_lehmann([0.125], [0.375, 0.25]) == 0.1875  # 0.25, 0.125
    assert compare.hodges_lehmann([0.0, 0.0], [0.0]) == 0.0
    assert compare.hodges_lehmann([0.5, 0.5, 0.5], [0.5, 1.5, 0.5]) == 0.0  # 0 six times, 1 three times


def test_the_listing_step_counts_a_tied_base_run_as_runs() -> None:
    """The second step of the shift (``_ranked_differences_within``) given a range that holds the middle ranks,
    where the base run's rounds are tied (a coarse timer: twenty rounds of 1.0 ms and a few others), so that a
    row's window is one value many times, counted rather than listed: still the sorted differences' middle."""
    xs = sorted([1.0] * 20 + [1.5, 3.0])
    ys = sorted([2.0, 2.5, 2.5, 4.0, 7.0, 1.25, 3.0])
    every = sorted(y - x for y in ys for x in xs)
    total = len(every)
    for ranks in ((total // 2 + 1,), (total // 2, total // 2 + 1), (1,), (total,), (3, 140)):
        want = [every[r - 1] for r in ranks]
        for lo, hi in ((-100.0, 100.0), (every[0] - 1, every[-1]), (every[ranks[0] - 1] - 0.01, every[-1] + 0.01),
                       (-6.0, 7.0)):
            assert stats._ranked_differences_within(xs, ys, lo, hi, ranks, 1e-12) == want, (ranks, lo, hi)
    # Only ties: every difference one value.
    assert stats._ranked_differences_within([1.0] * 30, [2.0] * 30, -10.0, 10.0, (450, 451), 1e-12) == [1.0, 1.0]


TIED_BASES = (sorted([1.0] * 20 + [1.5, 3.0]), sorted([0.1, 0.2] + [1.0] * 20 + [1.5]))
NEWS = (sorted([2.0, 2.5, 2.5, 4.0, 7.0, 1.25, 3.0]), [1.05, 2.0, 2.0, 2.6])


@pytest.mark.parametrize(("xs", "ys", "lo", "hi", "ranks", "margin"), [
    # ranges that hold the ranks, and ranges that do not (the step must see it and list every difference)
    (TIED_BASES[0], NEWS[0], 1.35, 1.85, (77, 78), 0.3),
    (TIED_BASES[0], NEWS[0], 0.45, 0.95, (1,), 0.1),
    (TIED_BASES[0], NEWS[0], -0.2, 2.0, (51, 102), 1e-12),
    (TIED_BASES[0], NEWS[0], -0.2, 1.5, (77, 78), 1e-12),
    (TIED_BASES[1], NEWS[0], -1.25, 0.25, (1,), 0.0),
    (TIED_BASES[1], NEWS[0], 5.55, 6.0, (161,), 0.0),
    (TIED_BASES[1], NEWS[0], 1.15, 1.65, (53, 107), 0.1),
    (TIED_BASES[1], NEWS[1], 1.15, 1.55, (92,), 0.1),
])
def test_the_listing_step_with_a_tied_base_run_and_any_range(xs: list[float], ys: list[float], lo: float, hi: float,
                                                             ranks: tuple[int, ...], margin: float) -> None:
    """As tests/test_compare_shift.py's ``test_the_listing_step_checks_its_range`` (any range at all, the wrong one
    or a margin of nothing: the ranked differences, or every difference listed), with the base run tied, which its
    random samples are not: a row's window of one value is counted as a run, and a run may fall below the range."""
    every = sorted(y - x for y in ys for x in xs)
    assert stats._ranked_differences_within(xs, ys, lo, hi, ranks, margin) == [every[r - 1] for r in ranks]
    # The neighbouring ranges and margins too.
    total = len(every)
    for r in ((total // 2, total // 2 + 1), (total // 3, 2 * total // 3), (1,), (total,)):
        for m in (0.0, margin, 2 * margin):
            for a, b in ((lo, hi), (lo - 0.05, hi), (lo, hi + 0.05), (lo + 0.05, hi - 0.05)):
                assert stats._ranked_differences_within(xs, ys, a, b, r, m) == [every[i - 1] for i in r]
