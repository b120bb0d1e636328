"""``gpucheck explain``: TensorFlow's own log lines become findings; harmless lines never do.

Logs are real: this host's TensorFlow 2.21 output (captured afresh here, and recorded against the fake
driver in tests/logs/), and lines from public reports (tests/logs/README.md names them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucheck import logs
from gpucheck.cli import main
from gpucheck.model import catalog

LOGS = Path(__file__).parent / "logs"
GPUCHECK = Path(sys.executable).with_name("gpucheck")


def _ids(lines: list[str]) -> dict[str, str]:
    return {f.id: f.severity.value for f in logs.findings_from_log(lines)}


def _read(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


@pytest.mark.parametrize(
    ("log", "expected", "root"),
    [
        ("tf-2.21-host-without-driver.log", {"cuda-runtime-missing": "blocker", "libcuda-missing": "blocker"}, "libcuda-missing"),
        ("tf-2.21-fake-driver-no-cudart.log", {"cuda-runtime-missing": "blocker"}, "cuda-runtime-missing"),
        ("tf-2.21-fake-driver-cuinit-804.log", {"cuda-runtime-missing": "blocker", "forward-compat-unsupported": "blocker"}, "forward-compat-unsupported"),
        ("tf-2.21-fake-driver-cuinit-35.log", {"cuda-runtime-missing": "blocker", "driver-too-old": "blocker"}, "driver-too-old"),
        ("tf-2.21-fake-driver-cuinit-999.log", {"cuda-runtime-missing": "blocker", "cuda-init-failed": "blocker"}, "cuda-init-failed"),
        ("tf-2.21-fake-gpu-cuda-malloc-async.log", {"memory-config-failed": "blocker"}, "memory-config-failed"),
        ("tf-2.21-fake-pascal-jit-with-cuda13-ptxas.log", {"xla-toolchain-missing": "degraded"}, None),
        ("public-jderobot-385-cudnn-cusolver-missing.log", {"cuda-runtime-missing": "blocker", "cudnn-missing": "blocker"}, "cuda-runtime-missing"),
        ("public-nvidia-tensorflow-110-nvjitlink-dependency.log", {"cuda-runtime-missing": "blocker"}, "cuda-runtime-missing"),
        ("public-tf-60913-cudnn-9.1-vs-9.3.log", {"cudnn-version-mismatch": "blocker"}, "cudnn-version-mismatch"),
        ("public-tf-36853-maxwell.log", {"gpu-arch-unsupported": "blocker"}, "gpu-arch-unsupported"),
        ("public-tf-62320-h100-ptx.log", {"ptx-jit-compilation": "info"}, None),
        ("public-tf-60790-libdevice.log", {"xla-toolchain-missing": "degraded"}, None),
        ("public-tf-22525-kernel-dso-mismatch.log", {"driver-library-mismatch": "blocker"}, "driver-library-mismatch"),
        ("public-tf-4349-forward-compat.log", {"forward-compat-unsupported": "blocker", "driver-library-mismatch": "blocker"}, "forward-compat-unsupported"),
        ("public-tf-70960-harmless-wsl.log", {}, None),
    ],
)
def test_logs(log: str, expected: dict[str, str], root: str | None) -> None:
    lines = _read(log)
    assert _ids(lines) == expected
    findings, _, rc = logs.explain(lines)
    assert (rc.id if rc else None) == root
    for f in findings:
        assert f.layer == catalog().causes[f.id].layer
        assert f.evidence["log_lines"] and f.cause and f.remedy


def test_dependency_named_by_the_loader_is_evidence() -> None:
    (f,) = logs.findings_from_log(_read("public-nvidia-tensorflow-110-nvjitlink-dependency.log"))
    assert f.evidence["libraries"] == ["libcusolver.so.11"]
    assert f.evidence["dlerror"].startswith("libnvJitLink.so.12: cannot open shared object file")


def test_cudnn_versions_fill_the_remedy() -> None:
    (f,) = logs.findings_from_log(_read("public-tf-60913-cudnn-9.1-vs-9.3.log"))
    assert "cuDNN 9.1.0" in f.summary and "nvidia-cudnn-cu12>=9.3.0" in f.remedy


@pytest.mark.parametrize(
    ("detail", "code", "cause"),
    [
        ("INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)", 303, "libcuda-missing"),
        ("CUDA_ERROR_NO_DEVICE", 100, "cuda-init-failed"),
        ("CUDA_ERROR_INSUFFICIENT_DRIVER", 35, "driver-too-old"),
        ("INTERNAL: CUDA error: Failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 803, "driver-library-mismatch"),
        ("CUDA_ERROR_UNKNOWN: unknown error", 999, "cuda-init-failed"),
    ],
)
def test_cuinit_codes(detail: str, code: int, cause: str) -> None:
    assert logs.cuinit_code(detail) == code
    (f,) = logs.findings_from_log([f"E0000 00:00:1.0  1 cuda_platform.cc:52] failed call to cuInit: {detail}"])
    assert f.id == cause and f.evidence["code"] == str(code)


HARMLESS = [
    "I0000 00:00:1795303214.794686    4876 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results",
    "I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.",
    "I tensorflow/stream_executor/cuda/cuda_gpu_executor.cc:981] successful NUMA node read from SysFS had negative value (-1), but there must be at least one NUMA node, so returning NUMA node zero",
    "I0000 00:00:1.0 1 gpu_executor.cc:1] Could not identify NUMA node of platform GPU id 0, defaulting to 0.  Your kernel may not have been built with NUMA support.",
    "E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:607] Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered",
    "E external/local_xla/xla/stream_executor/cuda/cuda_blas.cc:1515] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered",
    "W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not find TensorRT",
    "W dso_loader.cc:60] Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open shared object file: No such file or directory",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] Created device /job:localhost/replica:0/task:0/device:GPU:0 with 14626 MB memory:  -> device: 0, name: Tesla T4",
]


@pytest.mark.parametrize("line", HARMLESS)
def test_harmless_lines_never_produce_a_finding(line: str) -> None:
    result = logs.classify([line])
    assert len(result.matches) == 1 and result.matches[0].finding is None, result
    assert logs.findings_from_log([line]) == []


def test_every_pattern_is_data_with_a_known_cause() -> None:
    for p in logs.patterns():
        assert p.finding is None or p.finding in catalog().causes, p.id
        if p.finding is not None:
            assert p.severity in ("blocker", "degraded", "info") and p.cause and p.remedy, p.id
        else:
            assert p.severity == "harmless", p.id


def _host_lacks(library: str) -> bool:
    """Whether the loader finds ``library`` here, asked of a child process (no dlopen in the test process)."""
    code = f"import ctypes\ntry:\n    ctypes.CDLL({library!r})\nexcept OSError:\n    raise SystemExit(1)\n"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 1


def test_this_hosts_own_tensorflow_log(tmp_path: Path) -> None:
    """Acceptance: `gpucheck explain` of this host's own TensorFlow import log shows no blocker other than
    what the host really lacks (the driver's libcuda.so.1, the CUDA 12 runtime libcudart.so.12)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "GPUCHECK_FAKE_SCENARIO")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    proc = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(tf.config.list_physical_devices())"],
        capture_output=True, text=True, env=env, timeout=300, check=False, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    log = tmp_path / "tf.log"
    log.write_text(proc.stderr)
    assert "Could not find cuda drivers on your machine" in proc.stderr  # this TensorFlow's real words
    out = subprocess.run([str(GPUCHECK), "explain", "--json", str(log)], capture_output=True, text=True, check=False)
    findings = json.loads(out.stdout)["findings"]
    blockers = {f["id"] for f in findings if f["severity"] == "blocker"}
    lacks = {"libcuda-missing": _host_lacks("libcuda.so.1"), "cuda-runtime-missing": _host_lacks("libcudart.so.12")}
    assert blockers and all(lacks.get(b) for b in blockers), (blockers, lacks)
    assert out.returncode == 1


def test_cli_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(LOGS / "public-tf-60913-cudnn-9.1-vs-9.3.log")
    assert main(["explain", path]) == 1
    text = capsys.readouterr().out
    assert "cudnn-version-mismatch [libraries, blocker]" in text and "remedy:" in text and "cause:" in text
    assert main(["explain", "--json", path]) == 1
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["findings"]
    (f,) = data["findings"]
    assert set(f) >= {"id", "severity", "layer", "summary", "cause", "remedy", "evidence"}
    assert main(["explain", str(LOGS / "public-tf-70960-harmless-wsl.log")]) == 0
    assert "harmless, no action needed" in capsys.readouterr().out


def test_cli_reads_stdin() -> None:
    proc = subprocess.run(
        [str(GPUCHECK), "explain", "-"], input=(LOGS / "public-tf-36853-maxwell.log").read_text(),
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 1 and "gpu-arch-unsupported" in proc.stdout


def test_cli_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run([str(GPUCHECK), "explain", str(tmp_path / "nope.log")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "nope.log is not a file" in proc.stderr
