"""The plugin end to end on this very host (a CUDA build of TensorFlow, no driver, no GPU), its
activation rules, its options, its report files."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import RUN_OPTIONS, GpucheckRun, SharedRuns, tensorflow_facts

HEAVY = ("tensorflow", "pynvml", "ctypes", "gpucheck.diagnosis", "gpucheck.session")


#: The machine these tests were written on, as a host view: no NVIDIA device on the PCI bus (an emulated VGA
#: card only), no nvidia module, no /dev/nvidia*, no driver library (tests/logs/tf-2.21-host-without-driver.log
#: is its TensorFlow's own output). Under GPUCHECK_HOST_ROOT the diagnosis reads this view, not the host's,
#: so the tests hold on a GPU host too.
DRIVERLESS_HOST: dict[str, Any] = {
    "_source": "this repository's build host (no GPU, no NVIDIA driver): tests/logs/README.md",
    "host": {"pci": [{"bus_id": "0000:00:02.0", "vendor": "0x1234", "device": "0x1111", "class": "0x030000"}]},
    "libraries": [],
}


@pytest.fixture
def driverless_host(fake_machine: Callable[[dict[str, Any]], Path]) -> Path:
    """This test's environment is the driverless host view (``DRIVERLESS_HOST``)."""
    return fake_machine(DRIVERLESS_HOST)


needs_driverless_host = pytest.mark.usefixtures("driverless_host")


#: A user's conftest that reads the verdict through the session plugin, for users' own hooks.
USER_CONFTEST = textwrap.dedent(
    """
    def pytest_terminal_summary(config):
        plugin = config.pluginmanager.get_plugin("gpucheck-session")
        print("USER-SEES", plugin.result().verdict)
    """
)


@pytest.fixture
def driverless_run(gpucheck_shared: SharedRuns) -> GpucheckRun:
    """One plain ``pytest --gpucheck`` of the driverless host, made once per session and read by every test
    below that only reads such a run (each of them made its own before): -rs for the skips, a JUnit XML, a
    user's conftest that reads the verdict (printed: -s), and a project whose ini names ``testpaths`` with one
    test of its own given by path."""
    return driverless_gpucheck_run(gpucheck_shared)


def driverless_gpucheck_run(gpucheck_shared: SharedRuns) -> GpucheckRun:
    """``driverless_run`` for a test of another file that reads such a run (tests/test_merge.py: a TensorFlow host)."""
    return gpucheck_shared.run(
        "-rs", "-s", "--junitxml=junit.xml", "test_root.py",
        scenario=DRIVERLESS_HOST,
        files={
            "pytest.ini": "[pytest]\ntestpaths = tests\n",
            "tests/test_project.py": "def test_project():\n    pass\n",
            "test_root.py": "def test_root():\n    pass\n",
            "conftest.py": USER_CONFTEST,
        },
    )


def test_this_host_has_no_gpu(driverless_run: GpucheckRun) -> None:
    """Acceptance: exit 1, no-nvidia-gpu named as root cause with its remedy, JSON verdict."""
    run = driverless_run
    assert run.result.ret == 1
    run.result.stdout.fnmatch_lines(
        [
            "gpucheck: no NVIDIA GPU;*TensorFlow 2.*CUDA*sees 0 GPU(s)",
            "gpucheck verdict: not-accelerated (root cause: no-nvidia-gpu)",
            "*= gpucheck =*",
            "hardware*broken*no-nvidia-gpu",
            "kernel*blocked*by no-nvidia-gpu",
            "framework*blocked*by no-nvidia-gpu",
            "root cause: no-nvidia-gpu (hardware): No NVIDIA GPU*",
            "*remedy: Run on a machine with an NVIDIA GPU*",
            "verdict: not-accelerated",
            "SKIPPED*blocked by no-nvidia-gpu",
        ]
    )
    report = run.report
    assert report["schema"] == "gpucheck-report/1"
    assert report["verdict"] == "not-accelerated"
    assert report["root_cause"]["id"] == "no-nvidia-gpu"
    assert set(report["root_cause"]) >= {"id", "severity", "layer", "summary", "cause", "remedy", "evidence"}
    assert report["environment"]["gpucheck"]
    assert report["facts"]["framework"]["facts"]["build_info"]["is_cuda_build"] is True
    outcomes = {c["nodeid"].split("::")[-1]: c for c in report["checks"]}
    assert outcomes["test_nvidia_gpu_on_pci_bus"]["outcome"] == "failed"
    assert outcomes["test_nvidia_gpu_on_pci_bus"]["finding_ids"] == ["no-nvidia-gpu"]
    assert outcomes["test_tensorflow_registers_gpus"]["outcome"] == "skipped"
    failed = [c for c in report["checks"] if c["outcome"] == "failed"]
    assert len(failed) == 1, "a broken machine shows one red line"
    # TensorFlow's own words are kept as evidence of the (blocked) framework finding.
    tf_log = next(f for f in report["findings"] if f["id"] == "framework-gpu-init-failed")["evidence"]["tensorflow_log"]
    assert any("cuda" in line.lower() for line in tf_log)
    # Without a GPU, numerics and XLA have nothing to say about one: not run by default (--gpucheck-deep runs
    # them on the CPU); placement and the multi-device path over logical CPUs are.
    tf = tensorflow_facts(report)
    assert tf["numerics"] == [] and tf["xla"] == [] and tf["runs"] and tf["multi_device"]["ok"]


def test_plugin_inert_without_flag(pytester: pytest.Pytester) -> None:
    """Without --gpucheck: options only; no TensorFlow, NVML, ctypes or diagnosis code is imported."""
    pytester.makepyfile(
        test_mine=f"""
        import sys

        def test_nothing_heavy_loaded():
            loaded = [m for m in {HEAVY!r} if m in sys.modules]
            assert loaded == []
            maps = open("/proc/self/maps").read()
            assert "libcuda" not in maps and "libnvidia-ml" not in maps
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--gpucheck-timeout" in help_text and "GPUCHECK_TIMEOUT" in help_text


def test_import_of_plugin_is_light() -> None:
    code = f"import sys, gpucheck.plugin; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


@needs_driverless_host
def test_without_paths_only_the_suite_runs(pytester: pytest.Pytester, driverless_run: GpucheckRun) -> None:
    """`pytest --gpucheck` ignores the project's own tests and testpaths; with paths it runs both (the shared
    run's project has the same ini, tests folder and test_root.py, and gives test_root.py by path)."""
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    tests = pytester.mkdir("tests")
    (tests / "test_project.py").write_text("def test_project():\n    pass\n")
    pytester.makepyfile(test_root="def test_root():\n    pass\n")
    alone = pytester.runpytest_subprocess("--gpucheck", *RUN_OPTIONS, "--co", "-q")
    collected = alone.stdout.str()
    assert "test_project" not in collected and "test_root" not in collected
    assert "test_nvidia_gpu_on_pci_bus" in collected
    both = driverless_run.result
    both.stdout.fnmatch_lines(["*1 failed, 2 passed*"])


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("cli", "*--gpucheck-timeout must be a number of seconds (got 'soon' from --gpucheck-timeout)*"),
        ("env", "*--gpucheck-timeout must be a positive number of seconds (got '-3' from environment variable GPUCHECK_TIMEOUT)*"),
        ("ini", "*--gpucheck-timeout must be a positive number of seconds (got '0' from ini key gpucheck_timeout in *tox.ini)*"),
    ],
)
def test_bad_option_values_are_usage_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str, message: str
) -> None:
    args = ["--gpucheck", *RUN_OPTIONS]
    if how == "cli":
        args.append("--gpucheck-timeout=soon")
    elif how == "env":
        monkeypatch.setenv("GPUCHECK_TIMEOUT", "-3")
    else:
        pytester.makefile(".ini", tox="[pytest]\ngpucheck_timeout = 0\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_option_precedence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """Command line over environment over ini over default; the report says where each came from."""
    pytester.makeini("[pytest]\ngpucheck_timeout = 41\n")
    monkeypatch.setenv("GPUCHECK_TIMEOUT", "42")
    # The GPU stack alone (no TensorFlow to import): where a setting comes from does not depend on it.
    run = run_gpucheck("--gpucheck-timeout=43", "--gpucheck-framework=none")
    assert run.report["settings"]["timeout"] == {"value": 43.0, "source": "--gpucheck-timeout"}
    monkeypatch.delenv("GPUCHECK_TIMEOUT")
    run = run_gpucheck("--gpucheck-framework=none")
    assert run.report["settings"]["timeout"]["value"] == 41.0
    assert run.report["settings"]["timeout"]["source"].startswith("ini key gpucheck_timeout")


def test_junit_xml_carries_cause_and_remedy(driverless_run: GpucheckRun) -> None:
    assert driverless_run.path is not None
    xml = driverless_run.path / "junit.xml"
    result = driverless_run.result
    assert result.ret == 1
    root = ET.parse(xml).getroot()
    case = next(tc for tc in root.iter("testcase") if tc.get("name") == "test_nvidia_gpu_on_pci_bus")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["gpucheck.finding"] == "no-nvidia-gpu"
    assert "PCI" in (props["gpucheck.cause"] or "")
    assert "GPU" in (props["gpucheck.remedy"] or "")
    skipped = next(tc for tc in root.iter("testcase") if tc.get("name") == "test_libcuda_loads")
    assert {p.get("name"): p.get("value") for p in skipped.iter("property")} == {"gpucheck.blocked_by": "no-nvidia-gpu"}


def _processes_with_env(key: str, value: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"{key}={value}".encode() in env:
            pids.append(int(entry))
    return pids


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: A user's test module that is still being imported when the interrupt comes (collection overlaps the probes).
SLOW_TO_COLLECT = """
import pathlib, time
pathlib.Path("collecting").write_text("")
time.sleep(100)
"""


@pytest.mark.parametrize(
    ("signum", "collecting", "storm"),
    [(signal.SIGINT, False, False), (signal.SIGTERM, False, False), (signal.SIGINT, True, False),
     (signal.SIGTERM, False, True)],
    ids=["ctrl-c", "sigterm", "ctrl-c-while-collecting", "sigterm-then-more-signals-during-clean-up"],
)
def test_interrupt_writes_report_and_kills_probes(
    tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path], signum: signal.Signals, collecting: bool,
    storm: bool,
) -> None:
    """Ctrl-C, or the SIGTERM with which CI cancels a job, while cuInit hangs (while pytest still collects a
    user's module, too: pytest reports the end of collection on its way out, which must not wait for the
    probes): the report is still written (atomically, ``complete: false``), no probe child survives, and the
    probes gpucheck killed are recorded as cancelled, not as crashes (nor as finished)."""
    scenario = json.loads((Path(__file__).parent / "scenarios/stack/cuinit-hangs.json").read_text())
    machine = fake_machine(scenario)
    report = tmp_path / "out" / "report.json"
    paths = []
    if collecting:
        (tmp_path / "test_slow_to_collect.py").write_text(SLOW_TO_COLLECT)
        paths = ["test_slow_to_collect.py"]
    # faulthandler on: should pytest not end, SIGABRT makes it print where each of its threads is.
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--gpucheck", "--gpucheck-timeout=120", f"--gpucheck-json={report}",
         *RUN_OPTIONS, *paths],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        # A shell starts background jobs with SIGINT ignored and that is inherited: this test's own run may be
        # one (`pytest tests &`). The pytest under test gets the default, as a terminal's Ctrl-C finds it.
        preexec_fn=_default_sigint,
    )
    marker = str(machine / "scenario.cfg")
    deadline = time.monotonic() + 60
    # Wait until the probe children are running, then interrupt.
    while time.monotonic() < deadline and (
        len(_processes_with_env("GPUCHECK_FAKE_SCENARIO", marker)) < 3
        or (collecting and not (tmp_path / "collecting").exists())
    ):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signum)
    if storm:
        # CI sending SIGTERM again, a person pressing Ctrl-C over the clean-up: every 20 ms for 3 s, or until it ends.
        end = time.monotonic() + 3
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
            proc.send_signal(random.choice((signal.SIGTERM, signal.SIGINT)))
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        try:
            threads = sorted((p / "comm").read_text().strip() for p in Path(f"/proc/{proc.pid}/task").iterdir())
        except OSError as exc:
            threads = [f"unreadable: {exc}"]
        left = _processes_with_env("GPUCHECK_FAKE_SCENARIO", marker)
        proc.send_signal(signal.SIGABRT)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"pytest did not end after {signum.name}; threads {threads}, probe processes left {left}:\n{out.decode()}")
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out.decode()
    assert "Traceback" not in out.decode(), out.decode()
    data = json.loads(report.read_text())
    assert data["verdict"] == "not-accelerated"
    assert data["root_cause"]["id"] == "diagnosis-incomplete"
    assert data["complete"] is False
    evidence = data["root_cause"]["evidence"]
    # cuInit hangs in the cuda and framework children: gpucheck killed them; neither finished.
    assert {"cuda", "framework"} <= set(evidence["cancelled_probes"]), evidence
    assert not {"cuda", "framework"} & set(evidence["finished_probes"]), evidence
    for name, outcome in data["facts"].items():
        assert outcome["exit"]["status"] != "crashed", (name, outcome["exit"])
        if name in evidence["cancelled_probes"]:
            assert outcome["exit"]["status"] == "cancelled", (name, outcome["exit"])
    assert [p.name for p in report.parent.iterdir()] == ["report.json"], "no temporary file left behind"
    time.sleep(0.5)
    assert _processes_with_env("GPUCHECK_FAKE_SCENARIO", marker) == []


@needs_driverless_host
@pytest.mark.parametrize(
    "args",
    [("-k", "cpu"), ("-m", "gpu"), ("--benchmark-only",), ("-k", "test_diagnosis_completed")],
    ids=["k-deselects-every-check", "m-deselects-every-check", "benchmark-only-skips-them", "only-a-passing-check"],
)
def test_exit_status_is_never_0_unless_accelerated(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """CI gates on the exit status: with the built-in checks deselected or skipped, the verdict (here
    not-accelerated: no GPU) still decides it."""
    # Run under xdist, the run under test would think itself an xdist worker (pytest-benchmark then refuses
    # --benchmark-only).
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    report = pytester.path / "r.json"
    # The GPU stack alone is enough to be not-accelerated here (no GPU), without TensorFlow's import.
    result = pytester.runpytest_subprocess(
        "--gpucheck", "--gpucheck-framework=none", f"--gpucheck-json={report}", *RUN_OPTIONS, *args
    )
    assert json.loads(report.read_text())["verdict"] == "not-accelerated"
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()


def test_exit_status_of_a_run() -> None:
    """The exit-status table of docs/options.md, as the function that applies it."""
    from gpucheck.session import EXIT_REPORT_NOT_WRITTEN, exit_status

    class R:
        def __init__(self, verdict: str) -> None:
            self.verdict = verdict

    good, bad, degraded = R("accelerated"), R("not-accelerated"), R("degraded")
    assert exit_status(0, good, None) == 0  # type: ignore[arg-type]
    assert exit_status(0, bad, None) == 1  # type: ignore[arg-type]
    assert exit_status(0, degraded, None) == 1  # type: ignore[arg-type]
    assert exit_status(5, bad, None) == 1  # type: ignore[arg-type]
    assert exit_status(5, good, None) == 5  # type: ignore[arg-type]
    assert exit_status(1, good, None) == 1  # type: ignore[arg-type]
    for own in (2, 3, 4):
        assert exit_status(own, bad, "disk full") == own  # type: ignore[arg-type]
    assert exit_status(0, good, "disk full") == EXIT_REPORT_NOT_WRITTEN  # type: ignore[arg-type]


def test_skips_name_the_check_and_junit_has_the_verdict(driverless_run: GpucheckRun) -> None:
    """-rs names each check where it is (not the plugin's line), one line a check; the JUnit suite carries the
    verdict and the root cause as properties."""
    assert driverless_run.path is not None
    xml = driverless_run.path / "junit.xml"
    result = driverless_run.result
    out = result.stdout.str()
    assert "session.py" not in out and "decision.py" not in out
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert any("checks_host.py:" in ln and "blocked by no-nvidia-gpu" in ln for ln in skipped), skipped
    assert len(skipped) >= 20, skipped  # not folded into one "[30] ... blocked by" line
    suite = next(ET.parse(xml).getroot().iter("testsuite"))
    props = {p.get("name"): p.get("value") for p in suite.find("properties") or []}
    assert props["gpucheck.verdict"] == "not-accelerated"
    assert props["gpucheck.root_cause"] == "no-nvidia-gpu" and props["gpucheck.root_cause.layer"] == "hardware"
    case = next(tc for tc in ET.parse(xml).getroot().iter("testcase") if tc.get("name") == "test_libcuda_loads")
    skip = case.find("skipped")
    assert skip is not None and re.search(r"checks_driver\.py:\d+: blocked by no-nvidia-gpu$", skip.text or ""), skip


def test_junit_suite_properties_under_xdist(
    pytester: pytest.Pytester, run_gpucheck: Callable[..., GpucheckRun], fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """Under -n the tests run in workers, where pytest's record_testsuite_property records nothing
    (pytest#7767): the JUnit XML the controller writes still carries the verdict, the action and the root
    cause, each once, as the JSON report of the same run gives them."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra)")
    fake_machine(DRIVERLESS_HOST)
    xml = pytester.path / "junit.xml"
    run = run_gpucheck("--gpucheck-framework=none", "-n", "2", f"--junitxml={xml}")
    assert run.result.ret == 1, run.result.stdout.str()
    suite = next(ET.parse(xml).getroot().iter("testsuite"))
    props = [(p.get("name"), p.get("value")) for p in suite.find("properties") or []]
    rc = run.report["root_cause"]
    assert props == [
        ("gpucheck.verdict", run.report["verdict"]),
        ("gpucheck.action", run.report["action"]),
        ("gpucheck.root_cause", rc["id"]),
        ("gpucheck.root_cause.layer", rc["layer"]),
        ("gpucheck.root_cause.summary", rc["summary"]),
        ("gpucheck.root_cause.remedy", rc["remedy"]),
        ("gpucheck.root_cause.action", rc["action"]),
    ], props
    assert rc["id"] == "no-nvidia-gpu" and run.report["verdict"] == "not-accelerated"


def test_report_json_written_atomically_to_new_directory(
    run_gpucheck: Callable[..., GpucheckRun], pytester: pytest.Pytester
) -> None:
    """A run of its own: tests/test_docs_commands.py names it as the one that runs the README's command."""
    target = pytester.path / "deep" / "dir" / "r.json"
    result = pytester.runpytest_subprocess("--gpucheck", f"--gpucheck-json={target}", *RUN_OPTIONS)
    assert result.ret in (0, 1)
    data = json.loads(target.read_text())
    assert data["schema"] == "gpucheck-report/1"
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]


def test_unwritable_report_path_is_a_sentence(pytester: pytest.Pytester) -> None:
    (pytester.path / "afile").write_text("")
    result = pytester.runpytest_subprocess("--gpucheck", "--gpucheck-json=afile/r.json", *RUN_OPTIONS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpucheck-json cannot write the report to afile/r.json: */afile is not a directory*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_user_conftest_can_read_verdict(driverless_run: GpucheckRun) -> None:
    """The session plugin is reachable by name, for users' own hooks (``USER_CONFTEST``)."""
    assert driverless_run.path is not None
    report = driverless_run.path / "gpucheck-report.json"
    result = driverless_run.result
    verdict = json.loads(report.read_text())["verdict"]
    # The exact verdict ("not-accelerated" also matches a glob of *accelerated*), the one the report carries.
    assert verdict == "not-accelerated"
    assert f"USER-SEES {verdict}" in result.stdout.lines, result.stdout.str()


@needs_driverless_host
def test_gpu_stack_alone_on_this_host(pytester: pytest.Pytester, run_gpucheck: Callable[..., GpucheckRun]) -> None:
    """--gpucheck-framework=none: the same root cause, without importing TensorFlow anywhere."""
    run = run_gpucheck("--gpucheck-framework=none")
    assert run.result.ret == 1 and run.root_cause == "no-nvidia-gpu"
    assert run.report["facts"]["framework"] is None and run.report["facts"]["libraries"] is None
    assert run.report["settings"]["framework"] == {"value": "none", "source": "--gpucheck-framework"}
    run.result.stdout.fnmatch_lines(["gpucheck: no NVIDIA GPU;*TensorFlow: not diagnosed (--gpucheck-framework=none)"])
    bad = pytester.runpytest_subprocess("--gpucheck", "--gpucheck-framework=pytorch", *RUN_OPTIONS)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--gpucheck-framework must be one of tensorflow, torch, all, none (got 'pytorch' from --gpucheck-framework)*"])


def test_benchmarks_under_xdist_are_refused_with_a_sentence(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-benchmark disables itself under xdist: --gpucheck-benchmarks with -n would measure nothing without
    a word, so it is a usage error that says so (``pytest --gpucheck -n 2`` itself runs: tests/test_own_suites.py)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    result = pytester.runpytest_subprocess("--gpucheck", "--gpucheck-benchmarks", *RUN_OPTIONS, "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpucheck-benchmarks runs its benchmarks in one process: drop -n / --dist*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_without_junitxml_the_checks_still_run(pytester: pytest.Pytester) -> None:
    """The suite-property fixture is no error when the junitxml plugin is off."""
    result = pytester.runpytest_subprocess(
        "--gpucheck", "--gpucheck-framework=none", *RUN_OPTIONS, "-p", "no:junitxml"
    )
    assert result.ret in (0, 1)
    assert "fixture 'record_testsuite_property' not found" not in result.stdout.str()
    assert result.parseoutcomes().get("errors", 0) == 0, result.stdout.str()
