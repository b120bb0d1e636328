"""PyTorch's compatibility rule: its CUDA build (the CUDA it was compiled for, the architectures of
``torch.cuda.get_arch_list()``) judged by the lower stack's compatibility rules (``gpucheck.rules.compat``) against
the driver and the GPUs' compute capabilities, with torch's own warning of the same fault as evidence; and torch's own
word that the driver is too old, where the table did not say so."""

from __future__ import annotations

from dataclasses import replace

from gpucheck.facts import Facts
from gpucheck.frameworks.torch.facts import TorchFacts
from gpucheck.frameworks.torch.rules.common import (
    ARCH,
    WORDS,
    driver_cuda,
    install_command,
    too_old,
    torch_of,
    wheel_variant,
)
from gpucheck.knowledge import cuda_int_to_text
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.compat import Build, judge
from gpucheck.settings import Settings

#: Where the build was read.
SOURCE = "torch._C._cuda_getCompiledVersion(), torch.cuda.get_arch_list()"


def torch_build(facts: Facts) -> Build | None:
    """PyTorch's CUDA build; None for a CPU-only wheel or a torch that did not import."""
    tf = torch_of(facts)
    if tf is None:
        return None
    cuda = cuda_int_to_text(tf.compiled_cuda) or tf.cuda
    if cuda is None:
        return None
    return Build(tf.version, cuda, tf.arch_list, SOURCE, None, WORDS)


def compat_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """``driver-too-old`` and ``gpu-arch-unsupported`` (and the notes ``driver-minor-version-compat``,
    ``ptx-jit-compilation``) as the lower stack judges PyTorch's build, with torch's own warning of the same fault in
    their evidence where it gave one (``torch_warning``); ``driver-too-old`` from torch's own warning where that
    judgement did not find it."""
    out = judge(torch_build(facts), facts)
    tf = torch_of(facts)
    if tf is None:
        return out
    refused = next(((m, text) for text in tf.warnings if (m := too_old(text)) is not None), None)
    arch = [text for text in tf.warnings if ARCH.search(text)]

    def torch_said(f: Finding) -> str | None:
        if f.id == "driver-too-old":
            return refused[1] if refused else None
        if f.id == "gpu-arch-unsupported":  # the warning that names this GPU, else the first
            return next((t for t in arch if str(f.evidence.get("name")) in t), arch[0] if arch else None)
        return None

    out = [replace(f, evidence={**f.evidence, "torch_warning": w.strip()}) if (w := torch_said(f)) else f for f in out]
    if refused is not None and not any(f.id == "driver-too-old" for f in out):
        out.append(_driver_too_old_says_torch(tf, int(refused[0].group(1)), refused[1], facts))
    return out


def _driver_too_old_says_torch(tf: TorchFacts, found: int, text: str, facts: Facts) -> Finding:
    """``driver-too-old``: torch's CUDA runtime refused the driver (cudaErrorInsufficientDriver)."""
    build = cuda_int_to_text(tf.compiled_cuda) or tf.cuda or "?"
    serves = cuda_int_to_text(found) or str(found)
    variant = wheel_variant(found)
    wheel = (
        f"; or install the wheel for CUDA {serves}'s driver: `{install_command(tf.version, variant)}`"
        if variant is not None
        else ""
    )
    return finding(
        "driver-too-old",
        Severity.BLOCKER,
        summary=f"PyTorch {tf.version} (CUDA {build}) says the NVIDIA driver is too old: it serves CUDA {serves}.",
        cause=f"torch.cuda.is_available() is False and torch warned: {text.strip()}",
        remedy=(
            f"Install an NVIDIA driver of CUDA {build} or newer (`nvidia-smi` shows the CUDA version a driver "
            f"serves) and reboot{wheel}."
        ),
        evidence={
            "torch": tf.version,
            "torch_cuda": build,
            "driver_cuda_torch_found": serves,
            "driver_cuda": cuda_int_to_text(driver_cuda(facts)),
            "torch_warning": text.strip(),
        },
    )
