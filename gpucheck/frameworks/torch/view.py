"""What PyTorch says of itself to the modules outside its unit (``gpucheck.facts.FrameworkView``): the header line's
part, whether it runs at all, the GPUs it lists (``cuda:N``, which is CUDA ordinal N of its process) and its entries in
a benchmark's ``machine_info``."""

from __future__ import annotations

from typing import Any

from gpucheck.facts import Facts, FrameworkGpu, FrameworkView
from gpucheck.frameworks.torch.facts import torch_facts
from gpucheck.knowledge import cuda_int_to_text

NAME = "torch"
TITLE = "PyTorch"
#: What ``torch.device`` takes for the GPU N of a test process.
DEVICE_NAME = "cuda:{}"


def cudnn_text(version: int | None) -> str | None:
    """``torch.backends.cudnn.version()`` in words: cuDNN 9 and later encode major*10000 + minor*100 + patch
    (91002 -> "9.10.2"), earlier ones major*1000 + minor*100 + patch (8902 -> "8.9.2")."""
    if version is None or version <= 0:
        return None
    base = 10000 if version >= 90000 else 1000
    return f"{version // base}.{version % base // 100}.{version % 100}"


def machine_info(facts: Facts) -> dict[str, Any]:
    """Its entries in a benchmark's ``machine_info``: torch's version, the CUDA it was built for and its cuDNN."""
    info: dict[str, Any] = dict.fromkeys(("torch", "torch_cuda_build", "torch_cudnn"))
    outcome = torch_facts(facts)
    tf = outcome.facts if outcome is not None else None
    if tf is not None and tf.importable:
        info["torch"] = tf.version
        info["torch_cuda_build"] = tf.cuda or cuda_int_to_text(tf.compiled_cuda)
        info["torch_cudnn"] = cudnn_text(tf.cudnn)
    return info


def view(facts: Facts) -> FrameworkView | None:
    outcome = torch_facts(facts)
    if outcome is None:
        return None
    tf = outcome.facts
    info = machine_info(facts)
    if tf is None:
        return FrameworkView(NAME, TITLE, f"{TITLE} probe: {outcome.exit.status}", None, None, (), info, device_name=DEVICE_NAME)
    if not tf.importable:
        return FrameworkView(NAME, TITLE, f"{TITLE}: not importable", False, tf.version, (), info, device_name=DEVICE_NAME)
    if tf.cuda_build:
        cudnn = cudnn_text(tf.cudnn)
        build = f"CUDA {tf.cuda}" + (f", cuDNN {cudnn}" if cudnn else ", no cuDNN")
    else:
        build = "CPU-only build"
    gpus = tuple(FrameworkGpu(f"cuda:{d.index}", d.index, d.name, d.capability) for d in tf.devices)
    header = f"{TITLE} {tf.version} ({build}) sees {len(gpus)} GPU(s)"
    return FrameworkView(NAME, TITLE, header, True, tf.version, gpus, info, device_name=DEVICE_NAME)
