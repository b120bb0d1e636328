"""What TensorFlow says of itself to the modules outside its unit (``gpucheck.facts.FrameworkView``): the header
line's part, whether it runs at all, the GPUs it registers and which CUDA device each is, and its entries in a
benchmark's ``machine_info``.

TensorFlow numbers the CUDA devices it registers in CUDA ordinal order, leaving out those whose compute
capability its build does not cover (gpu_device.cc, 'Ignoring visible gpu device'). Its own word comes first: the
"Created device ... GPU:N ... pci bus id: X" lines of its child's set-up, joined to the CUDA devices on the bus id.
"""

from __future__ import annotations

from typing import Any

from gpucheck import knowledge
from gpucheck.facts import Facts, FrameworkGpu, FrameworkView, facts_of
from gpucheck.frameworks.tensorflow import facts as tff
from gpucheck.pci import pci_key

NAME = "tensorflow"
TITLE = "TensorFlow"


def _ordinals(facts: Facts, count: int) -> dict[int, int]:
    """TensorFlow's GPU:N -> CUDA ordinal, where it can be told."""
    cf = facts.cuda.facts
    devices = cf.devices if cf is not None else ()
    setup = facts_of(tff.tf_setup(facts))
    created = setup.created_devices if setup is not None else ()
    if created:
        by_bus = {pci_key(d.pci_bus_id): d.ordinal for d in devices if pci_key(d.pci_bus_id) is not None}
        out = {}
        for name, bus in created:
            index = name.rsplit(":", 1)[-1]
            key = pci_key(bus)
            if index.isdigit() and key is not None and key in by_bus:
                out[int(index)] = by_bus[key]
        return out
    fw = facts_of(tff.framework(facts))
    archs = knowledge.parse_archs((fw.build_info.get("cuda_compute_capabilities") or []) if fw is not None else [])
    covered = []
    for dev in devices:
        if archs and dev.cc_major is not None and dev.cc_minor is not None:
            if knowledge.judge_arch(dev.cc_major, dev.cc_minor, archs).status == "unsupported":
                continue
        covered.append(dev.ordinal)
    if len(covered) != count:
        return {}
    return dict(enumerate(covered))


#: Read off libtensorflow_framework.so.2 of the tensorflow 2.21.0 wheel: stream_executor::gpu's
#: PlatformInitialize calls cuInit, then nvmlInit_v2, and an NVML failure makes VisibleDeviceCount -1.
#: Earlier releases were not checked, so only 2.21 and later are said to need NVML.
_BLIND_SINCE = (2, 21)
BLIND_CAUSE = (
    "TensorFlow's CUDA platform calls nvmlInit_v2 right after a successful cuInit and, when that fails, "
    "counts no device, without a log line at the default level."
)




def blind_without_nvml(facts: Facts) -> str | None:
    """Why this TensorFlow lists no GPU, when NVML explains it this TensorFlow lists no GPU: a CUDA build of 2.21
    or later, whose device listing raised nothing, on a driver whose cuInit succeeded, which counts
    devices and is of the build's CUDA major or newer, with every library TensorFlow dlopens loading."""
    cuda = facts_of(facts.cuda)
    fw = facts_of(tff.framework(facts))
    if cuda is None or fw is None or not fw.importable or not fw.is_cuda_build or fw.gpus or fw.list_devices_error:
        return None
    version = knowledge.parse_version(fw.version)
    if version is None or version[:2] < _BLIND_SINCE:
        return None
    if cuda.init is None or cuda.init.code != 0 or not cuda.device_count:
        return None
    build_cuda = knowledge.parse_version(str(fw.build_info.get("cuda_version") or ""))
    if build_cuda is None or cuda.driver_version is None or cuda.driver_version // 1000 < build_cuda[0]:
        return None
    # Only when nothing else explains it: every library TensorFlow dlopens before it registers a GPU loads.
    libs = facts_of(tff.libraries(facts))
    if libs is None or any(lib.required and not lib.loaded for lib in libs.libraries):
        return None
    return BLIND_CAUSE


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def machine_info(facts: Facts) -> dict[str, Any]:
    """Its entries in a benchmark's ``machine_info`` (DESIGN.md "Contract: performance"): TensorFlow's version, the
    CUDA and cuDNN it was built with, the CUDA runtime and cuDNN the loader finds; None where unknown."""
    info: dict[str, Any] = dict.fromkeys(("tensorflow", "cuda_build", "cudnn_build", "cuda_loaded", "cudnn_loaded"))
    fw = facts_of(tff.framework(facts))
    if fw is not None and fw.importable:
        info["tensorflow"] = fw.version
        if fw.is_cuda_build:
            info["cuda_build"] = _text(fw.build_info.get("cuda_version"))
            info["cudnn_build"] = _text(fw.build_info.get("cudnn_version"))
    lf = facts_of(tff.libraries(facts))
    loaded = {lib.key: lib.version for lib in (lf.libraries if lf is not None else ()) if lib.loaded}
    info["cuda_loaded"] = loaded.get("cudart")
    info["cudnn_loaded"] = loaded.get("cudnn")
    return info


def view(facts: Facts) -> FrameworkView | None:
    outcome = tff.framework(facts)
    if outcome is None:
        return None
    fw = outcome.facts
    info = machine_info(facts)
    if fw is None:
        return FrameworkView(NAME, TITLE, f"{TITLE} probe: {outcome.exit.status}", None, None, (), info)
    if not fw.importable:
        return FrameworkView(NAME, TITLE, f"{TITLE}: not importable", False, fw.version, (), info)
    bi = fw.build_info
    build = f"CUDA {bi.get('cuda_version')}, cuDNN {bi.get('cudnn_version')}" if fw.is_cuda_build else "CPU-only build"
    header = f"{TITLE} {fw.version} ({build}) sees {len(fw.gpus)} GPU(s)"
    ordinal_of = _ordinals(facts, len(fw.gpus))
    gpus = tuple(
        FrameworkGpu(
            f"GPU:{n}",
            ordinal_of.get(n),
            name if isinstance(name := dev.details.get("device_name"), str) else None,
            dev.capability,
        )
        for n, dev in enumerate(fw.gpus)
    )
    lf = facts_of(tff.libraries(facts))
    nccl = None if lf is None else any(lib.key == "nccl" and lib.loaded for lib in lf.libraries)
    return FrameworkView(NAME, TITLE, header, True, fw.version, gpus, info, nccl, blind_without_nvml(facts))
