"""The statistics ``gpucheck compare``'s verdicts rest on: the Mann-Whitney U rank test and its Hodges-Lehmann
shift over the saved rounds, Welch's t over the saved mean, standard deviation and rounds. Standard library only."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from itertools import repeat
from operator import sub

from gpucheck.compare.files import Bench

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
