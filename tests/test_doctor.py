"""Issue 24, point 5: ``gpucheck doctor``, the diagnosis without pytest, through its real command line: exit codes on
this driverless host and on fake machines, ``--json -`` against the published schema, ``--prometheus`` read back by
prometheus_client's own parser, bad input in one sentence, interrupts, a reader that goes away."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import validate_report
from gpucheck.diagnosis import Result
from gpucheck.doctor import _same_file, diagnosed, exit_status, gpu_label, prometheus_text, summary
from gpucheck.model import ACTIONS, UNREAD_KEY, Finding, Severity, finding
from gpucheck.model import verdict as verdict_of
from gpucheck.settings import OPTIONS
from tests.test_plugin import _processes_with_env

SCENARIOS = Path(__file__).parent / "scenarios"


def doctor(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucheck.cli", "doctor", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
    )


def scenario(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCENARIOS / f"{path}.json").read_text())
    return data


def doctor_args(s: dict[str, Any]) -> list[str]:
    """A scenario's pytest arguments (--gpucheck-X=...) as doctor's (--X=...)."""
    return [a.replace("--gpucheck-", "--", 1) for a in s.get("args", [])]


def metrics(path: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The textfile as prometheus_client's own parser reads it: samples by metric name."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_this_driverless_host(tmp_path: Path) -> None:
    """No GPU here: not usable (exit 1); the summary names the verdict, the root cause, its remedy and action, and
    nothing else is printed."""
    done = doctor("--framework=none", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "gpucheck doctor: not-accelerated (not usable); recommended action: reconfigure"
    assert lines[1].startswith("root cause: no-nvidia-gpu (hardware): ")
    assert lines[2].startswith("  remedy: Run on a machine with an NVIDIA GPU")
    assert lines[3] == "  action: reconfigure"
    assert all(line.startswith(("also: ", "root cause", "  ", "gpucheck doctor")) for line in lines)
    assert list(tmp_path.iterdir()) == [], "doctor writes nothing it was not asked to"


def test_json_to_stdout_follows_the_schema(tmp_path: Path) -> None:
    done = doctor("--framework=none", "--json", "-", "--timeout", "30", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)  # the JSON alone: no summary around it
    validate_report(report, "gpucheck doctor --json -")
    assert report["verdict"] == "not-accelerated" and report["complete"] is True
    assert report["root_cause"]["id"] == "no-nvidia-gpu"
    assert report["action"] == "reconfigure"
    assert report["checks"] == []
    # Where each setting came from, in doctor's words.
    assert report["settings"]["framework"] == {"value": "none", "source": "--framework"}
    assert report["settings"]["timeout"] == {"value": 30.0, "source": "--timeout"}
    assert report["facts"]["framework"] is None


def test_environment_variables_are_the_pytest_runs(tmp_path: Path) -> None:
    env = {**os.environ, "GPUCHECK_FRAMEWORK": "none", "GPUCHECK_TIMEOUT": "17"}
    report_path = tmp_path / "out" / "report.json"
    env["GPUCHECK_JSON"] = str(report_path)
    done = doctor(cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    report = json.loads(report_path.read_text())
    validate_report(report, report_path)
    assert report["settings"]["framework"] == {"value": "none", "source": "environment variable GPUCHECK_FRAMEWORK"}
    assert report["settings"]["timeout"]["value"] == 17.0
    # The command line wins over the environment, as for pytest.
    done = doctor("--json", "-", "--timeout=5", cwd=tmp_path, env=env)
    assert json.loads(done.stdout)["settings"]["timeout"] == {"value": 5.0, "source": "--timeout"}


def test_every_setting_is_an_option(tmp_path: Path) -> None:
    """The option table, not a copy of it: every setting as --NAME (--json is doctor's own, with '-')."""
    done = doctor("--help", cwd=tmp_path)
    assert done.returncode == 0
    for opt in OPTIONS:
        # The settings of a pytest run of one's own suite (the gpu marker, xdist workers) are not doctor's.
        assert (f"--{opt.name}" in done.stdout) is not opt.pytest_only, opt.name
    for own in ("--prometheus", "--fail-on", "--json PATH|-"):
        assert own in done.stdout


def test_prometheus_textfile_on_this_host(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    prom = out / "gpucheck.prom"
    before = time.time()
    done = doctor("--framework=none", "--prometheus", prom, "--json", out / "report.json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gpucheck.prom", "report.json"], "no temporary file left"
    m = metrics(prom)
    report = json.loads((out / "report.json").read_text())
    assert {s[0]["verdict"]: s[1] for s in m["gpucheck_verdict"]} == {
        "accelerated": 0.0, "degraded": 0.0, "not-accelerated": 1.0,
    }
    assert m["gpucheck_usable"] == [({}, 0.0)]
    assert m["gpucheck_complete"] == [({}, 1.0)]
    assert [labels["action"] for labels, value in m["gpucheck_action"] if value == 1.0] == ["reconfigure"]
    # One series per finding, labelled as the report has it.
    series = sorted((s[0]["id"], s[0]["severity"], s[0]["layer"], s[0]["action"], s[0]["gpu"]) for s in m["gpucheck_finding"])
    expected = sorted((f["id"], f["severity"], f["layer"], f["action"], "") for f in report["findings"])
    assert series == expected
    (stamp,) = m["gpucheck_last_run_timestamp_seconds"]
    assert before - 1 <= stamp[1] <= time.time()
    assert "gpucheck_figure" not in m, "no benchmark ran"


def test_healthy_h100_node_is_usable(tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    s = scenario("nvml/h100-sxm-8gpu-node")
    fake_machine(s)
    prom = tmp_path / "node.prom"
    done = doctor("--framework=none", *doctor_args(s), "--prometheus", prom, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "gpucheck doctor: accelerated (usable); recommended action: none"
    m = metrics(prom)
    assert m["gpucheck_usable"] == [({}, 1.0)]
    assert all(labels["severity"] == "info" for labels, _ in m.get("gpucheck_finding", []))
    assert "gpucheck_root_cause" not in m, "accelerated: no root cause (DESIGN.md, the report contract)"
    # The same node expected to have nine GPUs is not usable.
    done = doctor("--framework=none", "--expect-gpus=9", "--json", "-", cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout)["root_cause"]["id"] == "gpu-count-mismatch"


def test_degraded_node_and_fail_on(tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """Cards whose PCIe links trained below their maximum: degraded, not usable by default (as the pytest run), usable with
    --fail-on not-accelerated; the finding's series names its GPU."""
    s = scenario("nvml/gen4-x16-card-trained-at-x8")
    fake_machine(s)
    prom = tmp_path / "node.prom"
    done = doctor("--framework=none", *doctor_args(s), "--prometheus", prom, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("gpucheck doctor: degraded (not usable)")
    # A degraded verdict names its root cause (the lowest degraded finding: GPU 0's); GPU 1's own fault is its own line.
    assert done.stdout.splitlines()[1].startswith("root cause: pcie-link-degraded (health): GPU 0 ")
    assert "also, not caused by the root cause: pcie-link-degraded (health, degraded, action service-hardware)" in done.stdout
    assert metrics(prom)["gpucheck_root_cause"] == [
        ({"id": "pcie-link-degraded", "severity": "degraded", "layer": "health", "action": "service-hardware", "gpu": "0"},
         1.0)
    ]
    pcie = [labels for labels, _ in metrics(prom)["gpucheck_finding"] if labels["id"] == "pcie-link-degraded"]
    # GPU 0 behind a riser at x8, GPU 1 stuck at Gen1 (the scenario's source); GPU 2 is fine.
    assert sorted(pcie, key=lambda labels: labels["gpu"]) == [
        {"id": "pcie-link-degraded", "severity": "degraded", "layer": "health", "action": "service-hardware", "gpu": gpu}
        for gpu in ("0", "1")
    ]
    done = doctor("--framework=none", *doctor_args(s), "--fail-on", "not-accelerated", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("gpucheck doctor: degraded (usable)")


def test_ecc_node_asks_for_a_gpu_reset(tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    s = scenario("nvml/a100-uncorrectable-ecc-row-remap-pending")
    fake_machine(s)
    done = doctor("--framework=none", *doctor_args(s), "--json", "-", cwd=tmp_path)
    report = json.loads(done.stdout)
    validate_report(report)
    assert [f["action"] for f in report["findings"] if f["id"] == "ecc-errors"] == ["reset-gpu"]
    assert report["action"] == "reset-gpu"
    assert done.returncode == 1


BAD = {
    "not a number": (["--timeout=abc"], {}, "--timeout must be a number of seconds"),
    "environment": ([], {"GPUCHECK_TIMEOUT": "-1"}, "from environment variable GPUCHECK_TIMEOUT"),
    "unknown option": (["--bogus"], {}, "unrecognized arguments: --bogus"),
    "framework": (["--framework=pytorch"], {}, "--framework must be one of tensorflow, torch, all, none"),
    "no gpus": (["--expect-gpus=0"], {}, "--expect-gpus must be a number of GPUs of at least 1"),
    "fail-on": (["--fail-on=broken"], {}, "invalid choice: 'broken'"),
    "json is a folder": (["--json", "."], {}, "cannot write the report to .: it is a directory"),
    "prometheus is a folder": (["--prometheus", "."], {}, "--prometheus: cannot write the textfile to .: it is a directory"),
    "prometheus without a value": (["--prometheus"], {}, "expected one argument"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_sentence_and_exit_2(tmp_path: Path, case: str) -> None:
    args, env, words = BAD[case]
    started = time.monotonic()
    done = doctor("--framework=none", *args, cwd=tmp_path, env={**os.environ, **env})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("gpucheck doctor: ") and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60  # refused before any probe: not a timing assert, a hang guard


def test_prometheus_client_missing_is_one_sentence(tmp_path: Path) -> None:
    """Where prometheus_client is not installed (here: an import of it that fails, first on the path)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "prometheus_client.py").write_text("raise ImportError('No module named prometheus_client')\n")
    path = os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])
    done = doctor("--framework=none", "--prometheus", tmp_path / "x.prom", cwd=tmp_path,
                  env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert "--prometheus needs prometheus_client" in done.stderr
    assert not (tmp_path / "x.prom").exists()
    # Without --prometheus it is never imported: the diagnosis runs.
    assert doctor("--framework=none", cwd=tmp_path, env={**os.environ, "PYTHONPATH": path}).returncode == 1


def test_benchmarks_are_a_note_not_a_failure(tmp_path: Path) -> None:
    done = doctor("--framework=none", "--benchmarks", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("gpucheck doctor: note: --benchmarks is ignored by gpucheck doctor")
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_a_reader_that_goes_away(tmp_path: Path) -> None:
    """`gpucheck doctor | head -0`: no traceback, the status stands."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucheck.cli", "doctor", "--framework=none"], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1, err
    assert err == "", err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_interrupt_kills_the_probes_and_exits_2(
    tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path], signum: signal.Signals
) -> None:
    """cuInit hangs; a prolog's timeout sends SIGTERM (a person, Ctrl-C): exit 2, one sentence, the probes killed,
    the report written (complete: false) and valid."""
    machine = fake_machine(scenario("stack/cuinit-hangs"))
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucheck.cli", "doctor", "--timeout=120", "--json", str(report)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    marker = str(machine / "scenario.cfg")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_processes_with_env("GPUCHECK_FAKE_SCENARIO", marker)) < 3:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, out.decode() + err.decode()
    assert "Traceback" not in err.decode()
    assert f"stopped by {signum.name} before the diagnosis finished" in err.decode()
    data = json.loads(report.read_text())
    validate_report(data)
    assert data["complete"] is False and data["root_cause"]["id"] == "diagnosis-incomplete"
    assert {"cuda", "framework"} <= set(data["root_cause"]["evidence"]["cancelled_probes"])
    assert out.decode().startswith("gpucheck doctor: not-accelerated (not diagnosed)")
    time.sleep(0.5)
    assert _processes_with_env("GPUCHECK_FAKE_SCENARIO", marker) == []


# --- the node's verdict, in-process (tests/mutation/run_mutmut.py runs these) ----------------------------------------
# doctor's own functions over results built by hand: the exit status (docs/doctor.md: 0 usable, 1 not usable, 2 not
# diagnosed), the Prometheus textfile read back by prometheus_client's parser, the summary's first lines.


def _f(cause_id: str, severity: str, subject: str | None = None, **evidence: Any) -> Finding:
    return finding(cause_id, Severity(severity), summary=f"{cause_id} summary", cause="c", remedy="r",
                   evidence=dict(evidence), subject=subject)


LOST = _f("gpu-lost", "blocker", "GPU-3")
ECC = _f("ecc-errors", "degraded", "GPU-1")
NOTE = _f("xid-recorded", "info", "GPU-0")
UNREAD = _f("records-unread", "degraded", **{UNREAD_KEY: "kernel log"})


def _result(*findings: Finding, complete: bool = True) -> Result:
    rc = next((f for f in findings if f.severity is Severity.BLOCKER), None) or next(
        (f for f in findings if f.severity is Severity.DEGRADED and UNREAD_KEY not in f.evidence), None) or next(
        (f for f in findings if f.severity is Severity.DEGRADED), None)
    return Result(None, {}, findings, rc, verdict_of(list(findings)), (), complete)


@pytest.mark.parametrize(("findings", "fail_on", "complete", "interrupted", "status"), [
    ((), "degraded", True, None, 0),
    ((NOTE,), "degraded", True, None, 0),
    ((ECC,), "degraded", True, None, 1),
    ((ECC,), "not-accelerated", True, None, 0),
    ((LOST, ECC), "not-accelerated", True, None, 1),
    ((UNREAD,), "degraded", True, None, 2),           # a source not read to its end: not known is not healthy
    ((UNREAD,), "not-accelerated", True, None, 2),
    ((UNREAD, ECC), "degraded", True, None, 1),        # something else already makes the node not usable
    ((UNREAD, ECC), "not-accelerated", True, None, 2),
    ((UNREAD, LOST), "not-accelerated", True, None, 1),
    ((), "degraded", False, None, 2),                  # a probe did not report
    ((LOST,), "degraded", False, None, 2),
    ((), "degraded", True, "SIGTERM", 2),
])
def test_doctors_exit_status_is_usable_not_usable_or_not_diagnosed(
    findings: tuple[Finding, ...], fail_on: str, complete: bool, interrupted: str | None, status: int,
) -> None:
    result = _result(*findings, complete=complete)
    assert exit_status(result, fail_on, interrupted) == status
    assert diagnosed(result) is (complete and UNREAD not in findings)
    # The textfile agrees: usable only where the exit status is 0, complete only where the node was diagnosed.
    if interrupted is not None:
        return  # the summary and textfile of an interrupted run are those of the abandoned diagnosis (incomplete)
    metrics = _metrics(prometheus_text(result, fail_on, 1_700_000_000.0, 12.34567))
    assert metrics["gpucheck_usable"][()] == (1.0 if status == 0 else 0.0)
    assert metrics["gpucheck_complete"][()] == (1.0 if diagnosed(result) else 0.0)
    line = summary(result, fail_on, interrupted)[0]
    said = "usable" if status == 0 else "not usable" if status == 1 else "not diagnosed"
    assert line.startswith(f"gpucheck doctor: {result.verdict} ({said}); recommended action: ")


def _metrics(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_the_prometheus_textfile_names_the_verdict_action_findings_and_root_cause() -> None:
    result = _result(LOST, ECC, NOTE)
    m = _metrics(prometheus_text(result, "degraded", 1_700_000_000.0, 12.34567))
    assert m["gpucheck_verdict"] == {(("verdict", "accelerated"),): 0.0, (("verdict", "degraded"),): 0.0,
                                     (("verdict", "not-accelerated"),): 1.0}
    assert m["gpucheck_action"][(("action", "reboot"),)] == 1.0
    assert sum(m["gpucheck_action"].values()) == 1.0 and len(m["gpucheck_action"]) == len(ACTIONS)
    assert m["gpucheck_action_level"][()] == ACTIONS.index("reboot")
    assert set(m["gpucheck_finding"]) == {
        (("action", f.action), ("gpu", f.subject.removeprefix("GPU-") if f.subject else ""), ("id", f.id),
         ("layer", f.layer), ("severity", f.severity.value))
        for f in (LOST, ECC, NOTE)
    }
    assert set(m["gpucheck_finding"].values()) == {1.0}
    assert m["gpucheck_root_cause"] == {(("action", "reboot"), ("gpu", "3"), ("id", "gpu-lost"),
                                         ("layer", "visibility"), ("severity", "blocker")): 1.0}
    assert m["gpucheck_last_run_timestamp_seconds"][()] == 1_700_000_000.0
    assert m["gpucheck_run_duration_seconds"][()] == 12.346
    healthy = _metrics(prometheus_text(_result(NOTE), "degraded", 0.0, 0.0))
    assert healthy.get("gpucheck_root_cause", {}) == {} and healthy["gpucheck_action"][(("action", "none"),)] == 1.0
    assert healthy["gpucheck_verdict"][(("verdict", "accelerated"),)] == 1.0 and "gpucheck_figure" not in healthy
    # The run's key figures where it measured them (a benchmark run's best matmul); a figure that is no number is not one.
    matmul = {"performance": {"facts": {"benchmarks": [
        {"kind": "matmul", "extra_info": {"tflops": 512.25, "device": "/GPU:0"}},
        {"kind": "matmul", "extra_info": {"tflops": 12.5, "device": "/GPU:1"}}]}}}
    measured = Result(None, matmul, (NOTE,), None, "accelerated", (), True)
    figures = _metrics(prometheus_text(measured, "degraded", 0.0, 0.0))["gpucheck_figure"]
    assert figures == {(("name", "matmul_tflops"),): 512.25}
    assert gpu_label(_f("xid-recorded", "info", "NVSwitch 0000:04:00.0")) == "" and gpu_label(NOTE) == "0"
    assert gpu_label(_f("xid-recorded", "info", "GPU-12x")) == "" and gpu_label(_f("xid-recorded", "info")) == ""


def test_the_textfiles_metrics_say_what_they_are() -> None:
    """Each metric's HELP line, as node_exporter passes it on: what 1 means, the verdicts that make the node not usable
    under ``--fail-on``, the actions' levels in order."""
    from prometheus_client.parser import text_string_to_metric_families

    helps = {f.name: f.documentation for f in text_string_to_metric_families(
        prometheus_text(_result(LOST), "degraded", 0.0, 0.0))}
    assert helps["gpucheck_verdict"] == "1 for the diagnosis's verdict, 0 for the others"
    assert helps["gpucheck_usable"] == "1 when the node is usable (not degraded nor not-accelerated)"
    assert helps["gpucheck_complete"] == ("1 when every probe reported before the verdict and read its sources to their "
                                          "end")
    assert helps["gpucheck_action"] == "1 for the most severe recommended action of the findings, 0 for the others"
    assert helps["gpucheck_action_level"] == "the most severe recommended action as a number: " + ", ".join(
        f"{i} {a}" for i, a in enumerate(ACTIONS))
    assert helps["gpucheck_last_run_timestamp_seconds"] == "when the diagnosis started (Unix time)"
    assert helps["gpucheck_run_duration_seconds"] == "how long the diagnosis took"
    assert helps["gpucheck_finding"] == "1 for each finding of the diagnosis (info findings are notes)"
    assert helps["gpucheck_root_cause"] == "1 for the root cause the report names (none when the verdict is accelerated)"
    lenient = {f.name: f.documentation for f in text_string_to_metric_families(
        prometheus_text(_result(LOST), "not-accelerated", 0.0, 0.0))}
    assert lenient["gpucheck_usable"] == "1 when the node is usable (not not-accelerated)"
    measured = Result(None, {"performance": {"facts": {"benchmarks": [{"kind": "matmul", "extra_info": {"tflops": 1}}]}}},
                      (), None, "accelerated", (), True)
    figure = {f.name: f.documentation for f in text_string_to_metric_families(
        prometheus_text(measured, "degraded", 0.0, 0.0))}["gpucheck_figure"]
    assert figure == "a key figure the run measured (matmul_tflops, allreduce_latency_ms, ...)"


def test_the_summary_names_the_root_cause_and_each_other_fault() -> None:
    from gpucheck.report import root_cause_lines

    # A degraded root cause of the whole machine and another fault of its layer: that one may be its consequence.
    link = _f("pcie-link-degraded", "degraded")
    lines = summary(_result(link, _f("ecc-errors", "degraded")), "degraded", None)
    assert lines[1:-1] == root_cause_lines(link, full=False) != root_cause_lines(link, full=True)
    assert lines[-1] == "also: ecc-errors (health, degraded, action reset-gpu): ecc-errors summary"
    lines = summary(_result(LOST, ECC), "degraded", "SIGTERM")
    assert lines[0] == "gpucheck doctor: not-accelerated (not usable); recommended action: reboot"
    assert lines[1] == "stopped by SIGTERM before the diagnosis finished; the probes were stopped"
    assert any("gpu-lost" in line for line in lines[2:-1])
    # ECC on GPU-1 cannot come from GPU-3 falling off the bus: said to be its own.
    assert lines[-1] == ("also, not caused by the root cause: ecc-errors (health, degraded, action reset-gpu): "
                         "ecc-errors summary")
    assert summary(_result(NOTE), "degraded", None) == [
        "gpucheck doctor: accelerated (usable); recommended action: none"]
    assert summary(_result(NOTE, complete=False), "degraded", None)[0].startswith("gpucheck doctor: accelerated (not "
                                                                                  "diagnosed)")


def test_one_file_for_both_outputs_is_the_same_file(tmp_path: Path) -> None:
    """--json and --prometheus may not end in one file: standard output twice, one path, a path and a link to it."""
    report = tmp_path / "r.json"
    (tmp_path / "link.json").symlink_to(report)
    assert _same_file(str(report), str(tmp_path / "link.json"))  # a new file, and a link to it
    report.write_text("{}")
    assert _same_file("-", "-") and not _same_file("-", str(report)) and not _same_file(str(report), "-")
    assert _same_file(str(report), str(tmp_path / "." / "r.json"))
    assert _same_file(str(report), str(tmp_path / "link.json"))
    assert not _same_file(str(report), str(tmp_path / "other.prom"))
    assert not _same_file("/dev/null", "/dev/null")  # a device takes both
    assert _same_file(str(tmp_path / "new.txt"), str(tmp_path / "new.txt"))  # a file not there yet, named twice
    assert not _same_file("-", str(Path("-").absolute()))  # standard output is not a file named "-"
    assert not _same_file(str(tmp_path), str(tmp_path))  # a folder takes neither (each is refused on its own)
