"""What PyTorch's rules share: its CUDA build's words, the driver's CUDA version, the wheel that fits it, and the
error torch's warnings name."""

from __future__ import annotations

import re

from gpucheck import knowledge
from gpucheck.facts import Facts, facts_of
from gpucheck.frameworks.torch.facts import TorchFacts, torch_facts
from gpucheck.logs import table_data
from gpucheck.rules.compat import Words

#: How the compatibility findings name PyTorch's build.
WORDS = Words(
    title="PyTorch",
    refusal=(
        "PyTorch warns that the GPU 'is not compatible with the current PyTorch installation' (or is below 'the "
        "minimum cuda capability supported by this library') and its kernels fail with 'no kernel image is "
        "available for execution on the device'"
    ),
    other_builds="a PyTorch wheel built for the CUDA this driver serves (pytorch.org/get-started/locally)",
    older_build="an older PyTorch whose wheels still compile for this architecture (pytorch.org/get-started/previous-versions)",
    from_source="build PyTorch from source with `TORCH_CUDA_ARCH_LIST={cc}`",
)

#: PyTorch's table of log patterns (``gpucheck explain``), whose words the rules read too, so that each is written once.
LOG_PATTERNS = "frameworks/torch/log_patterns.json"


def log_pattern(pattern_id: str) -> re.Pattern[str]:
    """The regex of the pattern ``pattern_id`` of PyTorch's table (compiled once: ``re`` caches it)."""
    (regex,) = [p["regex"] for p in table_data(LOG_PATTERNS)["patterns"] if p["id"] == pattern_id]
    return re.compile(regex)


def too_old(text: str) -> re.Match[str] | None:
    """torch's warning when the CUDA runtime refuses the driver (cudaErrorInsufficientDriver): "The NVIDIA driver on
    your system is too old (found version 12080)", as explain's ``torch-driver-too-old`` reads it (its first group is
    the driver's CUDA version as an integer)."""
    return log_pattern("torch-driver-too-old").search(text)
#: torch's warnings for a GPU its build has no code for, once CUDA is initialised: "NVIDIA GeForce RTX 5090 with CUDA
#: capability sm_120 is not compatible with the current PyTorch installation." (``_check_cubins``), "Found GPU0 Tesla
#: V100-PCIE-32GB which is of compute capability (CC) 7.0." (torch 2.14's ``_check_capability``), "Found GPU0 Tesla K80
#: which is of cuda capability 3.7. ... The minimum cuda capability supported by this library is 5.0." (earlier torch).
ARCH = re.compile(
    r"is not compatible with the current PyTorch installation|which is of (?:compute|cuda) capability|"
    r"minimum cuda capability supported by this library"
)
#: torch's warning when cudaGetDeviceCount fails otherwise: "... Error 804: forward compatibility was attempted on non
#: supported HW".
ERROR_NUMBER = re.compile(r"\bError (\d{1,4}): ([^\n]*?)(?:\s*\(Triggered internally[^\n]*)?$", re.MULTILINE)
#: cudaErrorUnknown in torch's words (CUDA 12: "CUDA unknown error - this may be due to an incorrectly set up
#: environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start").
UNKNOWN = re.compile(r"CUDA unknown error")


def torch_of(facts: Facts) -> TorchFacts | None:
    """PyTorch's facts where it imported, else None."""
    tf = facts_of(torch_facts(facts))
    return tf if tf is not None and tf.importable else None


def driver_cuda(facts: Facts) -> int | None:
    """The CUDA version the driver serves (cuDriverGetVersion, else NVML's), encoded as 12080."""
    cf, nf = facts.cuda.facts, facts.nvml.facts
    if cf is not None and cf.driver_version:
        return cf.driver_version
    return nf.cuda_driver_version if nf is not None and nf.cuda_driver_version else None


def base_version(version: str | None) -> str:
    """torch's version without its local part: "2.13.0+cpu" -> "2.13.0"."""
    return (version or "").split("+", 1)[0]


def wheel_variant(cuda: int | None) -> str | None:
    """The newest CUDA variant of PyTorch's wheels a driver serving ``cuda`` (12080) runs, from
    data/torch_wheels.json; None where the driver's CUDA is not known or older than every variant."""
    if not cuda:
        return None
    fits = []
    for variant in knowledge.data("torch_wheels.json")["variants"]:
        digits = str(variant).removeprefix("cu")
        if digits.isdigit() and len(digits) >= 3 and (int(digits[:-1]), int(digits[-1])) <= (cuda // 1000, cuda % 1000 // 10):
            fits.append(str(variant))
    return fits[-1] if fits else None


def install_command(version: str | None, variant: str) -> str:
    """The pip command that installs this torch release's wheel of a CUDA variant."""
    index = knowledge.data("torch_wheels.json")["index"]
    pinned = f"torch=={base_version(version)}" if base_version(version) else "torch"
    return f"pip install --force-reinstall {pinned} --index-url {index}{variant}"


def error_number(warnings: tuple[str, ...]) -> tuple[int, str, str] | None:
    """The CUDA error torch's warnings name (number, its text, the whole warning): "Error 804: ..." or the unknown
    error (999); None where they name none."""
    for text in warnings:
        if (m := ERROR_NUMBER.search(text)) is not None:
            return int(m.group(1)), m.group(2).strip(), text
        if UNKNOWN.search(text):
            return 999, "CUDA unknown error", text
    return None
