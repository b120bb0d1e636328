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
