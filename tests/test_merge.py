"""Issue 16 (its fleet part): ``gpucheck merge`` of real reports, one per host, made by ``pytest --gpucheck
--gpucheck-json`` on fake machines of the NVML scenarios (--gpucheck-framework=none: a node's GPU health) and
on this host as it is; issue 36: each host's frameworks, from a PyTorch host (``gpucheck doctor --framework torch`` in
the torch venv) and a TensorFlow one (``pytest --gpucheck`` in this environment, on the driverless host view of
tests/test_plugin.py), both run on this host."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, SharedRuns, make_fake_machine
from tests.pyenvs import checkout_environment
from tests.test_plugin import driverless_gpucheck_run

SCENARIOS = Path(__file__).parent / "scenarios" / "nvml"


def gpucheck_merge(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucheck.cli", "merge", *map(str, args)], capture_output=True, text=True, timeout=60
    )


def host_report(report: dict[str, Any], host: str, path: Path) -> Path:
    """The report as that host wrote it (its name is what `platform.node()` gave there)."""
    report["environment"]["host"] = host
    path.write_text(json.dumps(report))
    return path


@pytest.fixture
def fleet(
    tmp_path: Path, fake_lib_cache: Path, monkeypatch: pytest.MonkeyPatch, run_gpucheck: Callable[..., GpucheckRun]
) -> list[Path]:
    out = []
    for i, name in enumerate(["h100-sxm-8gpu-node", "h100-sxm-8gpu-node", "gpu-missing-from-8gpu-node", "driver-not-loaded"]):
        scenario = json.loads((SCENARIOS / f"{name}.json").read_text())
        with monkeypatch.context() as m:
            make_fake_machine(scenario, tmp_path / f"machine-{i}", fake_lib_cache, m)
            run = run_gpucheck("--gpucheck-framework=none", *scenario.get("args", []))
        out.append(host_report(run.report, f"node-{i + 1:02d}", tmp_path / f"node-{i + 1:02d}.json"))
    return out


def merged_table(hosts: list[Path], *options: str | Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``gpucheck merge HOSTS OPTIONS`` of hosts not all accelerated (exit 1), and its table's rows by host."""
    done = gpucheck_merge(*hosts, *options)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["host", "verdict", "root", "cause", "GPUs", "driver", "frameworks", "key", "figures"]
    return done, {ln.split()[0]: ln for ln in lines[2:2 + len(hosts)]}


def test_merge_of_a_fleet(fleet: list[Path], tmp_path: Path) -> None:
    merged_json = tmp_path / "fleet.json"
    done, table = merged_table(fleet, "--json", merged_json)
    assert "accelerated" in table["node-01"] and "8x H100 80GB HBM3" in table["node-01"]
    assert "not-accelerated" in table["node-04"]
    merged = json.loads(merged_json.read_text())
    assert merged["schema"] == "gpucheck-fleet/1" and merged["accelerated"] == 2 and merged["not_accelerated"] == 2
    by_cause = {g["cause"]: g["hosts"] for g in merged["groups"]}
    assert by_cause["accelerated"] == ["node-01", "node-02"]
    assert len(by_cause) == 3, by_cause
    assert "2 of 4 hosts accelerated; not accelerated: node-03, node-04." in done.stdout
    # The healthy hosts alone: exit 0.
    assert gpucheck_merge(fleet[0], fleet[1]).returncode == 0


def _bad(tmp_path: Path) -> dict[str, tuple[list[str | Path], str]]:
    (tmp_path / "text.json").write_text("not json")
    (tmp_path / "bench.json").write_text(json.dumps({"benchmarks": [], "machine_info": {}}))
    return {
        "none": ([], "no report given"),
        "missing": ([tmp_path / "nope.json"], "is not a file"),
        "folder": ([tmp_path], "is a folder"),
        "not json": ([tmp_path / "text.json"], "is not JSON"),
        "not a report": ([tmp_path / "bench.json"], "is not a gpucheck report"),
    }


@pytest.mark.parametrize("case", ["none", "missing", "folder", "not json", "not a report"])
def test_unusable_input_exits_2_with_one_sentence(tmp_path: Path, case: str) -> None:
    args, expected = _bad(tmp_path)[case]
    done = gpucheck_merge(*args)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("gpucheck merge: ") and expected in line, line


@pytest.fixture
def drifted_fleet(
    tmp_path: Path, fake_lib_cache: Path, monkeypatch: pytest.MonkeyPatch, run_gpucheck: Callable[..., GpucheckRun]
) -> list[Path]:
    """Three HGX H100 nodes, one left on the 535 branch (CUDA 12.2) when the others moved to 570 (CUDA 12.8), and a
    node whose driver is not loaded (its versions not known)."""
    out = []
    healthy = json.loads((SCENARIOS / "h100-sxm-8gpu-node.json").read_text())
    old = json.loads(json.dumps(healthy))
    old["driver_version"] = old["host"]["module_version"] = "535.104.05"
    old["cuda"]["driver_version"] = 12020
    unloaded = json.loads((SCENARIOS / "driver-not-loaded.json").read_text())
    for i, scenario in enumerate([healthy, healthy, old, unloaded]):
        with monkeypatch.context() as m:
            make_fake_machine(scenario, tmp_path / f"machine-{i}", fake_lib_cache, m)
            run = run_gpucheck("--gpucheck-framework=none", *scenario.get("args", []))
        out.append(host_report(run.report, f"node-{i + 1:02d}", tmp_path / f"node-{i + 1:02d}.json"))
    return out


def test_merge_names_version_drift(drifted_fleet: list[Path], tmp_path: Path) -> None:
    merged_json = tmp_path / "fleet.json"
    done = gpucheck_merge(*drifted_fleet, "--json", merged_json)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Version drift (hosts that differ):" in done.stdout
    lines = done.stdout.splitlines()
    assert "  driver: 570.133.20 on node-01, node-02; 535.104.05 on node-03 (not known on node-04)" in lines, done.stdout
    # The node without its kernel module still has its user-space libcuda, which answers cuDriverGetVersion (12.4).
    assert "  CUDA (driver API): 12.8 on node-01, node-02; 12.2 on node-03; 12.4 on node-04" in lines, done.stdout
    # What they agree on is no drift: the same GPU model everywhere it is known, no TensorFlow diagnosed.
    assert not any(line.startswith(("  GPU model:", "  TensorFlow:")) for line in lines), done.stdout
    fleet = json.loads(merged_json.read_text())
    drift = {d["key"]: d for d in fleet["drift"]}
    assert set(drift) == {"driver", "cuda"}, drift
    assert drift["driver"]["values"] == [
        {"value": "570.133.20", "hosts": ["node-01", "node-02"]}, {"value": "535.104.05", "hosts": ["node-03"]},
    ]
    assert drift["driver"]["unknown"] == ["node-04"]
    hosts = {h["host"]: h for h in fleet["hosts"]}
    assert hosts["node-03"]["driver"] == "535.104.05" and hosts["node-03"]["cuda"] == "12.2"
    assert hosts["node-01"]["gpu_model"] == "NVIDIA H100 80GB HBM3"
    # The same drivers everywhere: nothing to name.
    same = gpucheck_merge(drifted_fleet[0], drifted_fleet[1])
    assert "drift" not in same.stdout and same.returncode == 0


def test_merge_names_each_hosts_frameworks_with_their_verdicts(
    torch_python: Path, gpucheck_shared: SharedRuns, tmp_path: Path
) -> None:
    """Two hosts' reports, each made by a real run on this host: ``gpucheck doctor --framework torch --json`` in a venv
    of PyTorch alone (which names its framework in its summary), and ``pytest --gpucheck`` of this environment
    (TensorFlow; tests/test_plugin.py's run of the driverless host, shared with its tests). The table's frameworks column names each host's frameworks, their versions and their own verdicts;
    a value with an escape sequence (a report edited by hand) reaches the terminal printable, as every value does."""
    made = tmp_path / "torch.json"
    done = subprocess.run(
        [str(torch_python), "-m", "gpucheck.cli", "doctor", "--framework", "torch", "--json", str(made)],
        env=checkout_environment(tmp_path / "site"), capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "framework PyTorch 2.13.0+cpu: not-accelerated (root cause: no-nvidia-gpu)"
    torch_report = json.loads(made.read_text())
    tensorflow = driverless_gpucheck_run(gpucheck_shared).report
    assert list(tensorflow["frameworks"]) == ["tensorflow"], tensorflow["frameworks"]
    edited = json.loads(json.dumps(tensorflow))
    edited["frameworks"]["tensorflow"]["title"] = "Tensor\x1b[31mFlow"
    newer = json.loads(json.dumps(torch_report))  # the same host a release of torch later, for the version drift
    newer["frameworks"]["torch"]["version"] = "2.14.1+cu130"
    hosts = [
        host_report(torch_report, "torch-node", tmp_path / "torch-node.json"),
        host_report(newer, "newer-node", tmp_path / "newer-node.json"),
        host_report(tensorflow, "tf-node", tmp_path / "tf-node.json"),
        host_report(edited, "edited-node", tmp_path / "edited-node.json"),
    ]
    fleet_json = tmp_path / "fleet.json"
    merged, rows = merged_table(hosts, "--json", fleet_json)
    tf_version = tensorflow["frameworks"]["tensorflow"]["version"]
    assert "PyTorch 2.13.0+cpu: not-accelerated (no-nvidia-gpu)" in rows["torch-node"], merged.stdout
    assert f"TensorFlow {tf_version}: not-accelerated (no-nvidia-gpu)" in rows["tf-node"], merged.stdout
    assert f"Tensor\\x1b[31mFlow {tf_version}: not-accelerated" in rows["edited-node"], merged.stdout
    assert "\x1b" not in merged.stdout
    # Each framework's version drift, TensorFlow's from its facts as before, PyTorch's from the frameworks.
    lines = merged.stdout.splitlines()
    assert "  PyTorch: 2.13.0+cpu on torch-node; 2.14.1+cu130 on newer-node (not known on tf-node, edited-node)" in lines
    assert not any(line.startswith("  TensorFlow:") for line in lines), merged.stdout
    fleet = {h["host"]: h for h in json.loads(fleet_json.read_text())["hosts"]}
    assert fleet["torch-node"]["frameworks"] == [
        {"name": "torch", "title": "PyTorch", "version": "2.13.0+cpu", "verdict": "not-accelerated", "root_cause": "no-nvidia-gpu"}
    ]


def test_real_gpu_machines_reports_from_before_and_after_the_frameworks() -> None:
    """The reports of `gpucheck doctor --framework=none --json` on real GPU machines (docs/gpu-runs; docs/measured.md):
    the H100's was written before reports had ``frameworks``, the H200's after, with none diagnosed. Both are read, and
    their frameworks cell says that none was diagnosed."""
    from gpucheck import merge

    runs = Path(__file__).resolve().parent.parent / "docs" / "gpu-runs"
    h100 = merge.read(str(runs / "h100-80gb-2026-11-27" / "doctor.json"))
    h200 = merge.read(str(runs / "h200-2026-11-27" / "doctor.json"))
    assert h100.gpu_model == "NVIDIA H100 80GB HBM3" and h100.verdict == "accelerated", h100
    assert h200.gpu_model is not None and "H200" in h200.gpu_model, h200
    assert h100.frameworks == [] and h200.frameworks == [] and merge.frameworks_text(h100.frameworks) == "-"


# --- in-process: what merge reads of a report, and what it makes of the fleet (tests/mutation/run_mutmut.py) --------
# Reports written as the schema (docs/report-schema.json) has them, with only the fields merge reads.


def report(verdict: str = "accelerated", host: str | None = "node-01", *, findings: list[dict[str, Any]] | None = None,
           root_cause: dict[str, Any] | None = None, facts: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": "gpucheck-report/1", "verdict": verdict, "root_cause": root_cause,
                           "findings": findings or [], "facts": facts or {}, **more}
    if host is not None:
        out["environment"] = {"host": host}
    return out


def fault(cause_id: str, severity: str = "blocker", layer: str = "health") -> dict[str, Any]:
    return {"id": cause_id, "severity": severity, "layer": layer, "summary": f"{cause_id} on GPU 0"}


H100 = "NVIDIA H100 80GB HBM3"


def facts(gpus: list[str] | None = None, *, module: str | None = None, nvml_driver: str | None = None,
          cuda: Any = None, nvml_cuda: Any = None, tf: str | None = None, libraries: list[dict[str, Any]] | None = None,
          build: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kernel": {"module_version": module},
        "nvml": {"facts": {"gpus": [{"name": n} for n in gpus or []], "driver_version": nvml_driver,
                           "cuda_driver_version": nvml_cuda}},
        "cuda": {"facts": {"driver_version": cuda}},
        "libraries": {"facts": {"libraries": libraries or []}},
        "framework": {"facts": {"version": tf, "build_info": build or {}}},
    }


def test_what_merge_reads_of_a_hosts_report() -> None:
    from gpucheck.merge import Host, _host

    rc = fault("gpu-lost", layer="visibility")
    h = _host("/r/node-07.json", report(
        "not-accelerated", "node-01", root_cause=rc,
        findings=[rc, fault("ecc-errors", "degraded"), fault("xid-recorded", "info"), fault("ecc-errors", "degraded"),
                  "not a finding", {"severity": "blocker"}],
        facts=facts([H100, H100, "NVIDIA A100-SXM4-80GB"], module="550.54.15", nvml_driver="535.0", cuda=12040,
                    nvml_cuda=12020, tf="2.16.1",
                    libraries=[{"key": "cudart", "version": "12.3.101", "loaded": True},
                               {"key": "cudnn", "version": "8.9.7", "loaded": False}],
                    build={"cuda_version": "12.2", "cudnn_version": "8"}),
        complete=False))
    assert h == Host(
        host="node-01", path="/r/node-07.json", verdict="not-accelerated", root_cause="gpu-lost",
        root_cause_summary="gpu-lost on GPU 0", also=["ecc-errors", "?"], gpus=[H100, H100, "NVIDIA A100-SXM4-80GB"],
        driver="550.54.15", tensorflow="2.16.1", complete=False, figures={}, cuda="12.4", cuda_runtime="12.3.101",
        cudnn="8", gpu_model=f"NVIDIA A100-SXM4-80GB + {H100}",
        # A report written before reports named their frameworks: TensorFlow's, from its facts, with no verdict of its own.
        frameworks=[{"name": "tensorflow", "title": "TensorFlow", "version": "2.16.1", "verdict": None, "root_cause": None}],
    )
    # Where the preferred source is silent, the other: NVML's driver and CUDA version, the framework's build.
    bare = _host("/r/node-07.json", report(host=None, facts=facts(nvml_driver="535.0", nvml_cuda=12020,
                                                                    build={"cuda_version": "12.2"})))
    assert (bare.host, bare.driver, bare.cuda, bare.cuda_runtime, bare.cudnn, bare.gpu_model, bare.complete) == (
        "node-07", "535.0", "12.2", "12.2", None, None, True)
    assert (bare.root_cause, bare.root_cause_summary, bare.also, bare.gpus) == (None, None, [], [])
    # CUDA's API version is a positive whole number: anything else is not known.
    for value in (0, -12040, True, "12040", 12040.0):
        assert _host("x.json", report(facts=facts(cuda=value))).cuda is None
    assert _host("x.json", report(facts=facts(cuda=11080))).cuda == "11.8"
    assert _host("x.json", report(facts=facts(cuda=12105))).cuda == "12.10"
    assert _host("x.json", report(facts=facts(cuda=13000))).cuda == "13.0"
    loaded = _host("x.json", report(facts=facts(libraries=[{"key": "cudnn", "version": "9.1.0", "loaded": True}],
                                                build={"cudnn_version": "8"})))
    assert loaded.cudnn == "9.1.0"  # the cuDNN the framework loads, before the one it was built with
    odd = _host("x.json", report(root_cause={"id": ["a"]}, verdict="not-accelerated"))
    assert odd.root_cause == "?"
    # Fields of other types than the schema's, or missing: read as not said.
    named = _host("x.json", report("not-accelerated", root_cause="gpu-lost", complete="yes"))  # type: ignore[arg-type]
    assert (named.root_cause, named.root_cause_summary, named.complete) == (None, None, False)
    bare_report = report()
    del bare_report["facts"]
    assert (_host("x.json", bare_report).gpus, _host("x.json", {**report(), "facts": [1]}).driver) == ([], None)
    # The key figures the run measured (a benchmark run's best matmul).
    matmul = {"performance": {"facts": {"benchmarks": [{"kind": "matmul", "extra_info": {"tflops": 99.5,
                                                                                          "device": "/GPU:0"}}]}}}
    assert _host("x.json", report(facts=matmul)).figures == {"matmul_tflops": 99.5, "matmul_device": "/GPU:0"}


def test_a_degraded_report_without_a_root_cause_names_its_lowest_degraded_finding() -> None:
    """Older reports named no root cause for a degraded verdict: it is the lowest degraded finding by the catalog's
    layers, the first of a layer on a tie."""
    from gpucheck.merge import _host

    findings = [fault("pcie-link-degraded", "degraded", "health"), fault("numerical-mismatch", "degraded", "framework"),
                fault("ecc-errors", "degraded", "health"), fault("no-nvidia-gpu", "info", "hardware"),
                fault("odd", "degraded", "no-such-layer")]
    h = _host("x.json", report("degraded", findings=findings))
    assert (h.root_cause, h.also) == ("numerical-mismatch", ["pcie-link-degraded", "ecc-errors", "odd"])
    assert _host("x.json", report("degraded", findings=[findings[0], findings[2]])).root_cause == "pcie-link-degraded"
    assert _host("x.json", report("degraded", findings=[fault("odd", "degraded", "no-such-layer")])).root_cause == "odd"
    assert _host("x.json", report("degraded")).root_cause is None
    assert _host("x.json", report("not-accelerated", findings=findings[:1])).root_cause is None


@pytest.mark.parametrize(("changes", "words"), [
    ({"verdict": "healthy"}, "x.json has no verdict"),
    ({"verdict": None}, "x.json has no verdict"),
    ({"schema": "gpucheck-report/2.1"}, "x.json is a report of schema gpucheck-report/2.1, a version this gpucheck "
                                        "does not read (it reads gpucheck-report/1 and its minor versions)"),
    ({"schema": "gpucheck-report/11"}, "a version this gpucheck does not read"),
    ({"schema": "gpucheck-report/1.x"}, "x.json is not a gpucheck report (its schema is 'gpucheck-report/1.x', "
                                        "not 'gpucheck-report/1')"),
    ({"schema": " gpucheck-report/1"}, "its schema is ' gpucheck-report/1'"),
    ({"schema": 1}, "x.json is not a gpucheck report (no \"schema\": \"gpucheck-report/1\"; made by --gpucheck-json)"),
])
def test_a_report_merge_cannot_read_is_one_sentence(changes: dict[str, Any], words: str) -> None:
    from gpucheck.merge import UnusableReport, _host

    with pytest.raises(UnusableReport) as caught:
        _host("x.json", {**report(), **changes})
    assert words in str(caught.value)
    with pytest.raises(UnusableReport, match="no \"schema\""):
        _host("x.json", ["not", "a", "report"])
    assert _host("x.json", {**report(), "schema": "gpucheck-report/1.999999"}).verdict == "accelerated"


def test_merge_counts_each_report_once_and_names_what_it_left_out(tmp_path: Path) -> None:
    from gpucheck.merge import UnusableReport, json_report, merge

    a = tmp_path / "a.json"
    a.write_text(json.dumps(report(host="node-01")))
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(dict(reversed(report(host="node-01").items())), indent=2))  # the same, other bytes
    b = tmp_path / "b.json"
    b.write_text(json.dumps(report("not-accelerated", "node-02", root_cause=fault("gpu-lost"))))
    fleet = tmp_path / "fleet.json"
    fleet.write_text(json.dumps(json_report(merge([str(a), str(b)]).hosts)))
    merged = merge([str(a), str(copy), str(b), str(fleet)])
    assert [h.host for h in merged.hosts] == ["node-01", "node-02"]
    assert merged.notes == [f"{copy} is the same report as {a}: counted once",
                            f"{fleet} is a merged fleet JSON (gpucheck merge --json), not a host's report: left out"]
    with pytest.raises(UnusableReport) as caught:
        merge([str(fleet), str(fleet)])
    assert str(caught.value) == (f"no host's report among the files given: {fleet} is a merged fleet JSON (gpucheck "
                                 f"merge --json), not a host's report: left out; {fleet} is the same report as {fleet}: "
                                 "counted once")
    with pytest.raises(UnusableReport) as caught:
        merge([])
    assert str(caught.value) == "no report given: gpucheck merge REPORT.json [REPORT.json ...]"
    # Twelve different reports of one name: one note, the first ten paths and "...".
    paths = []
    for i in range(12):
        p = tmp_path / f"n{i:02d}.json"
        p.write_text(json.dumps(report(host="node-01", duration=i)))
        paths.append(str(p))
    (note,) = merge(paths).notes
    assert note.startswith(f"12 different reports say they are host node-01 ({', '.join(paths[:10])} ...): ")
    assert merge(paths[:11]).notes[0].startswith(f"11 different reports say they are host node-01 ({', '.join(paths[:10])} ...): ")
    assert merge(paths[:10]).notes[0].startswith(f"10 different reports say they are host node-01 ({', '.join(paths[:10])}): ")
    assert merge(paths[:2]).notes == [f"2 different reports say they are host node-01 ({paths[0]}, {paths[1]}): each "
                                      "is a row of its own; check which is current"]


def test_the_fleet_groups_drift_and_exit_status() -> None:
    """Hosts by root cause (a degraded one without one by its first fault, the healthy as "accelerated"), the
    largest group first, then by name; drift only where two hosts report different values, the hosts that do not say
    listed apart; exit 0 only when every host is accelerated (docs/fleets.md)."""
    from gpucheck.merge import _host, drift, exit_status, groups, json_report

    hosts = [
        _host("1.json", report("accelerated", "n1", facts=facts([H100], module="550.54.15", tf="2.16.1"))),
        _host("2.json", report("not-accelerated", "n2", root_cause=fault("gpu-lost"),
                               facts=facts([H100], module="535.104.05", tf="2.16.1"))),
        _host("3.json", report("degraded", "n3", findings=[fault("xid-recorded", "info")],
                               facts=facts([H100], module="550.54.15"))),
        _host("4.json", report("accelerated", "n4", facts=facts([H100], module="550.54.15", tf="2.16.1"))),
        _host("5.json", report("not-accelerated", "n5", root_cause=fault("gpu-lost"), facts=facts([H100]))),
    ]
    assert [(k, [h.host for h in hs]) for k, hs in groups(hosts)] == [
        ("accelerated", ["n1", "n4"]), ("gpu-lost", ["n2", "n5"]), ("degraded", ["n3"])]
    degraded = _host("6.json", report("degraded", "n6", findings=[fault("ecc-errors", "degraded")]))
    assert degraded.root_cause == "ecc-errors" and groups([degraded])[0][0] == "ecc-errors"
    # A degraded report that names no root cause and lists no degraded finding: grouped by its first fault.
    odd = _host("7.json", report("degraded", "n7", findings=[fault("gpu-lost"), fault("ecc-errors", "blocker")]))
    assert (odd.root_cause, odd.also) == (None, ["gpu-lost", "ecc-errors"])
    assert groups([odd]) == [("gpu-lost", [odd])]
    alone = _host("8.json", report("not-accelerated", "n8", findings=[fault("gpu-lost")]))
    assert groups([alone]) == [("not-accelerated", [alone])]
    (driver,) = [d for d in drift(hosts) if d.key == "driver"]
    assert driver.values == [("550.54.15", ["n1", "n3", "n4"]), ("535.104.05", ["n2"])] and driver.unknown == ["n5"]
    assert "tensorflow" not in {d.key for d in drift(hosts)}  # 2.16.1 or not known: no two values
    assert [d.key for d in drift(hosts[:1] + hosts[3:4])] == []
    tie = drift([_host("a.json", report(host="a", facts=facts(module="2"))),
                 _host("b.json", report(host="b", facts=facts(module="1")))])
    assert tie[0].values == [("1", ["b"]), ("2", ["a"])]  # as many hosts each: by value
    assert exit_status(hosts) == 1 and exit_status([hosts[0], hosts[3]]) == 0 and exit_status([hosts[2]]) == 1
    doc = json_report(hosts, ["a note"])
    assert (doc["schema"], doc["notes"], doc["accelerated"], doc["not_accelerated"], doc["exit_status"]) == (
        "gpucheck-fleet/1", ["a note"], 2, 3, 1)
    assert doc["groups"][0] == {"cause": "accelerated", "hosts": ["n1", "n4"]}
    assert doc["drift"][0] == {"key": "driver", "name": "driver", "values": [
        {"value": "550.54.15", "hosts": ["n1", "n3", "n4"]}, {"value": "535.104.05", "hosts": ["n2"]}],
        "unknown": ["n5"]}
    assert doc["hosts"][1]["root_cause"] == "gpu-lost" and len(doc["hosts"]) == 5
