"""``nvml-missing`` is a blocker only where NVML explains why TensorFlow lists no GPU.

TensorFlow 2.21 calls nvmlInit_v2 right after a successful cuInit and counts no device when it fails
(read off the wheel; shown through the full path by tests/scenarios/cuda/h100-fresh-ci-container.json
and its controls with libnvidia-ml). These table-driven cases check that nothing else that explains an
empty device list is blamed on NVML: an older TensorFlow (not checked, so not claimed), a listing that
raised, a failed cuInit, a driver of an older CUDA major, a library TensorFlow dlopens that does not load.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucheck.facts import (
    ChildExit,
    CudaCall,
    CudaDriverFacts,
    Facts,
    HardwareFacts,
    KernelFacts,
    LibraryLoad,
    NvmlFacts,
    ProbeOutcome,
    VisibilityFacts,
)
from gpucheck.frameworks.tensorflow.facts import CudaLibrary, FrameworkFacts, LibrariesFacts
from gpucheck.rules.driver import driver_rules
from gpucheck.settings import Settings
from tests.factsbuild import make_facts, replace_facts

OK_EXIT = ChildExit("ok", 0, None, 1.0, (), "write facts", None)
LIBCUDA = LibraryLoad("libcuda.so.1", True, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", None)
NO_NVML = LibraryLoad(
    "libnvidia-ml.so.1", False, None, "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
)


def _library(soname: str, loaded: bool = True) -> CudaLibrary:
    return CudaLibrary(
        soname.split(".")[0], soname, None, None, True, f"/x/{soname}" if loaded else None, "LD_LIBRARY_PATH",
        loaded, None if loaded else f"{soname}: cannot open shared object file", None, None,
    )


def machine(
    tf_version: str = "2.21.0",
    list_error: str | None = None,
    cuinit: int = 0,
    driver_cuda: int = 12040,
    cudart_loads: bool = True,
    nvml: LibraryLoad = NO_NVML,
    nvml_init: CudaCall | None = None,
) -> Facts:
    libs = LibrariesFacts(
        None, tf_version, {}, None, True, {}, (), (_library("libcudart.so.12", cudart_loads), _library("libcudnn.so.9")),
        None, None, None,
    )
    return make_facts(
        hardware=HardwareFacts("/sys/bus/pci/devices", True, None, 6, False, (), ()),
        kernel=KernelFacts("/proc/driver/nvidia/version", None, "550.54.15", None, (), True, ()),
        visibility=VisibilityFacts(None, None, None, (), False, None, None, ()),
        cuda=ProbeOutcome(
            "cuda", OK_EXIT, CudaDriverFacts(LIBCUDA, CudaCall("cuInit", cuinit, None, None), driver_cuda, 2)
        ),
        nvml=ProbeOutcome("nvml", OK_EXIT, NvmlFacts(nvml, nvml_init, None, None)),
        framework=ProbeOutcome(
            "framework",
            OK_EXIT,
            FrameworkFacts(True, None, tf_version, None, {"cuda_version": "12.5.1"}, True, (), (), list_error),
        ),
        libraries=ProbeOutcome("libraries", OK_EXIT, libs),
    )


def nvml_finding(facts: Facts, monkeypatch: pytest.MonkeyPatch, capabilities: str | None = None) -> Any:
    """The rule reads the environment as a fact (``Facts.environment``), never ``os.environ``: the process's
    own variable is set to something else to show it."""
    monkeypatch.setenv("NVIDIA_DRIVER_CAPABILITIES", "compute")
    facts = replace_facts(facts, environment={"NVIDIA_DRIVER_CAPABILITIES": capabilities})
    return next((f for f in driver_rules(facts, Settings()) if f.id == "nvml-missing"), None)


def test_tensorflow_2_21_blind_without_nvml_is_a_blocker(monkeypatch: pytest.MonkeyPatch) -> None:
    f = nvml_finding(machine(), monkeypatch, capabilities="compute")
    assert f is not None and f.severity.value == "blocker"
    assert "TensorFlow 2.21.0 registers no GPU without it" in f.summary and "2 GPUs" in f.summary
    assert "nvmlInit_v2" in f.cause and "NVIDIA_DRIVER_CAPABILITIES=compute leaves out `utility`" in f.cause
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in f.remedy
    assert f.evidence["cuda_devices"] == 2 and f.evidence["tensorflow_gpus"] == 0


@pytest.mark.parametrize("capabilities", ["", "compute,utility", "all", None])
def test_capabilities_that_include_nvml_are_not_blamed(monkeypatch: pytest.MonkeyPatch, capabilities: str | None) -> None:
    """Empty means the toolkit's default (compute,utility)."""
    f = nvml_finding(machine(), monkeypatch, capabilities=capabilities)
    assert f is not None and f.severity.value == "blocker"
    assert "leaves out" not in f.cause and "compute,utility" not in f.remedy


@pytest.mark.parametrize(
    ("why", "facts"),
    [
        ("an older TensorFlow, whose behaviour was not checked", machine(tf_version="2.20.0")),
        ("the listing raised", machine(list_error="InternalError: something else")),
        ("cuInit failed", machine(cuinit=999)),
        ("a CUDA 11 driver under a CUDA 12 build", machine(driver_cuda=11080)),
        ("the CUDA runtime does not load", machine(cudart_loads=False)),
    ],
)
def test_other_explanations_keep_it_degraded(monkeypatch: pytest.MonkeyPatch, why: str, facts: Facts) -> None:
    f = nvml_finding(facts, monkeypatch)
    assert f is not None and f.severity.value == "degraded", why
    assert "TensorFlow" not in f.summary, why


def test_nvml_that_loads_but_does_not_initialise(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = LibraryLoad("libnvidia-ml.so.1", True, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", None)
    init = CudaCall("nvmlInit_v2", 999, "NVML_ERROR_UNKNOWN", "Unknown Error")
    f = nvml_finding(machine(nvml=loaded, nvml_init=init), monkeypatch)
    assert f is not None and f.severity.value == "blocker"
    assert "registers no GPU without it" in f.summary and "NVML_ERROR_UNKNOWN" in f.summary
    older = nvml_finding(machine(nvml=loaded, nvml_init=init, tf_version="2.19.0"), monkeypatch)
    assert older is not None and older.severity.value == "degraded"
