"""Issue 23: ``gpucheck compare`` on real pytest-benchmark files from public projects, through the console
script, as a new user runs it.

The files are in ``tests/benchfiles/`` (``INDEX.md`` names each one's repository, path, commit and
pytest-benchmark version: 2.5.0, 3.2.2, 4.0.0, 5.2.3 from six projects). Where a case needs a file that no
project committed (a run that recorded no CPU beside one that did, an empty ``benchmarks`` list), it is made
from a real file by changing that one thing, in ``tmp_path``.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FILES = Path(__file__).parent / "benchfiles"
GAB_OLD = FILES / "github-action-benchmark_pytest_output.json"
GAB_NEW = FILES / "github-action-benchmark_pytest_several_units.json"
CACHEW_7 = FILES / "cachew_0007_baseline.json.gz"
CACHEW_8 = FILES / "cachew_0008_sqlite3-backend.json"
CACHEW_9 = FILES / "cachew_0009_sqlite-multivalue.json"
PB_1 = FILES / "pytest-benchmark_0001.json"
PB_30 = FILES / "pytest-benchmark_0030.json"
BIDICT = FILES / "bidict_baseline.json"
LASER = FILES / "laser-core_baseline.json"
PDF_1 = FILES / "pdfminer_0001_baseline.json"
PDF_2 = FILES / "pdfminer_0002_after_all_optimizations.json"
CORPUS = sorted(p for p in FILES.iterdir() if p.name.endswith((".json", ".json.gz")))


def _command() -> list[str]:
    """The console script pip installed beside this Python (``gpucheck``), as a user runs it."""
    script = Path(sys.executable).parent / "gpucheck"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpucheck.cli"]


def gpucheck_compare(*args: str | Path, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [*_command(), "compare", *map(str, args)], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def as_json(*args: str | Path) -> dict[str, Any]:
    done = gpucheck_compare(*args, "--json")
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _text(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()


def test_the_corpus_is_what_its_index_says() -> None:
    """At least six projects and four pytest-benchmark versions, each file named in INDEX.md."""
    index = (FILES / "INDEX.md").read_text()
    versions = {json.loads(_text(p))["version"] for p in CORPUS}
    assert len(versions) >= 4, versions
    projects = {p.name.split("_")[0] for p in CORPUS}
    assert len(projects) >= 6, projects
    for p in CORPUS:
        assert f"`{p.name}`" in index, p.name


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_real_file_against_itself(path: Path) -> None:
    done = gpucheck_compare(path, path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr == ""
    assert "No regression beyond 5%" in done.stdout
    assert "What differs" not in done.stdout


@pytest.mark.parametrize(("base", "new"), [(GAB_OLD, GAB_NEW), (CACHEW_7, CACHEW_8), (CACHEW_8, CACHEW_9),
                                           (CACHEW_9, CACHEW_7), (PB_1, PB_30)],
                         ids=lambda p: p.name)
def test_real_pairs_in_every_form(tmp_path: Path, base: Path, new: Path) -> None:
    """Text, Markdown, JSON and a plot: one exit status, no traceback."""
    statuses = set()
    for args in ((), ("--markdown",), ("--json",), ("--plot", tmp_path / "p.png")):
        done = gpucheck_compare(base, new, *args)
        assert done.returncode in (0, 1) and done.stderr == "", done.stderr
        statuses.add(done.returncode)
    assert len(statuses) == 1


# --- the machines -----------------------------------------------------------------------------------------


def test_a_changed_cpu_recorded_by_old_py_cpuinfo_is_named() -> None:
    """Issue 23: py-cpuinfo before 6 wrote ``cpu.brand``; the two github-action-benchmark files (an i7-4771 on
    macOS 10.14, an i5-5257U on macOS 10.12) read "The two machines are the same"."""
    done = gpucheck_compare(GAB_OLD, GAB_NEW)
    lines = done.stdout.splitlines()
    assert "The two machines are the same" not in done.stdout
    assert any(ln.split() == ["CPU", "Intel(R)", "Core(TM)", "i7-4771", "CPU", "@", "3.50GHz", "->", "Intel(R)",
                              "Core(TM)", "i5-5257U", "CPU", "@", "2.70GHz"] for ln in lines), done.stdout
    assert any(ln.split() == ["OS", "release", "(kernel)", "18.7.0", "->", "16.7.0"] for ln in lines), done.stdout
    assert any(ln.split()[:2] == ["compiler", "Clang"] and "->" in ln for ln in lines), done.stdout
    machine = {m["what"]: (m["base"], m["new"]) for m in as_json(GAB_OLD, GAB_NEW)["machine"]}
    assert machine["CPU"] == ("Intel(R) Core(TM) i7-4771 CPU @ 3.50GHz", "Intel(R) Core(TM) i5-5257U CPU @ 2.70GHz")
    md = gpucheck_compare(GAB_OLD, GAB_NEW, "--markdown").stdout
    assert "| CPU | Intel(R) Core(TM) i7-4771 CPU @ 3.50GHz | Intel(R) Core(TM) i5-5257U CPU @ 2.70GHz |" in md


def test_the_machine_section_names_os_architecture_kernel_and_compiler() -> None:
    report = as_json(CACHEW_7, CACHEW_8)
    assert {"what": "OS release (kernel)", "base": "7.0.0-15-generic", "new": "7.0.0-29-generic"} in report["machine"]
    same = {m["what"]: m["value"] for m in report["machine_same"]}
    assert same["OS"] == "Linux" and same["architecture"] == "x86_64" and same["compiler"] == "Clang 22.1.3"
    assert same["Python implementation"] == "CPython" and same["CPU"] == "Intel(R) Core(TM) i7-9700K CPU @ 3.60GHz"


def test_a_file_that_records_no_cpu_is_not_called_the_same() -> None:
    """laser-core's conftest replaced machine_info with {"ci", "runner"}: nothing says the CPUs are the same."""
    done = gpucheck_compare(LASER, LASER)
    assert done.returncode == 0
    assert "CPU" not in done.stdout.split("Not recorded by either run:")[0]
    not_recorded = done.stdout.split("Not recorded by either run:")[1].split("\n\n")[0]
    assert "CPU" in not_recorded and "Python" in not_recorded and "OS" in not_recorded
    assert "runner" in done.stdout.split("Not recorded by either run:")[0]  # a conftest's own key is compared


def test_a_key_one_run_lacks_reads_not_recorded(tmp_path: Path) -> None:
    """The same run with its CPU left out (as pytest-benchmark 2.5 wrote it): "not recorded", never "the same"."""
    data = json.loads(GAB_OLD.read_text())
    del data["machine_info"]["cpu"]
    no_cpu = tmp_path / "no_cpu.json"
    no_cpu.write_text(json.dumps(data))
    done = gpucheck_compare(GAB_OLD, no_cpu)
    assert done.returncode == 0, done.stderr
    assert any(ln.split() == ["CPU", "Intel(R)", "Core(TM)", "i7-4771", "CPU", "@", "3.50GHz", "->", "not", "recorded"]
               for ln in done.stdout.splitlines()), done.stdout
    assert "The two machines are the same" not in done.stdout
    assert {"what": "CPU", "base": "Intel(R) Core(TM) i7-4771 CPU @ 3.50GHz", "new": None} in as_json(GAB_OLD, no_cpu)["machine"]


# --- verdicts ---------------------------------------------------------------------------------------------

WIDE = "src/cachew/tests/benchmarks/pipeline.py::test_03_blob_dump[pickle-{}-dataclass-100k]"


def test_a_change_inside_a_wide_iqr_over_50_rounds_is_named() -> None:
    """Issue 23: +19.9 % and +23.7 % medians over 50 rounds in cachew's runs read "same (within noise)"
    because they lay inside the IQR; Welch's t on the saved mean, stddev and rounds says slower."""
    rows = {r["name"]: r for r in as_json(CACHEW_7, CACHEW_8)["benchmarks"]}
    for kind, median_change in (("nested", 0.199), ("union", 0.236)):
        row = rows[WIDE.format(kind)]
        assert row["change"] == pytest.approx(median_change, abs=0.001)
        assert row["verdict"] == "slower" and row["p_value"] < 1e-6, row
        assert row["method"] == "saved statistics (Welch's t on mean, stddev, rounds)"


def test_a_real_speed_up_reads_faster() -> None:
    """cachew's commit "speedup cache write using multi-value sqlite inserts" (0008 -> 0009)."""
    report = as_json(CACHEW_8, CACHEW_9)
    faster = {r["name"]: r for r in report["benchmarks"] if r["verdict"] == "faster"}
    name = "src/cachew/tests/benchmarks/pipeline.py::test_04_storage_dump[msgspec-json-sqlite-primitive-int-100k]"
    assert name in faster and faster[name]["change"] < 0 and faster[name]["shift"] < -0.05
    assert not any(r["regression"] for r in faster.values())
    assert "faster (mean -" in gpucheck_compare(CACHEW_8, CACHEW_9, columns=200).stdout


def test_a_regression_on_a_changed_machine_exits_1() -> None:
    done = gpucheck_compare(GAB_OLD, GAB_NEW)
    assert done.returncode == 1
    assert done.stdout.rstrip().splitlines()[-1].startswith("2 regressions beyond 5%: test_fib_10 (mean +")


def test_files_with_nothing_in_common_or_no_benchmarks_exit_2_with_one_sentence(tmp_path: Path) -> None:
    done = gpucheck_compare(PDF_1, PDF_2)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().endswith("have no benchmark in common")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({**json.loads(BIDICT.read_text()), "benchmarks": []}))
    for args in ((BIDICT, empty), (empty, BIDICT)):
        done = gpucheck_compare(*args)
        assert (done.returncode, done.stdout) == (2, "")
        [line] = done.stderr.splitlines()
        assert line == f"gpucheck compare: {empty} has no benchmarks (its 'benchmarks' list is empty): nothing to compare"


def test_a_gzip_file_is_read(tmp_path: Path) -> None:
    """Issue 23: a gzip file read "not even UTF-8 text"."""
    plain = tmp_path / "0007.json"
    plain.write_bytes(gzip.decompress(CACHEW_7.read_bytes()))
    assert as_json(CACHEW_7, CACHEW_8)["benchmarks"] == as_json(plain, CACHEW_8)["benchmarks"]


# --- the output's shape ---------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_long_names_fit_the_terminal(columns: int) -> None:
    """Issue 23: cachew's 107-character names made a 184-column table and a summary line of 1,016 characters."""
    done = gpucheck_compare(CACHEW_7, CACHEW_8, columns=columns)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    too_wide = [ln for ln in lines if len(ln) > columns]
    assert not too_wide, too_wide
    summary = " ".join(ln.strip() for ln in lines[next(i for i, ln in enumerate(lines) if ln.startswith("57 regressions")):])
    assert len(summary) < 2 * columns and summary.endswith("more (in the table); 12 faster.")
    # Every common benchmark has its row, and each still says which benchmark it is (its test and
    # parameters, or its head and tail around "…"): no two rows read alike.
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("---")) + 1
    table = lines[start : lines.index("", start)]
    # (At 80 columns each name has a line of its own, indented 2, and its figures the next, indented 4.)
    names = [ln.split("  ")[1] for ln in table if not ln.startswith(("  group: ", "    "))]
    assert len(names) == len(as_json(CACHEW_7, CACHEW_8)["benchmarks"]) == 208
    assert len(set(names)) == len(names)
    assert all(" ms " in ln or " us " in ln for ln in table if ln.startswith("    ")) or columns > 80


def test_full_names_in_markdown_and_json() -> None:
    md = gpucheck_compare(CACHEW_7, CACHEW_8, "--markdown", columns=80).stdout
    report = as_json(CACHEW_7, CACHEW_8)
    names = [r["name"] for r in report["benchmarks"]]
    assert max(map(len, names)) > 100
    for name in names:
        assert f"| `{name}` |" in md
    assert all("…" not in n for n in names)


def test_pytest_benchmark_groups_are_kept() -> None:
    """Issue 23: cachew groups its benchmarks (``group``); the output ignored them."""
    report = as_json(CACHEW_7, CACHEW_8)
    groups = [r["group"] for r in report["benchmarks"]]
    raw = {b["fullname"]: b["group"] for b in json.loads(_text(CACHEW_7))["benchmarks"]}
    assert groups == [raw[r["name"]] for r in report["benchmarks"]]
    # Grouped: each group's rows together, under its header, in text and Markdown.
    runs = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert len(runs) == len(set(groups)) > 10
    text = gpucheck_compare(CACHEW_7, CACHEW_8, columns=200).stdout
    headers = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("group: ")]
    assert headers == [f"group: {g}" for g in runs]
    md = gpucheck_compare(CACHEW_7, CACHEW_8, "--markdown").stdout
    assert [ln.split("**")[1] for ln in md.splitlines() if ln.startswith("| **group: ")] == headers


def test_a_closed_pipe_is_quiet() -> None:
    """``gpucheck compare A B | head -1``: the reader leaves after one line; no traceback, no "Exception
    ignored", and the exit status is still the comparison's. The pipe is made small (4 KiB) so that the
    command is still writing when the reader leaves, whatever the machine's speed."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    env = {**os.environ, "COLUMNS": "100"}
    with subprocess.Popen([*_command(), "compare", str(CACHEW_7), str(CACHEW_8)], stdout=write_end,
                          stderr=subprocess.PIPE, env=env) as proc:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            first = reader.readline()
        _out, err = proc.communicate(timeout=120)
    assert first.startswith(b"gpucheck compare: ")
    assert err == b"", err.decode()
    assert proc.returncode == 1  # the comparison's verdict: regressions


# --- the plot -------------------------------------------------------------------------------------------


def _png(path: Path) -> tuple[int, int]:
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR"
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


@pytest.mark.parametrize(("base", "new"), [(GAB_OLD, GAB_NEW), (CACHEW_7, CACHEW_8), (PB_1, PB_30)],
                         ids=["2-benchmarks", "208-benchmarks", "1-benchmark"])
def test_the_plot_clips_nothing_and_stays_readable(tmp_path: Path, base: Path, new: Path) -> None:
    """Issue 23: every image clipped its title and axis label, and 268 benchmarks made a 900×6000 px image
    with blank bands. Nothing is drawn to the edge of the image (a margin of background all round), and a
    tall comparison is capped to the rows that moved most, each row tall enough to read."""
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("matplotlib.image")
    out = tmp_path / "plot.png"
    done = gpucheck_compare(base, new, "--plot", out)
    assert done.returncode in (0, 1) and done.stderr == ""
    width, height = _png(out)
    assert width <= 1600 and height <= 2000, (width, height)
    pixels = image.imread(str(out))[..., :3]
    white = np.all(pixels > 0.98, axis=-1)
    border = 4
    frame = np.concatenate([white[:border].ravel(), white[-border:].ravel(), white[:, :border].ravel(),
                            white[:, -border:].ravel()])
    assert frame.all(), "something is drawn up to the image's edge: clipped"
    # Ink on every side inside the margin: the title above, the axis label below, the names to the left.
    ink = ~white
    assert ink[: height // 10].any() and ink[-height // 10 :].any() and ink[:, : width // 5].any()
    # No blank band: every tenth of the image's height has ink in it.
    for i in range(10):
        assert ink[i * height // 10 : (i + 1) * height // 10].any(), f"a blank band at {i}/10 of the height"


def test_the_plot_says_how_many_of_how_many_it_draws(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.svg"
    assert gpucheck_compare(CACHEW_7, CACHEW_8, "--plot", out).returncode == 1
    assert "50 of 208 drawn" in out.read_text()
