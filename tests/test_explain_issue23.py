"""Issue 23, explain: the log families `gpucheck explain` did not name, on real lines from public reports
(tests/logs/issue23/INDEX.json names each report and the cause its thread established). The command line on
what people hand it is tests/test_explain_cli.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucheck import logs
from gpucheck.model import Severity, catalog

LOGS = Path(__file__).parent / "logs"
ISSUE23 = LOGS / "issue23"
ENTRIES: list[dict[str, Any]] = json.loads((ISSUE23 / "INDEX.json").read_text(encoding="utf-8"))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _faults(findings: list[Any]) -> list[str]:
    return [f.id for f in findings if f.severity is not Severity.INFO]


def test_every_log_is_indexed_with_its_thread() -> None:
    files = {p.name for p in ISSUE23.glob("*.log")}
    assert files == {e["file"] for e in ENTRIES}
    assert all(e["source"].startswith("https://github.com/") and e["where"] for e in ENTRIES)
    # Each family of the issue, from more than one report where the reports exist.
    families = {
        "bare library paste": ("tf-39132", "tf-45200", "resmico-26", "fnsflm-23"),
        "placement from a traceback": ("models-4548", "tf-22476", "ctrl-22", "deepupe-63", "fdscs-9", "tflite-micro-1566", "tf-8093"),
        "NVML and driver versions": ("tf-22718", "tinygrad-47"),
        "ptxas's search": ("tf-39716", "xla-5932"),
        "device attribute 13": ("tf-28582", "tf-37186"),
    }
    for family, prefixes in families.items():
        found = [e for e in ENTRIES if e["file"].startswith(prefixes)]
        assert len(found) == len(prefixes) and all(e["expected"] for e in found), family


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_each_log_gets_its_cause(entry: dict[str, Any]) -> None:
    findings, _classification, rc = logs.explain(_lines(ISSUE23 / entry["file"]))
    expected: list[str] = entry["expected"]
    faults = _faults(findings)
    if expected:
        assert set(expected) <= set(faults), (faults, entry["note"])
        # The root cause (the lowest blocker) is the one the thread found; a log of a degradation has none.
        blockers = [f for f in findings if f.severity is Severity.BLOCKER]
        assert (rc.id if rc else None) == (expected[0] if blockers else None), (faults, entry["note"])
        assert blockers or faults[0] == expected[0], (faults, entry["note"])
    else:
        assert not [f.id for f in findings if f.severity is Severity.BLOCKER], (faults, entry["note"])
    for absent in entry.get("absent", []):
        assert absent not in faults, (faults, entry["note"])
    for f in findings:
        assert f.layer == catalog().causes[f.id].layer
        assert f.evidence["log_lines"] and f.summary and f.cause and f.remedy
        for text in (f.summary, f.cause, f.remedy):
            assert "{" not in text or "`" in text, (f.id, text)  # every placeholder filled


def test_benign_logs_name_nothing() -> None:
    benign = [e for e in ENTRIES if e.get("benign")]
    assert benign
    for e in benign:
        findings, _classification, _rc = logs.explain(_lines(ISSUE23 / e["file"]))
        assert findings == [], e["file"]


@pytest.mark.parametrize(
    ("log", "library", "finding_id"),
    [
        ("tf-39132-bare-libcudart-10.1.log", "libcudart.so.10.1", "cuda-runtime-missing"),
        ("fnsflm-23-bare-libcudart-html-quotes.log", "libcudart.so.10.1", "cuda-runtime-missing"),
        ("tf-45200-bare-libcudnn-8.log", "libcudnn.so.8", "cudnn-missing"),
        ("resmico-26-bare-libcudnn-8-double-quotes.log", "libcudnn.so.8", "cudnn-missing"),
    ],
)
def test_a_bare_paste_names_its_library(log: str, library: str, finding_id: str) -> None:
    (f,) = logs.findings_from_log(_lines(ISSUE23 / log))
    assert f.id == finding_id and f.evidence["libraries"] == [library]
    assert "dlerror" not in f.evidence and "does not show the loader's reason" in f.cause


def test_a_bare_paste_gets_its_eras_remedy() -> None:
    """libcudart.so.10.1 alone says TensorFlow 2.1 to 2.3: CUDA 10.1, not pip's tensorflow[and-cuda]."""
    (f,) = logs.findings_from_log(_lines(ISSUE23 / "tf-39132-bare-libcudart-10.1.log"))
    assert f.evidence["era"]["cuda"] == "10.1"
    assert "CUDA 10.1" in f.remedy and "and-cuda" not in f.remedy


def test_no_gpu_registered_is_told_from_a_kernel_missing_on_the_gpu() -> None:
    """'Registered devices: [CPU]' (or only XLA's devices) means TensorFlow registered no GPU: the framework
    layer, below the placement error it causes; with a GPU registered, the op's kernel is what is missing."""
    registered = logs.findings_from_log(_lines(ISSUE23 / "ctrl-22-no-opkernel-no-registered-kernels.log"))
    assert [f.id for f in registered] == ["placement-failed"]
    assert registered[0].evidence["op"] == "CrossReplicaSum"
    xla_only = logs.explain(_lines(ISSUE23 / "fdscs-9-no-opkernel-xla-gpu-only.log"))
    assert xla_only[2] is not None and xla_only[2].id == "framework-gpu-init-failed"


def test_nvml_versions_that_differ_on_linux_are_a_mismatch_not_under_wsl() -> None:
    (f,) = logs.findings_from_log(_lines(ISSUE23 / "tf-22718-nvidia-smi-352-driver-384.log"))
    assert f.id == "driver-library-mismatch" and (f.evidence["nvml"], f.evidence["driver"]) == ("352.63", "384.130")
    # The cuInit failure beside it is that mismatch's consequence, not a cause of its own.
    assert "cuda-init-failed" not in f.evidence["patterns"]
    for log in ("wsl-11277-nvidia-smi-wsl-driver-differs-benign.log", "wsl-11589-nvidia-smi-wsl-two-part-versions-benign.log"):
        classified = logs.classify(_lines(ISSUE23 / log))
        headers = [m for m in classified.matches if m.pattern.id.startswith("nvidia-smi")]
        assert [m.pattern.id for m in headers] == ["nvidia-smi-header"] and headers[0].finding is None, log


def test_a_legacy_driver_beside_cuinit_unknown_is_named_too_old() -> None:
    """tensorflow#7653: CUDA_ERROR_UNKNOWN beside driver 340.101, older than CUDA 7.0 (that of the first
    TensorFlow releases) needs. The root cause its history entry gives stays; the driver is named beside it."""
    findings, _classification, rc = logs.explain(_lines(LOGS / "history" / "tf-7653-cuinit-unknown.log"))
    assert rc is not None and rc.id == "cuda-init-failed"
    (old,) = [f for f in findings if f.id == "driver-too-old"]
    assert old.severity is Severity.BLOCKER and old.layer == "compatibility"
    assert (old.evidence["driver_version"], old.evidence["required_driver"]) == ("340.101.0", "346.46")
    # A cuInit failure beside a driver new enough for its TensorFlow names no driver too old.
    others = logs.findings_from_log(_lines(ISSUE23 / "tf-24243-cuinit-unknown-same-versions.log"))
    assert [f.id for f in others] == ["cuda-init-failed"]
    newer = logs.findings_from_log(_lines(LOGS / "history" / "tf-62494-cuinit-no-device.log"))
    assert "driver-too-old" not in [f.id for f in newer]


def test_ptxas_search_is_the_evidence() -> None:
    """XLA's "Looking for ptxas at" lines say where it looked; a candidate under bin/bin/ cannot exist."""
    (f,) = logs.findings_from_log(_lines(ISSUE23 / "tf-39716-ptxas-bin-bin.log"))
    assert f.id == "xla-toolchain-missing" and f.severity is Severity.DEGRADED
    assert f.evidence["ptxas_looked_at"] == ["/usr/local/cuda-10.1/bin/bin/ptxas", "/usr/local/cuda/bin/ptxas"]
    assert f.evidence["ptxas_used"] == "/usr/local/cuda/bin/ptxas"
    assert "--xla_gpu_cuda_data_dir=/usr/local/cuda-10.1`" in f.remedy and "CUDA 10.1" in f.remedy
    (path_ptxas,) = logs.findings_from_log(_lines(ISSUE23 / "xla-5932-used-ptxas-too-old-h800.log"))
    assert path_ptxas.evidence["ptxas_used"] == "ptxas" and "first one on PATH" in path_ptxas.cause


def test_device_attribute_failure_names_the_attribute() -> None:
    (f,) = logs.findings_from_log(_lines(ISSUE23 / "tf-28582-device-attribute-13.log"))
    assert f.id == "cuda-init-failed"
    assert (f.evidence["attribute"], f.evidence["device"]) == ("13", "0")
    assert f.evidence["detail"].startswith("CUDA_ERROR_UNKNOWN")
