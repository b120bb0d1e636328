"""Issue 14: ``gpucheck compare BASE NEW`` through its command line.

The runs compared are pytest-benchmark's own format: one made by pytest-benchmark itself from a small
suite (``real_run``), and runs whose rounds are drawn at random (``synthetic_run``), their statistics
computed by pytest-benchmark's own ``Stats`` class. Random rounds stand for "ordinary noise": on this
shared 2-core machine two real runs of identical work drift apart by 10–40 % between processes
(measured: ../shared/PITFALLS.md), which no noise test could tell from a change.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import statistics
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.stats import Stats

from gpucheck import compare

MACHINE: dict[str, Any] = {
    "node": "gpu-node-7",
    "python_version": "3.12.3",
    "cpu": {"brand_raw": "AMD EPYC 9454 48-Core Processor", "count": 96},
    "gpucheck": {
        "driver": "550.54.15",
        "cuda_driver": "12.4",
        "cuda_build": "12.5.1",
        "cuda_loaded": "12.5.82",
        "cudnn_build": "9",
        "cudnn_loaded": "9.3.0",
        "tensorflow": "2.21.0",
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-4da1", "pci_bus_id": "00000000:00:06.0",
                  "compute_capability": "9.0", "memory_total": 85520809984}],
    },
}


def bench_entry(name: str, rounds: list[float], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    stats = Stats()
    for r in rounds:
        stats.update(r)
    return {
        "group": None, "name": name, "fullname": f"test_x.py::{name}", "params": None, "param": None,
        "extra_info": extra or {}, "options": {"timer": "perf_counter"}, "stats": {**stats.as_dict(), "data": rounds},
    }


def write_run(path: Path, benches: list[dict[str, Any]], machine: dict[str, Any] | None = None) -> Path:
    path.write_text(json.dumps({
        "machine_info": machine or MACHINE, "commit_info": {"id": "abc"}, "benchmarks": benches,
        "datetime": "2026-11-24T01:00:00+00:00", "version": "5.3.1",
    }))
    return path


def synthetic_run(path: Path, rng: random.Random, times: dict[str, float], shift: float = 0.0,
                  sigma: float = 0.05, rounds: int = 100) -> Path:
    """Rounds of each benchmark drawn around its time (log-normal, ``sigma``), a few slow outliers, and the
    whole run shifted by ``shift`` (the drift between two runs)."""
    benches = []
    for name, t in times.items():
        data = [t * (1 + shift) * math.exp(rng.gauss(0, sigma)) for _ in range(rounds)]
        for i in rng.sample(range(rounds), 2):
            data[i] *= 1.5  # the odd slow round: an interrupt, a page fault
        benches.append(bench_entry(name, data, {"tflops": 100 / t / 1e3}))
    return write_run(path, benches)


TIMES = {f"test_b{i}": 10 ** rng_exp for i, rng_exp in enumerate([-5, -4.5, -4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5, -4.2, -2.2])}


def gpucheck_compare(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucheck.cli", "compare", *map(str, args)],
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )


@pytest.mark.parametrize("trial", range(12))
def test_identical_work_with_ordinary_noise_is_no_regression(tmp_path: Path, trial: int) -> None:
    rng = random.Random(trial)
    # Ordinary noise: rounds spread by 5 % (an IQR of about 7 %, as this machine's own runs show), a slow
    # outlier or two, and two runs that drift apart by up to 2 %.
    base = synthetic_run(tmp_path / "base.json", rng, TIMES, shift=rng.uniform(-0.01, 0.01))
    new = synthetic_run(tmp_path / "new.json", rng, TIMES, shift=rng.uniform(-0.01, 0.01))
    done = gpucheck_compare(base, new)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No regression beyond 5%" in done.stdout
    assert "rank test (Mann-Whitney U)" in done.stdout


@pytest.mark.parametrize("trial", range(6))
def test_a_benchmark_slowed_twofold_is_named_alone(tmp_path: Path, trial: int) -> None:
    rng = random.Random(100 + trial)
    slowed = sorted(TIMES)[trial]
    base = synthetic_run(tmp_path / "base.json", rng, TIMES)
    new = synthetic_run(tmp_path / "new.json", rng, {k: v * (2 if k == slowed else 1) for k, v in TIMES.items()})
    done = gpucheck_compare(base, new, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["regressions"] == [f"test_x.py::{slowed}"]
    [row] = [r for r in report["benchmarks"] if r["verdict"] == "slower"]
    assert row["name"] == f"test_x.py::{slowed}" and 0.8 < row["change"] < 1.25
    # Its derived figure (TFLOP/s, higher is better) is named worse.
    assert [(f["name"], f["verdict"]) for f in report["figures"] if f["verdict"] != "same"] == [
        (f"test_x.py::{slowed}", "worse")
    ]


def real_run(tmp_path: Path, name: str, slow: str = "") -> Path:
    """A run pytest-benchmark itself writes, of a small suite."""
    suite = tmp_path / "test_work.py"
    suite.write_text(
        "import os\nSLOW = os.environ.get('SLOW', '')\n\n"
        "def test_sum(benchmark):\n    benchmark(sum, range(2000 * (2 if SLOW == 'test_sum' else 1)))\n\n"
        "def test_sorted(benchmark):\n    benchmark(sorted, list(range(3000, 0, -1)))\n"
    )
    out = tmp_path / name
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYTEST_XDIST")}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:gpucheck",
         str(suite), f"--benchmark-json={out}", "--benchmark-max-time=0.2"],
        cwd=tmp_path, env={**env, "SLOW": slow}, capture_output=True, timeout=120, check=True,
    )
    return out


def test_a_real_run_against_itself(tmp_path: Path) -> None:
    run = real_run(tmp_path, "a.json")
    done = gpucheck_compare(run, run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The two machines are the same" in done.stdout
    assert "test_work.py::test_sum" in done.stdout and "No regression beyond 5% (2 benchmarks compared)." in done.stdout


def test_a_driver_upgrade_is_shown_above_the_table(tmp_path: Path) -> None:
    rng = random.Random(7)
    base = synthetic_run(tmp_path / "base.json", rng, TIMES)
    new_machine = json.loads(json.dumps(MACHINE))
    new_machine["gpucheck"].update(driver="560.35.03", cuda_driver="12.6")
    new = write_run(tmp_path / "new.json", json.loads(base.read_text())["benchmarks"], new_machine)
    done = gpucheck_compare(base, new)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    driver = next(i for i, ln in enumerate(lines) if ln.split() == ["driver", "550.54.15", "->", "560.35.03"])
    assert lines[driver + 1].split() == ["CUDA", "driver", "API", "12.4", "->", "12.6"]
    assert driver < next(i for i, ln in enumerate(lines) if ln.startswith("Benchmarks"))
    # The markdown form (a CI job summary) says the same.
    md = gpucheck_compare(base, new, "--markdown").stdout
    assert "| driver | 550.54.15 | 560.35.03 |" in md and "| benchmark | base | new | change | verdict | noise |" in md
    # Every row has the noise column's cell too (issue 23: --markdown dropped it).
    rows = [ln for ln in md.splitlines() if ln.startswith("| `test_x.py::")]
    assert len(rows) == len(TIMES) and all(ln.count(" | ") == 5 and "IQR" in ln.split(" | ")[-1] for ln in rows)


def test_saved_statistics_without_rounds(tmp_path: Path) -> None:
    """Runs saved without their rounds (--benchmark-save without --benchmark-save-data): Welch's t on the
    saved mean, stddev and rounds decides, and the output says so."""
    rng = random.Random(3)
    runs = []
    for name, times in (("base.json", TIMES), ("new.json", {**TIMES, "test_b0": TIMES["test_b0"] * 2})):
        path = synthetic_run(tmp_path / name, rng, times)
        data = json.loads(path.read_text())
        for b in data["benchmarks"]:
            del b["stats"]["data"]
        path.write_text(json.dumps(data))
        runs.append(path)
    done = gpucheck_compare(*runs, "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["regressions"] == ["test_x.py::test_b0"]
    assert {r["method"] for r in report["benchmarks"]} == {"saved statistics (Welch's t on mean, stddev, rounds)"}


def _drop_rounds(path: Path) -> Path:
    data = json.loads(path.read_text())
    for b in data["benchmarks"]:
        del b["stats"]["data"]
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("trial", range(6))
def test_identical_work_without_rounds_is_no_regression(tmp_path: Path, trial: int) -> None:
    """The same ordinary noise, saved without rounds: Welch's t on the saved statistics names no regression."""
    rng = random.Random(200 + trial)
    base = _drop_rounds(synthetic_run(tmp_path / "base.json", rng, TIMES, shift=rng.uniform(-0.01, 0.01)))
    new = _drop_rounds(synthetic_run(tmp_path / "new.json", rng, TIMES, shift=rng.uniform(-0.01, 0.01)))
    done = gpucheck_compare(base, new)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No regression beyond 5%" in done.stdout and "Welch's t" in done.stdout


def test_a_shift_inside_the_iqr_over_many_rounds_is_named(tmp_path: Path) -> None:
    """Issue 23: without rounds, +20 % over 50 rounds read "within noise" because it lay inside the IQR of a
    wide spread; the saved stddev and rounds say it is beyond noise."""
    rng = random.Random(23)
    times = {"test_wide": 0.003}
    base = _drop_rounds(synthetic_run(tmp_path / "base.json", rng, times, sigma=0.3, rounds=50))
    new = _drop_rounds(synthetic_run(tmp_path / "new.json", rng, {"test_wide": 0.0036}, sigma=0.3, rounds=50))
    report = json.loads(gpucheck_compare(base, new, "--json").stdout)
    [row] = report["benchmarks"]
    stats = [json.loads(p.read_text())["benchmarks"][0]["stats"] for p in (base, new)]
    assert row["change"] < max(s["iqr"] / s["median"] for s in stats)  # inside the IQR: the old "noise"
    assert row["verdict"] == "slower" and row["p_value"] < 0.05 and report["exit_status"] == 1


def _faster_everywhere_but_ten_outliers(tmp_path: Path) -> tuple[Path, Path]:
    """The new run is 20 % faster at every percentile up to the 99th; ten of its 1,000 rounds were
    interrupted (50 times longer), which lifts its max and mean above the base run's."""
    rng = random.Random(5)
    base_rounds = [0.001 * math.exp(rng.gauss(0, 0.05)) for _ in range(1000)]
    new_rounds = [0.0008 * math.exp(rng.gauss(0, 0.05)) for _ in range(1000)]
    for i in rng.sample(range(1000), 10):
        new_rounds[i] *= 50
    base = write_run(tmp_path / "base.json", [bench_entry("test_fast", base_rounds)])
    new = write_run(tmp_path / "new.json", [bench_entry("test_fast", new_rounds)])
    return base, new


@pytest.mark.parametrize("metric", ["max", "mean", "median"])
def test_the_verdict_direction_comes_from_the_test_not_the_metric(tmp_path: Path, metric: str) -> None:
    """Issue 23: with --metric max (or mean), ten outlier rounds read "+201.1% slower REGRESSION p=1.8e-241" for
    a benchmark faster at every percentile up to the 99th. The direction now comes from the rank test's
    own estimate (Hodges-Lehmann); the metric only reports its change."""
    base, new = _faster_everywhere_but_ten_outliers(tmp_path)
    done = gpucheck_compare(base, new, "--metric", metric, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = json.loads(done.stdout)["benchmarks"]
    assert row["verdict"] == "faster" and not row["regression"]
    assert -0.25 < row["shift"] < -0.15
    if metric != "median":
        assert row["change"] > 0  # the metric reports what it saw
    text = gpucheck_compare(base, new, "--metric", metric).stdout
    assert "faster (shift -" in text and "REGRESSION" not in text


@pytest.mark.parametrize("trial", range(3))
def test_a_benchmark_made_twice_as_fast_is_named_faster_and_exits_0(tmp_path: Path, trial: int) -> None:
    rng = random.Random(300 + trial)
    quick = sorted(TIMES)[trial]
    base = synthetic_run(tmp_path / "base.json", rng, TIMES)
    new = synthetic_run(tmp_path / "new.json", rng, {k: v / (2 if k == quick else 1) for k, v in TIMES.items()})
    done = gpucheck_compare(base, new, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["regressions"] == []
    assert [r["name"] for r in report["benchmarks"] if r["verdict"] == "faster"] == [f"test_x.py::{quick}"]
    text = gpucheck_compare(base, new).stdout
    assert "No regression beyond 5%" in text and "1 faster" in text


@pytest.mark.parametrize(("given", "printed"), [("2.5", "2.5%"), ("0.05", "0.05%"), ("5%", "5%"), ("12.75%", "12.75%")])
def test_the_threshold_is_printed_as_given(tmp_path: Path, given: str, printed: str) -> None:
    """Issue 23: --threshold 2.5 printed "beyond 2%", 0.05 "beyond 0%"."""
    rng = random.Random(9)
    base = synthetic_run(tmp_path / "base.json", rng, TIMES)
    new = synthetic_run(tmp_path / "new.json", rng, {**TIMES, "test_b1": TIMES["test_b1"] * 2})
    for args in ((), ("--markdown",)):
        done = gpucheck_compare(base, new, "--threshold", given, *args)
        assert done.returncode == 1
        assert f"regression beyond {printed}: " in done.stdout, done.stdout
    assert json.loads(gpucheck_compare(base, new, "--threshold", given, "--json").stdout)["threshold_text"] == printed


def test_run_ids_in_a_storage_folder(tmp_path: Path) -> None:
    rng = random.Random(11)
    machine_dir = tmp_path / ".benchmarks" / "Linux-CPython-3.12-64bit"
    machine_dir.mkdir(parents=True)
    synthetic_run(machine_dir / "0001_abc_20261124_010000.json", rng, TIMES)
    synthetic_run(machine_dir / "0002_abc_20261124_020000.json", rng, {**TIMES, "test_b3": TIMES["test_b3"] * 3})
    done = gpucheck_compare("0001", "0002", cwd=tmp_path)
    assert done.returncode == 1 and "test_x.py::test_b3" in done.stdout, done.stdout + done.stderr
    other = gpucheck_compare("0001", "0002", "--storage", tmp_path / ".benchmarks")
    assert other.returncode == 1


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str | Path], str]]:
    good = synthetic_run(tmp_path / "good.json", random.Random(1), TIMES)
    other = synthetic_run(tmp_path / "other.json", random.Random(2), {"test_elsewhere": 0.01})
    (tmp_path / "text.json").write_text("this is not { json")
    (tmp_path / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    (tmp_path / "report.json").write_text(json.dumps({"schema": "gpucheck-report/1", "verdict": "accelerated"}))
    (tmp_path / "nostats.json").write_text(json.dumps({"benchmarks": [{"name": "test_a"}]}))
    entry = json.loads(good.read_text())["benchmarks"][0]
    for name, median in (("nan", "NaN"), ("zero", "0"), ("huge", "1" + "0" * 400)):
        text = json.dumps({"benchmarks": [{**entry, "stats": {**entry["stats"], "median": 1.0}}]})
        (tmp_path / f"{name}.json").write_text(text.replace('"median": 1.0', f'"median": {median}'))
    (tmp_path / "twice.json").write_text(json.dumps({"benchmarks": [entry, entry]}))
    (tmp_path / "taken.png").mkdir()
    (tmp_path / "empty.json").write_text(json.dumps({**json.loads(good.read_text()), "benchmarks": []}))
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(good.read_bytes())[:200])
    return {
        "missing": ([tmp_path / "nope.json", good], "is not a file"),
        "folder": ([tmp_path, good], "is a folder"),
        "not json": ([tmp_path / "text.json", good], "is not JSON (line 1"),
        "binary": ([tmp_path / "binary.json", good], "is not JSON"),
        "json list": ([tmp_path / "list.json", good], "is not in pytest-benchmark's format"),
        "a gpucheck report": ([good, tmp_path / "report.json"], "is not in pytest-benchmark's format"),
        "no stats": ([tmp_path / "nostats.json", good], "benchmark 1 has no name or stats"),
        "nothing in common": ([good, other], "have no benchmark in common"),
        "unknown run id": (["0042", good, "--storage", tmp_path], "no run 0042"),
        "plot extension": ([good, good, "--plot", tmp_path / "out.jpg"], "must end in .png or .svg"),
        "threshold": ([good, good, "--threshold", "fast"], "--threshold fast"),
        "nan median": ([tmp_path / "nan.json", good], "has no name or stats"),
        "zero time": ([tmp_path / "zero.json", good], "has a median time of 0.0, not a positive number"),
        "huge number": ([tmp_path / "huge.json", good], "(a number of 401 digits)"),
        "a benchmark twice": ([tmp_path / "twice.json", good], "has the benchmark test_x.py::test_b0 twice"),
        "plot onto a folder": ([good, good, "--plot", tmp_path / "taken.png"], "it is a folder"),
        "usage": ([good, "--json", "--markdown"], "(see gpucheck compare --help)"),
        "no benchmarks": ([good, tmp_path / "empty.json"], "has no benchmarks (its 'benchmarks' list is empty)"),
        "gzip cut short": ([tmp_path / "cut.json.gz", good], "is gzip-compressed but cut short"),
    }


@pytest.mark.parametrize(
    "case",
    ["missing", "folder", "not json", "binary", "json list", "a gpucheck report", "no stats", "nothing in common",
     "unknown run id", "plot extension", "threshold", "nan median", "zero time", "huge number", "a benchmark twice",
     "plot onto a folder", "usage", "no benchmarks", "gzip cut short"],
)
def test_unusable_input_exits_2_with_one_sentence(tmp_path: Path, case: str) -> None:
    args, expected = _bad_inputs(tmp_path)[case]
    done = gpucheck_compare(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("gpucheck compare: ") and expected in line, line


def png_size(path: Path) -> tuple[int, int]:
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR"
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def test_plot_draws_a_real_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.image

    rng = random.Random(5)
    base = synthetic_run(tmp_path / "base.json", rng, TIMES)
    new = synthetic_run(tmp_path / "new.json", rng, {**TIMES, "test_b4": TIMES["test_b4"] * 2})
    out = tmp_path / "changes.png"
    done = gpucheck_compare(base, new, "--plot", out)
    assert done.returncode == 1, done.stderr
    width, height = png_size(out)
    assert width >= 600 and height >= 200
    pixels = matplotlib.image.imread(str(out))
    assert pixels.std() > 0.05  # not blank
    red = (pixels[..., 0] > 0.7) & (pixels[..., 1] < 0.3) & (pixels[..., 2] < 0.3)
    assert red.sum() > 100  # the slower benchmark's bar
    svg = tmp_path / "changes.svg"
    assert gpucheck_compare(base, new, "--plot", svg).returncode == 1 and svg.read_text().lstrip().startswith("<?xml")


def test_hodges_lehmann_is_the_median_of_every_difference() -> None:
    """Against the definition, computed the long way: the median of all n·m differences new - base, to the
    bit (tests/test_compare_shift.py: many more inputs)."""
    assert compare.hodges_lehmann([1.0, 2.0, 3.0], [4.0, 6.0, 8.0]) == 4.0  # 1 2 3 3 [4] 5 5 6 7
    rng = random.Random(4)
    for _ in range(20):
        a = [rng.lognormvariate(0, 0.3) for _ in range(rng.randint(1, 60))]
        b = [rng.lognormvariate(0.1, 0.5) for _ in range(rng.randint(1, 60))]
        every = statistics.median([y - x for x in a for y in b])
        assert compare.hodges_lehmann(a, b) == every


def test_student_t_matches_the_tables() -> None:
    """Two-sided p of Student's t at the tabulated 97.5 % and 99.5 % points (p = 0.05 and 0.01), and
    scipy.stats.t.sf(2, 10) * 2 = 0.0733880347707 (scipy 1.17.1, run once)."""
    for t, df, p in ((12.7062047361747, 1, 0.05), (2.57058183661474, 5, 0.05), (2.228138851986, 10, 0.05),
                     (2.75, 30, 0.01), (3.16927267261695, 10, 0.01), (1.959963984540054, 1e9, 0.05)):
        assert compare.student_t_p(t, df) == pytest.approx(p, rel=2e-3 if df == 30 else 1e-6)
        assert compare.student_t_p(-t, df) == compare.student_t_p(t, df)
    assert compare.student_t_p(2.0, 10) == pytest.approx(0.0733880347707, rel=1e-9)
    assert compare.student_t_p(0.0, 3) == 1.0 and compare.student_t_p(math.inf, 3) == 0.0


def test_mann_whitney_matches_scipy() -> None:
    """Against scipy.stats.mannwhitneyu(a, b, method="asymptotic"), scipy 1.17.1 (run once, scipy is no
    dependency): [1..10] vs [6..15] (five tied values) gives U = 12.5, p = 0.005075392315273923; 30 vs 25
    normal draws (random.Random(1), means 0 and 0.5) give U = 266, p = 0.06665626046296995."""
    a = [float(x) for x in range(1, 11)]
    b = [float(x) for x in range(6, 16)]
    assert compare.mann_whitney_p(a, b) == pytest.approx(0.005075392315273923, rel=1e-9)
    rng = random.Random(1)
    x = [rng.gauss(0, 1) for _ in range(30)]
    y = [rng.gauss(0.5, 1) for _ in range(25)]
    assert compare.mann_whitney_p(x, y) == pytest.approx(0.06665626046296995, rel=1e-9)
    assert compare.mann_whitney_p(a, a) == pytest.approx(1.0)
    assert compare.mann_whitney_p([1.0] * 5, [1.0] * 5) == 1.0
