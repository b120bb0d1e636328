"""Issue 37, points 4 to 6: ``gpucheck compare`` shows machine text as text; no output loses data; doctor's exit
status is its contract (2, "could not diagnose", for a fault of its own and for SIGHUP).

The benchmark files are real pytest-benchmark files (``tests/benchfiles/``, each with its source in ``INDEX.md``), with
hostile text put into their ``machine_info`` and names; every case goes through the real command line.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucheck.cli import main
from tests.test_compare_real import BIDICT, gpucheck_compare
from tests.test_doctor import doctor, metrics, scenario
from tests.test_plugin import _processes_with_env

#: What a terminal acts on: clear the screen, write the clipboard (OSC 52), reverse the text that follows (U+202E),
#: start a new line, ring the bell.
CLEAR, CLIPBOARD, REVERSE, BELL = "\x1b[2J", "\x1b]52;c;ZWNobyBwd25lZA==\x07", "\u202e", "\x07"
HOSTILE = f"EPYC{CLEAR}{CLIPBOARD}{REVERSE}gpu\nforged line"
#: What a Markdown page renders (an image fetched from elsewhere, a code span broken out of).
MARKUP = "<img src=https://example.com/x.png> ``b`` ![x](https://example.com/y.png) **bold** [a](https://e.com)"


def hostile_pair(tmp_path: Path, name: str = HOSTILE, machine: str = HOSTILE) -> tuple[Path, Path]:
    """bidict's real baseline, and the same run on a machine (CPU, node) and with a benchmark's name of ``machine``
    and ``name``, its rounds 30 % slower (a regression)."""
    data = json.loads(BIDICT.read_text())
    new = json.loads(BIDICT.read_text())
    new["machine_info"]["cpu"]["brand_raw"] = machine
    new["machine_info"]["node"] = machine
    new["datetime"] = machine
    for data_run in (data, new):
        first = data_run["benchmarks"][0]
        first["name"] = name
        first["fullname"] = f"tests/test_x.py::{name}"
        first["group"] = name
        first["extra_info"] = {name: 1.0}
    for b in new["benchmarks"]:
        b["stats"] = {k: v * 1.3 if isinstance(v, float) and k not in ("iqr_outliers", "stddev_outliers") else v
                      for k, v in b["stats"].items()}
        if isinstance(b["stats"].get("data"), list):
            b["stats"]["data"] = [x * 1.3 for x in b["stats"]["data"]]
    base_path, new_path = tmp_path / "base.json", tmp_path / "new.json"
    base_path.write_text(json.dumps(data))
    new_path.write_text(json.dumps(new))
    return base_path, new_path


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal acts on: controls (but the newline that ends a line) and format
    characters (bidi overrides, zero-width ones)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


# --- point 4: machine text reaches the terminal as text --------------------------------------------------------------


def test_escape_sequences_in_machine_info_and_names_never_reach_the_terminal(tmp_path: Path) -> None:
    base, new = hostile_pair(tmp_path)
    done = gpucheck_compare(base, new)
    assert done.returncode == 1, done.stderr
    assert unsafe(done.stdout) == [], sorted(set(unsafe(done.stdout)))
    assert "\\x1b[2J" in done.stdout and "\\u202e" in done.stdout and "\\x07" in done.stdout
    # The newline in a name is shown as \n: no line of the output starts with the forged text.
    assert not any(line.startswith("forged line") for line in done.stdout.splitlines())
    assert "\\nforged line" in done.stdout


def test_markdown_shows_html_and_backticks_as_text(tmp_path: Path) -> None:
    """Rendered by a CommonMark parser with GitHub's tables (markdown-it-py, which TensorFlow's keras brings through
    rich): no tag, image, link or emphasis comes out of the files' text, and the name with backticks is one code span,
    whole."""
    markdown_it = pytest.importorskip("markdown_it")
    base, new = hostile_pair(tmp_path, name=f"test_x[{MARKUP}]", machine=MARKUP)
    md = gpucheck_compare(base, new, "--markdown").stdout
    assert unsafe(md) == []
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(md)
    for made in ("<img", "<a href", "<strong>bold", "<em>"):
        assert made not in html, (made, html[:3000])
    assert f"<code>tests/test_x.py::test_x[{MARKUP.replace('<', '&lt;').replace('>', '&gt;')}]</code>" in html, html[:3000]
    # The machines' table and the benchmarks', every row of the latter with its six cells: no text broke a cell.
    assert html.count("<table>") == 2
    rows = html.split("<table>")[2].split("<tbody>")[1].split("<tr>")[1:]
    assert len(rows) == 69 + 2 and all(r.count("<td") == 6 for r in rows), rows[:3]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(name=st.text(min_size=1, max_size=30), machine=st.text(max_size=30))
def test_any_text_in_a_name_or_the_machine_reaches_the_terminal_as_text(
    tmp_path_factory: pytest.TempPathFactory, name: str, machine: str
) -> None:
    """Property: whatever the text, compare's terminal and Markdown output hold no control or format character."""
    base, new = hostile_pair(tmp_path_factory.mktemp("pair"), name=name, machine=machine)
    for extra in ([], ["--markdown"]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["compare", str(base), str(new), *extra])
        assert code in (1, 2), err.getvalue()
        assert unsafe(out.getvalue()) == [] and unsafe(err.getvalue()) == []


# --- point 5: outputs that lose data -------------------------------------------------------------------------------


def test_a_plot_onto_an_input_is_refused_and_the_input_kept(tmp_path: Path) -> None:
    base, new = hostile_pair(tmp_path, name="test_a", machine="m")
    svg = tmp_path / "base.svg"
    svg.write_bytes(base.read_bytes())
    before = svg.read_bytes()
    done = gpucheck_compare(svg, new, "--plot", svg)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert "is an input of the comparison: it would be overwritten" in done.stderr
    assert svg.read_bytes() == before
    # Through a link or another spelling of the same file too.
    (tmp_path / "link.svg").symlink_to(svg)
    assert gpucheck_compare(svg, new, "--plot", tmp_path / "link.svg").returncode == 2
    assert svg.read_bytes() == before


def test_a_plot_that_cannot_be_written_keeps_the_regression(tmp_path: Path) -> None:
    """``--plot /proc/x.png``: no comparison and exit 2 hid a regression; the comparison is printed, the plot's
    failure is one sentence, and the regression still exits 1."""
    base, new = hostile_pair(tmp_path, name="test_a", machine="m")
    done = gpucheck_compare(base, new, "--plot", "/proc/x.png")
    assert done.returncode == 1, done.stderr
    assert "regression" in done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith("gpucheck compare: cannot write the plot to /proc/x.png")
    # Without a regression, the plot asked for and not written is the exit status: 2.
    done = gpucheck_compare(base, base, "--plot", "/proc/x.png")
    assert done.returncode == 2 and "No regression" in done.stdout


def test_doctor_refuses_json_and_prometheus_on_one_file(tmp_path: Path) -> None:
    for first, second in ((tmp_path / "x", tmp_path / "x"), (tmp_path / "x", Path("x"))):
        done = doctor("--framework=none", "--json", first, "--prometheus", second, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().endswith("one would overwrite the other") and done.stdout == ""
        assert not (tmp_path / "x").exists()
    done = doctor("--framework=none", "--json", "-", "--prometheus", "-", cwd=tmp_path)
    assert done.returncode == 2 and "both name standard output" in done.stderr


def test_doctor_prometheus_dash_is_standard_output(tmp_path: Path) -> None:
    """``--prometheus -`` wrote a file named ``-``; it prints the textfile instead of the summary, as ``--json -``
    prints the report."""
    done = doctor("--framework=none", "--prometheus", "-", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out.prom").write_text(done.stdout)
    m = metrics(tmp_path / "out.prom")
    assert m["gpucheck_usable"] == [({}, 0.0)] and m["gpucheck_complete"] == [({}, 1.0)]


# --- point 6: exit codes --------------------------------------------------------------------------------------------


def test_a_fault_of_doctors_own_is_could_not_diagnose(tmp_path: Path) -> None:
    """A prometheus_client that raises inside (a broken install): a traceback and exit 1, "not usable", which the
    documented prolog drains the node on; the contract says 2, with one sentence."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "prometheus_client.py").write_text(
        "class CollectorRegistry:\n    def __init__(self):\n        raise RuntimeError('registry broken')\n"
        "Gauge = generate_latest = None\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "gpucheck.cli", "doctor", "--framework=none", "--prometheus",
                           str(tmp_path / "x.prom")], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("gpucheck doctor: could not diagnose the node") and "registry broken" in line


def test_sighup_leaves_no_stale_textfile_saying_usable(
    tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """cuInit hangs; the ssh session that ran doctor closes (SIGHUP). It died (exit 129) and the textfile of the last
    run still said usable 1; it ends as at SIGTERM: exit 2, the textfile says usable 0 and complete 0."""
    machine = fake_machine(scenario("stack/cuinit-hangs"))
    prom = tmp_path / "node.prom"
    prom.write_text("gpucheck_usable 1.0\ngpucheck_complete 1.0\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucheck.cli", "doctor", "--timeout=120", "--prometheus", str(prom)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    marker = str(machine / "scenario.cfg")
    deadline = time.monotonic() + 60  # a hang guard, not a timing
    while time.monotonic() < deadline and len(_processes_with_env("GPUCHECK_FAKE_SCENARIO", marker)) < 3:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, out.decode() + err.decode()
    assert "stopped by SIGHUP before the diagnosis finished" in err.decode()
    m = metrics(prom)
    assert m["gpucheck_usable"] == [({}, 0.0)] and m["gpucheck_complete"] == [({}, 0.0)]
    time.sleep(0.5)
    assert _processes_with_env("GPUCHECK_FAKE_SCENARIO", marker) == []
