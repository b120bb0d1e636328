"""PyTorch's rules and view (issue 36, phase 1), in-process on facts built by hand: what torch's child would have
read, with torch's own words as people paste them into issues (each cited). The real child against the real CPU
wheel is tests/test_torch_session.py's.

- driver too old: "The NVIDIA driver on your system is too old (found version 12080)" from a CUDA 13.0 build on a
  12.8 driver, pytorch/pytorch#162531 (PyTorch's own CI);
- an architecture missing from the build: "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with
  the current PyTorch installation. The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75
  sm_80 sm_86 sm_90." (torch 2.5.1+cu124 on an RTX 5090, as issue 36 quotes it); "Found GPU0 Tesla K80 which is of
  cuda capability 3.7 ... The minimum cuda capability supported by this library is 5.0" (torch 2.x on a K80);
- cudaGetDeviceCount's errors: 804 "Error 804: forward compatibility was attempted on non supported HW"
  (hpcaitech/ColossalAI#4381), 802 "Error 802: system not yet initialized" (pytorch/pytorch#35710, an NVSwitch machine
  without Fabric Manager), 803 "Error 803: system has unsupported display driver / cuda driver combination", 805
  "Error 805: MPS client failed to connect to the MPS control daemon or the MPS server", and "CUDA unknown error - this
  may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program
  start" (the CUDA runtime's texts for cudaErrorSystemNotReady .. cudaErrorUnknown, as torch prints them).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucheck import frameworks, registry
from gpucheck.facts import (
    ChildExit,
    CudaCall,
    CudaDevice,
    CudaDriverFacts,
    HardwareFacts,
    KernelFacts,
    LibraryLoad,
    NvmlFacts,
    PciDevice,
    ProbeOutcome,
    VisibilityFacts,
)
from gpucheck.frameworks.tensorflow.rules import compat as tf_compat
from gpucheck.frameworks.torch.facts import TorchDevice, TorchFacts
from gpucheck.frameworks.torch.rules.compat import compat_rules
from gpucheck.frameworks.torch.rules.framework import framework_rules
from gpucheck.frameworks.torch.view import cudnn_text
from gpucheck.model import Finding
from gpucheck.settings import Settings, resolve
from tests.factsbuild import make_facts, replace_facts

TORCH = Settings(framework="torch")
OK_EXIT = ChildExit("ok", 0, None, 2.2, (), "write facts", None)
#: The CPU wheel as its child reads it on this host (tests/test_torch_session.py runs the real one).
CPU_WHEEL = TorchFacts(True, None, "2.13.0+cpu", "/venv/torch/__init__.py", available=False, device_count=0)
#: torch 2.5.1+cu124's arch list, as its warning on an RTX 5090 quotes it.
ARCHS_CU124 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
TOO_OLD_12080 = (
    "CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU "
    "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
    "Alternatively, go to: https://pytorch.org/ to install a PyTorch version that has been compiled with your version "
    "of the CUDA driver. (Triggered internally at /var/lib/jenkins/workspace/c10/cuda/CUDAFunctions.cpp:119.)"
)


def _count_error(number: int, text: str) -> str:
    return (
        "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        f"calling NumCudaDevices() that might have already set an error? Error {number}: {text} (Triggered internally "
        "at ../c10/cuda/CUDAFunctions.cpp:109.)"
    )


def cuda_build(version: str = "2.14.1+cu130", cuda: str = "13.0", **kw: Any) -> TorchFacts:
    fields: dict[str, Any] = {
        "compiled_cuda": int(cuda.split(".")[0]) * 1000 + int(cuda.split(".")[1]) * 10, "cudnn": 91002,
        "available": True, "device_count": 1, "devices": (TorchDevice(0, "NVIDIA H100 80GB HBM3", (9, 0)),),
        "arch_list": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    }
    fields.update(kw)
    return TorchFacts(True, None, version, "/venv/torch/__init__.py", cuda, **fields)


def machine(torch: TorchFacts | None, *, driver: str | None = "580.95.05", driver_cuda: int | None = 13000,
            cc: tuple[int, int] = (9, 0), name: str = "NVIDIA H100 80GB HBM3", cuinit: int = 0,
            exit_: ChildExit = OK_EXIT) -> Any:
    """A host with one NVIDIA GPU and its driver (``driver=None``: no GPU, no driver, as this host), and torch's
    child's facts."""
    if driver is None:
        hardware = HardwareFacts("/sys/bus/pci/devices", True, None, 6, False, (), ())
        kernel = KernelFacts("/proc/driver/nvidia/version", None, None, "No such file", (), False, ())
        lib = LibraryLoad("libcuda.so.1", False, None, "libcuda.so.1: cannot open shared object file")
        cuda = CudaDriverFacts(lib, None, None, None)
    else:
        gpu = PciDevice("0000:04:00.0", "0x10de", "0x2330", "0x030200", "nvidia")
        hardware = HardwareFacts("/sys/bus/pci/devices", True, None, 6, False, (gpu,), (gpu,))
        kernel = KernelFacts("/proc/driver/nvidia/version", None, driver, None, (), True, ())
        lib = LibraryLoad("libcuda.so.1", True, f"/usr/lib/x86_64-linux-gnu/libcuda.so.{driver}", None)
        dev = CudaDevice(0, name, cc[0], cc[1], 80 * 2**30, "00000000:04:00.0", None, None)
        code = CudaCall("cuInit", cuinit, None if cuinit else "CUDA_SUCCESS", None)
        cuda = CudaDriverFacts(lib, code, driver_cuda, 0 if cuinit else 1, devices=() if cuinit else (dev,))
    nvml = NvmlFacts(LibraryLoad("libnvidia-ml.so.1", lib.loaded, None, lib.error), None, driver, None)
    return make_facts(
        TORCH,
        hardware=hardware,
        kernel=kernel,
        visibility=VisibilityFacts(None, None, None, (), False, None, None, ()),
        cuda=ProbeOutcome("cuda", OK_EXIT, cuda),
        nvml=ProbeOutcome("nvml", OK_EXIT, nvml),
        torch=None if torch is None else ProbeOutcome("torch", exit_, torch),
    )


def ids(found: list[Finding]) -> list[tuple[str, str]]:
    return [(f.id, f.severity.value) for f in found]


def test_the_cpu_wheel_on_this_host_is_a_cpu_only_build_with_the_wheel_to_install() -> None:
    facts = machine(CPU_WHEEL, driver=None)
    [found] = framework_rules(facts, TORCH)
    assert (found.id, found.severity.value, found.layer) == ("framework-cpu-only", "blocker", "framework")
    assert found.summary == "PyTorch 2.13.0+cpu is a CPU-only build: it cannot use a GPU."
    assert "its version ends in +cpu" in found.cause
    # No driver answers: the driver first, then the CUDA wheel of the same release.
    assert "Install the NVIDIA driver, then the CUDA wheel of torch 2.13.0" in found.remedy
    assert "--index-url https://download.pytorch.org/whl/cuXYZ" in found.remedy
    assert compat_rules(facts, TORCH) == []
    view = facts.frameworks["torch"]
    assert view.header == "PyTorch 2.13.0+cpu (CPU-only build) sees 0 GPU(s)"
    assert (view.runs, view.version, view.gpus) == (True, "2.13.0+cpu", ())
    assert view.machine_info == {"torch": "2.13.0+cpu", "torch_cuda_build": None, "torch_cudnn": None}


def test_the_cpu_wheel_on_a_driver_gets_the_wheel_for_the_drivers_cuda() -> None:
    facts = machine(CPU_WHEEL, driver="570.133.20", driver_cuda=12080)
    [found] = framework_rules(facts, TORCH)
    assert found.id == "framework-cpu-only"
    assert found.remedy == (
        "Install the CUDA wheel for this driver's CUDA 12.8: "
        "`pip install --force-reinstall torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128`."
    )
    # A driver of a CUDA between the variants: the newest variant it runs.
    assert "whl/cu126`" in framework_rules(machine(CPU_WHEEL, driver="565.57.01", driver_cuda=12070), TORCH)[0].remedy


def test_a_cuda_build_that_sees_its_gpu_finds_nothing() -> None:
    facts = machine(cuda_build())
    assert framework_rules(facts, TORCH) == [] and compat_rules(facts, TORCH) == []
    view = facts.frameworks["torch"]
    assert view.header == "PyTorch 2.14.1+cu130 (CUDA 13.0, cuDNN 9.10.2) sees 1 GPU(s)"
    assert [(g.device, g.cuda_ordinal, g.capability) for g in view.gpus] == [("cuda:0", 0, (9, 0))]


def test_a_driver_too_old_for_the_wheels_cuda() -> None:
    """A CUDA 13.0 build on a 570 driver (CUDA 12.8): the compatibility layer, as for TensorFlow, with PyTorch's name;
    torch's own warning is the same fault, said once."""
    torch = cuda_build(available=False, device_count=0, devices=(), warnings=(TOO_OLD_12080,))
    facts = machine(torch, driver="570.133.20", driver_cuda=12080)
    found = compat_rules(facts, TORCH)
    assert ids(found) == [("driver-too-old", "blocker")]
    assert "CUDA 13.0, which PyTorch 2.14.1+cu130 uses" in found[0].summary
    assert "or use a PyTorch wheel built for the CUDA this driver serves" in found[0].remedy
    assert framework_rules(facts, TORCH) == []  # the framework layer leaves it to the compatibility layer


def test_torchs_word_that_the_driver_is_too_old_where_the_table_did_not_judge() -> None:
    """No CUDA driver reading to judge (its probe left nothing): torch's own warning names the fault."""
    torch = cuda_build(available=False, device_count=0, devices=(), warnings=(TOO_OLD_12080,))
    facts = dataclasses.replace(machine(torch, driver="570.133.20", driver_cuda=12080), cuda=ProbeOutcome("cuda", OK_EXIT, None))
    [found] = compat_rules(facts, TORCH)
    assert found.id == "driver-too-old" and found.layer == "compatibility"
    assert found.summary == "PyTorch 2.14.1+cu130 (CUDA 13.0) says the NVIDIA driver is too old: it serves CUDA 12.8."
    assert found.evidence["driver_cuda_torch_found"] == "12.8" and "found version 12080" in found.evidence["torch_warning"]
    assert "`pip install --force-reinstall torch==2.14.1 --index-url https://download.pytorch.org/whl/cu128`" in found.remedy


#: torch's own warnings for them, as the module docstring quotes them.
RTX_5090_SAYS = (
    "\nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
)
K80_SAYS = (
    "Found GPU0 Tesla K80 which is of cuda capability 3.7.\n    PyTorch no longer supports this GPU because it is too "
    "old.\n    The minimum cuda capability supported by this library is 5.0.\n    "
)


@pytest.mark.parametrize(
    ("name", "cc", "archs", "says"),
    [
        ("NVIDIA GeForce RTX 5090", (12, 0), ARCHS_CU124, RTX_5090_SAYS),  # too new: sm_120 is not compatible
        ("Tesla K80", (3, 7), ARCHS_CU124, K80_SAYS),  # too old: the minimum is 5.0
    ],
)
def test_a_gpu_whose_architecture_the_wheel_lacks(
    name: str, cc: tuple[int, int], archs: tuple[str, ...], says: str
) -> None:
    """Judged from the wheel's arch list and the driver's capability; torch's own warning, where CUDA initialised and
    torch gave it, is the finding's evidence."""
    torch = cuda_build("2.5.1+cu124", "12.4", arch_list=archs, devices=(TorchDevice(0, name, cc),), warnings=(says,))
    facts = machine(torch, driver="570.133.20", driver_cuda=12080, cc=cc, name=name)
    found = [f for f in compat_rules(facts, TORCH) if f.severity.value == "blocker"]
    assert ids(found) == [("gpu-arch-unsupported", "blocker")]
    assert f"is not supported by this PyTorch build (SASS {', '.join(archs)}" in found[0].summary
    assert "is not compatible with the current PyTorch installation" in found[0].cause
    assert f"`TORCH_CUDA_ARCH_LIST={cc[0]}.{cc[1]}`" in found[0].remedy
    assert found[0].evidence["torch_warning"] == says.strip()


@pytest.mark.parametrize(
    ("number", "text", "cause"),
    [
        (802, "system not yet initialized", "fabric-manager-not-running"),
        (803, "system has unsupported display driver / cuda driver combination", "driver-library-mismatch"),
        (804, "forward compatibility was attempted on non supported HW", "forward-compat-unsupported"),
        (805, "MPS client failed to connect to the MPS control daemon or the MPS server", "mps-connection-failed"),
    ],
)
def test_cuda_get_device_count_errors_are_the_lower_layers_ids(number: int, text: str, cause: str) -> None:
    """torch 2.14's ``device_count()`` counts through NVML before CUDA starts: 1 here, while the runtime failed."""
    torch = cuda_build(available=False, device_count=1, devices=(), warnings=(_count_error(number, text),))
    [found] = framework_rules(machine(torch), TORCH)
    assert (found.id, found.severity.value, found.layer) == (cause, "blocker", "driver")
    assert found.evidence["cudaGetDeviceCount"] == number and found.evidence["error"] == text
    # Where the CUDA driver probe's own cuInit failed, the driver layer names it: torch adds nothing.
    assert framework_rules(machine(torch, cuinit=number), TORCH) == []


def test_the_unknown_error_names_nvidia_uvm_and_a_late_cuda_visible_devices() -> None:
    warning = (
        "CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing "
        "env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero."
    )
    torch = cuda_build(available=False, device_count=0, devices=(), warnings=(warning,))
    [found] = framework_rules(machine(torch), TORCH)
    assert (found.id, found.evidence["cudaGetDeviceCount"]) == ("cuda-init-failed", 999)
    assert "nvidia-uvm" in found.remedy and "CUDA_VISIBLE_DEVICES" in found.remedy


def test_a_cuda_build_that_sees_no_gpu_without_a_word() -> None:
    torch = cuda_build(available=False, device_count=0, devices=())
    [found] = framework_rules(machine(torch), TORCH)
    assert found.id == "framework-gpu-init-failed" and found.summary == "PyTorch 2.14.1+cu130 (CUDA 13.0) sees no GPU."
    # NVML's count (torch 2.14's device_count() before CUDA starts) is no GPU torch can use, and the cause says so.
    [found] = framework_rules(machine(dataclasses.replace(torch, device_count=1)), TORCH)
    assert found.id == "framework-gpu-init-failed" and "device_count() says 1, counted through NVML" in found.cause


def test_missing_crashed_and_hung() -> None:
    missing = TorchFacts(False, "ModuleNotFoundError: No module named 'torch'")
    [found] = framework_rules(machine(missing, driver=None), TORCH)
    assert found.id == "framework-missing" and found.remedy == "Install it into this environment: `pip install torch`."
    assert machine(missing, driver=None).frameworks["torch"].header == "PyTorch: not importable"
    shadow = TorchFacts(False, "`import torch` found /work/torch.py, which is not the PyTorch package (a local file "
                        "or folder named torch shadows it)", location="/work/torch.py")
    assert framework_rules(machine(shadow, driver=None), TORCH)[0].remedy.startswith("Rename or remove /work/torch.py")
    died = ChildExit("crashed", -4, "SIGILL", 0.4, ("Illegal instruction",), "import torch", None)
    crashed = dataclasses.replace(machine(None, driver=None), units={"torch": ProbeOutcome("torch", died, None)})
    assert [f.id for f in framework_rules(crashed, TORCH)] == ["framework-crashed"]
    late = ChildExit("timeout", None, None, 60.0, (), "torch.cuda.is_available", None)
    hung = dataclasses.replace(machine(None, driver=None), units={"torch": ProbeOutcome("torch", late, None)})
    [found] = framework_rules(hung, TORCH)
    assert found.id == "framework-hung" and "torch.cuda.is_available" in found.summary


def test_tensorflows_compatibility_findings_keep_their_words() -> None:
    """The compatibility layer's judgement now names each framework's build in its own words: TensorFlow's are the
    words it always had (the TensorFlow path does not change in what it reports)."""
    assert tf_compat.WORDS.refusal == "TensorFlow ignores the device ('The minimum required Cuda capability is …')"
    assert tf_compat.WORDS.other_builds.endswith("(see tensorflow.org/install/source#gpu)")


@pytest.mark.parametrize(("raw", "text"), [(91002, "9.10.2"), (90100, "9.1.0"), (8902, "8.9.2"), (None, None), (0, None)])
def test_cudnn_version_in_words(raw: int | None, text: str | None) -> None:
    assert cudnn_text(raw) == text


# --- choosing frameworks ------------------------------------------------------------------------------------------


def test_each_built_in_frameworks_module_is_its_units() -> None:
    assert set(frameworks.MODULES) == set(frameworks.BUILT_IN)
    for name, module in frameworks.MODULES.items():
        unit = registry.framework_named(name)
        assert unit is not None and unit.module == module


def test_the_default_is_the_installed_frameworks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the import system's own search, nothing imported: here a folder named torch on the path; with neither
    module to be found, tensorflow (which then says framework-missing with its pip command)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert "torch" in frameworks.installed()
    settings = resolve(lambda dest: None, lambda key: None, {})
    assert "torch" in settings.frameworks and dict(settings.sources)["framework"] == "default"
    assert frameworks.parse("all") == frameworks.default() == ",".join(frameworks.installed())
    assert "torch" not in sys.modules
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(sys, "path", [str(empty)])
    for name in ("tensorflow", "torch"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert frameworks.installed() == () and frameworks.default() == "tensorflow"
    # all, where none is installed: every framework unit, each saying it is missing.
    assert frameworks.parse("all") == "tensorflow,torch"


@pytest.mark.parametrize(
    ("given", "parsed"),
    [("torch", "torch"), ("TensorFlow, torch", "tensorflow,torch"), ("torch,torch", "torch"), ("none", "none")],
)
def test_framework_values(given: str, parsed: str) -> None:
    assert resolve(lambda dest: given if dest == "gpucheck_framework" else None, lambda key: None, {}).framework == parsed


@pytest.mark.parametrize("given", ["all,torch", "none,torch", "pytorch", ""])
def test_framework_values_refused(given: str) -> None:
    with pytest.raises(ValueError, match="must be one of tensorflow, torch, all, none"):
        frameworks.parse(given)


def test_the_libraries_read_from_the_maps(tmp_path: Path) -> None:
    """``/proc/self/maps`` as the kernel writes it: anonymous mappings have no path; each library is named once, in the
    order first mapped; only CUDA's, cuDNN's, NCCL's, the driver's and torch's own."""
    from gpucheck.frameworks.torch.child import loaded_libraries

    site = "/venv/lib/python3.11/site-packages"
    maps = tmp_path / "maps"
    maps.write_text("\n".join((
        "7f0000000000-7f0000001000 r--p 00000000 00:00 0 ",
        f"7f0000001000-7f0000002000 r-xp 00001000 fd:01 42 {site}/torch/lib/libtorch_cuda.so",
        f"7f0000002000-7f0000003000 r--p 00002000 fd:01 42 {site}/torch/lib/libtorch_cuda.so",
        "7f0000003000-7f0000004000 r-xp 00000000 fd:01 43 /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
        f"7f0000004000-7f0000005000 r-xp 00000000 fd:01 44 {site}/nvidia/cudnn/lib/libcudnn.so.9",
        "7f0000005000-7f0000006000 r-xp 00000000 fd:01 45 /usr/local/cuda-12.1/lib64/libnvJitLink.so.12",
        "7f0000006000-7f0000007000 r-xp 00000000 fd:01 46 /usr/lib/x86_64-linux-gnu/libm.so.6",
        "7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0                          [stack]",
    )) + "\n")
    assert loaded_libraries(str(maps)) == (
        f"{site}/torch/lib/libtorch_cuda.so",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
        f"{site}/nvidia/cudnn/lib/libcudnn.so.9",
        "/usr/local/cuda-12.1/lib64/libnvJitLink.so.12",
    )
    assert loaded_libraries(str(tmp_path / "absent")) == ()


def test_pytorchs_benchmarks_are_judged_on_the_gpu_torch_lists() -> None:
    """Issue 36 point 4: where PyTorch measured (its facts say so), the plan's GPU:0 is torch's cuda:0, judged against
    that GPU's model (the H100 of ``machine``: 989.4 dense bfloat16 TFLOP/s), and a benchmark that raised names
    PyTorch, in a run that diagnoses TensorFlow too."""
    from gpucheck.performance import rules as perf
    from gpucheck.performance.facts import BenchmarkRun, PerformanceFacts

    both = Settings(framework="tensorflow,torch", benchmarks=True)
    slow = BenchmarkRun("test_matmul[GPU:0-bfloat16]", "matmul", "GPU:0-bfloat16", ("/GPU:0",), True, 8, (0.1,) * 5,
                        {"dtype": "bfloat16", "tflops": 200.0, "device": "cuda:0"})
    # The error torch's child reported on this host while its all-reduce read only rank 0's file (2026-11-28).
    failed = BenchmarkRun("test_allreduce[CPU-x2]", "allreduce", "CPU-x2", ("/CPU:0", "/CPU:1"), False,
                          error="RuntimeError: the gloo processes ended without a result (exit codes [0, 0])")
    pf = PerformanceFacts(None, ("cpu", "cuda:0"), (slow, failed), None, True, (slow.name, failed.name), "torch",
                          "2.14.1+cu130")
    facts = replace_facts(machine(cuda_build()), both, performance=ProbeOutcome("performance", OK_EXIT, pf))
    expected = perf.expectation(facts, slow)
    assert expected is not None and expected.model == "H100 SXM5 80GB" and expected.expected == pytest.approx(989.4)
    found = {f.id: f for f in perf.performance_rules(facts, both)}
    assert found["gpu-underperforming"].subject == "GPU-0", found["gpu-underperforming"]
    assert found["benchmark-failed"].cause.startswith("PyTorch raised while running it on CPU:0, CPU:1")


#: The loader's words where an older libnvJitLink is found first (infiniflow/ragflow#4466: torch's CUDA 12.1 wheels with
#: a CUDA 12.0 toolkit's libnvJitLink on LD_LIBRARY_PATH), as `import torch` raises them.
NVJITLINK_12_1 = (
    "ImportError: /venv/lib/python3.10/site-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined "
    "symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12"
)


def _library(path: Path, *symbols: str) -> str:
    """A file standing for a shared library whose ELF string table holds ``symbols`` (NUL-separated, as there)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF" + b"\0".join([b"", *(s.encode() for s in symbols), b""]) + b"\0" * 64)
    return str(path)


def test_which_copy_the_loader_took_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``found_first`` names the copy that lacks the symbol, in the loader's order: a mapped copy that is not the wheels'
    (preloaded, or loaded before), the first on LD_LIBRARY_PATH (the folder as the variable writes it: a toolkit's
    ``cuda -> cuda-12.0`` link is what the user must edit), then the wheels' own copy (wheels that do not go
    together); a copy that has the symbol is passed over."""
    from gpucheck.frameworks.torch.child import found_first, lacks_symbol

    sym = "__nvJitLinkAddData_12_1"
    old = tmp_path / "cuda-12.0" / "lib64"
    _library(old / "libnvJitLink.so.12.0.76", "__nvJitLinkAddData_12_0")
    (old / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.0.76")
    (tmp_path / "cuda").symlink_to("cuda-12.0")
    good = _library(tmp_path / "cuda-12.4" / "lib64" / "libnvJitLink.so.12", "__nvJitLinkAddData_12_0", sym)
    wheel = _library(tmp_path / "site" / "nvidia" / "nvjitlink" / "lib" / "libnvJitLink.so.12", "__nvJitLinkAddData_12_0")
    assert lacks_symbol(wheel, sym) is True and lacks_symbol(good, sym) is False
    assert lacks_symbol(str(tmp_path / "absent.so"), sym) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)  # the empty entries of LD_LIBRARY_PATH are this folder
    linked = str(tmp_path / "cuda" / "lib64")
    env = {"LD_LIBRARY_PATH": f"::{empty}:{linked}:{good.rsplit('/', 1)[0]}"}
    first = found_first(NVJITLINK_12_1, (), env, (wheel,))
    assert first is not None and (first.soname, first.symbol) == ("libnvJitLink.so.12", sym)
    assert (first.loaded, first.how, first.folder) == (str(old / "libnvJitLink.so.12.0.76"), "LD_LIBRARY_PATH", linked)
    assert first.said == f"undefined symbol: {sym}, version libnvJitLink.so.12" and first.wheel_copies == (wheel,)
    # A copy already mapped comes first: preloaded, or loaded by something else (and on LD_LIBRARY_PATH: that folder).
    conda = _library(tmp_path / "conda" / "lib" / "libnvJitLink.so.12.0.140")
    mapped = ("/venv/torch/lib/libtorch_cuda.so", conda)
    assert found_first(NVJITLINK_12_1, mapped, {}, (wheel,)).how == "loaded"  # type: ignore[union-attr]
    preloaded = found_first(NVJITLINK_12_1, mapped, {"LD_PRELOAD": f"/lib/libx.so {conda}"}, (wheel,))
    assert preloaded is not None and (preloaded.loaded, preloaded.how) == (conda, "LD_PRELOAD")
    # A mapped copy that has the symbol is not the one; the first on LD_LIBRARY_PATH then is.
    assert found_first(NVJITLINK_12_1, (good,), env, (wheel,)).folder == linked  # type: ignore[union-attr]
    # Only the wheels' own copy, and it lacks the symbol: the wheels do not go together.
    mismatched = found_first(NVJITLINK_12_1, (wheel,), {}, (wheel,))
    assert mismatched is not None and (mismatched.loaded, mismatched.how) == (wheel, "wheel")
    # No copy seen to lack it: none named.
    assert found_first(NVJITLINK_12_1, (good,), {}, ()).loaded is None  # type: ignore[union-attr]
    # Another import failure is not the loader's word on a missing symbol.
    assert found_first("ModuleNotFoundError: No module named 'torch'", mapped, env, ()) is None
    assert found_first("ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory", (), env, ()) is None


def test_a_cuda_library_found_first_is_named_not_framework_missing() -> None:
    """``import torch`` failing on a symbol of a CUDA library is ``cuda-library-shadowed`` (the libraries layer),
    naming the copy that lacks it, how it came in (the remedy for each) and the wheel's own copy, not
    ``framework-missing``'s `pip install torch`; a cuDNN library is ``cudnn-version-mismatch``, as explain names the
    same words."""
    from gpucheck.frameworks.torch.facts import FoundFirst

    wheel = "/venv/lib/python3.10/site-packages/nvidia/nvjitlink/lib/libnvJitLink.so.12"
    said = "undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12"
    first = FoundFirst("libnvJitLink.so.12", "__nvJitLinkAddData_12_1", "/usr/local/cuda-12.0/lib64/libnvJitLink.so.12.0.76",
                       "LD_LIBRARY_PATH", (wheel,), "/usr/local/cuda/lib64", said)
    torch = TorchFacts(False, NVJITLINK_12_1, found_first=first)

    def found(ff: FoundFirst) -> Finding:
        [f] = framework_rules(machine(dataclasses.replace(torch, found_first=ff)), TORCH)
        return f

    on_path = found(first)
    assert (on_path.id, on_path.layer, on_path.severity.value) == ("cuda-library-shadowed", "libraries", "blocker")
    assert on_path.summary == "Another libnvJitLink.so.12 than PyTorch's own is loaded first: it lacks __nvJitLinkAddData_12_1."
    assert on_path.remedy.startswith("Remove /usr/local/cuda/lib64 from LD_LIBRARY_PATH") and wheel in on_path.remedy
    assert on_path.cause.startswith(f"`import torch` failed: {said}. ") and "found in /usr/local/cuda/lib64" in on_path.cause
    assert on_path.evidence["loaded"] == first.loaded and on_path.evidence["wheel_copies"] == [wheel]
    cudnn = FoundFirst("libcudnn.so.9", "cudnnPoolingForward", "/opt/cudnn/libcudnn.so.9.0.0", "LD_PRELOAD", (), None, said)
    preloaded = found(cudnn)
    assert (preloaded.id, preloaded.layer) == ("cudnn-version-mismatch", "libraries")
    assert preloaded.remedy.startswith("Take /opt/cudnn/libcudnn.so.9.0.0 out of LD_PRELOAD")
    # Without nvidia-* wheels (conda, a container's CUDA), no wheel is named.
    assert "nvidia-* wheels" not in preloaded.remedy and "the copy torch's libraries were built with" in preloaded.remedy
    assert found(dataclasses.replace(first, how="loaded")).remedy.startswith("Find what loads /usr/local/cuda-12.0")
    mismatched = found(dataclasses.replace(first, loaded=wheel, how="wheel", folder=None))
    assert mismatched.summary == "PyTorch's own libnvJitLink.so.12 lacks __nvJitLinkAddData_12_1: its nvidia-* wheels do not go together."
    assert "pip check" in mismatched.remedy
    assert "ldconfig -p | grep libnvJitLink.so.12" in found(dataclasses.replace(first, loaded=None, how=None)).remedy
    empty_entry = found(dataclasses.replace(first, folder=""))
    assert empty_entry.remedy.startswith("Remove the empty entry (the working directory) from LD_LIBRARY_PATH")
