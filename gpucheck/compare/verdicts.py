"""``gpucheck compare``'s verdicts: per benchmark in both runs, the change of the chosen statistic and whether it
is beyond noise and the threshold (slower, faster, same); the ``extra_info`` figures beside them; the exit
status (DESIGN.md, "Contract: comparing runs")."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from gpucheck.compare.files import Bench, Run, UnusableInput
from gpucheck.compare.machines import MachineItem, machine_items
from gpucheck.compare.stats import hodges_lehmann, mann_whitney_p, welch_p
from gpucheck.jsonfile import number

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


def _number(x: Any) -> bool:
    return number(x) is not None
