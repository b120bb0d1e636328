"""PyTorch's compatibility rule: its CUDA build (the CUDA it was compiled for, the architectures of
``torch.cuda.get_arch_list()``) judged by the lower stack's compatibility rules (``gpucheck.rules.compat``) against
the driver and the GPUs' compute capabilities; and torch's own word that the driver is too old, where the table
did not say so."""

from __future__ import annotations

from gpucheck.facts import Facts
from gpucheck.frameworks.torch.facts import TorchFacts
from gpucheck.frameworks.torch.rules.common import (
    TOO_OLD,
    WORDS,
    driver_cuda,
    install_command,
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
    ``ptx-jit-compilation``) as the lower stack judges PyTorch's build; ``driver-too-old`` from torch's own
    warning where that judgement did not find it."""
    out = judge(torch_build(facts), facts)
    tf = torch_of(facts)
    if tf is not None and not any(f.id == "driver-too-old" for f in out):
        said = next(((m, text) for text in tf.warnings if (m := TOO_OLD.search(text)) is not None), None)
        if said is not None:
            out.append(_driver_too_old_says_torch(tf, int(said[0].group(1)), said[1], facts))
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
