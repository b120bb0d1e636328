"""Hardware and kernel layers: is there an NVIDIA GPU, is the nvidia module loaded, are the nodes there."""

from __future__ import annotations

from gpucheck.facts import DeviceNode, Facts
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import gpus_on_bus, none_held
from gpucheck.settings import Settings


def hardware_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The hardware layer's finding: ``no-nvidia-gpu``."""
    return _no_nvidia_gpu(facts)


def _no_nvidia_gpu(facts: Facts) -> list[Finding]:
    """``no-nvidia-gpu``: the PCI bus (read) shows no NVIDIA GPU and no driver call enumerated one."""
    hw = facts.hardware
    if not hw.readable or gpus_on_bus(facts):
        return []
    other = [d.bus_id for d in hw.nvidia_devices]
    return [
        finding(
            "no-nvidia-gpu",
            Severity.BLOCKER,
            summary="No NVIDIA GPU on this machine's PCI bus.",
            cause=(
                f"None of the {hw.pci_device_count} PCI devices in {hw.source} has NVIDIA's vendor id 0x10de"
                + (f" with a display class (NVIDIA non-GPU functions: {', '.join(other)})" if other else "")
                + ", and no driver call enumerated a GPU: this is a CPU-only host, or a VM without GPU passthrough."
            ),
            remedy=(
                "Run on a machine with an NVIDIA GPU: on a cloud, choose a GPU instance type; on a VM, pass the GPU "
                f"through (PCI passthrough or vGPU).{_on_the_cpu(facts)}"
            ),
            evidence={
                "sysfs": hw.source,
                "pci_devices": hw.pci_device_count,
                "nvidia_functions": [d.bus_id for d in hw.nvidia_devices],
            },
        )
    ]


def _usable(node: DeviceNode) -> bool:
    return node.exists and node.is_char_device and node.readable and node.writable


def _unusable_nodes(nodes: tuple[DeviceNode, ...]) -> list[DeviceNode]:
    """Control nodes that are not usable, numbered nodes that exist but are not usable, and, when no
    numbered node exists at all, those looked for. A container given a subset of the GPUs has only
    their nodes (``/dev/nvidia1`` without ``/dev/nvidia0``): that is not a fault."""
    numbered = [n for n in nodes if n.path[len("/dev/nvidia") :].isdigit()]
    control = [n for n in nodes if n not in numbered]
    bad = [n for n in control if not _usable(n)]
    existing = [n for n in numbered if n.exists]
    bad += [n for n in existing if not _usable(n)] if existing else numbered
    return bad


def kernel_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The kernel layer's findings: ``host-read-hung`` (reading sysfs, procfs or /dev did not finish); else,
    for a GPU on the bus outside WSL, ``driver-not-loaded`` (the nvidia module is not loaded), else
    ``device-nodes-inaccessible`` (its device nodes are missing or denied; a numbered node is not looked for where the
    driver holds no GPU, ``rules.common.none_held``)."""
    hung = _host_read_hung(facts)
    if hung:
        return hung
    if not gpus_on_bus(facts) or facts.hardware.wsl_dxg:
        return []
    return _driver_not_loaded(facts) or _device_nodes_inaccessible(facts)


def _host_read_hung(facts: Facts) -> list[Finding]:
    """``host-read-hung``: the reads of the PCI bus in sysfs, or of /proc/driver/nvidia and the device nodes,
    did not return within their time limit. A read of the driver's files that blocks is a driver stuck in the
    kernel; nothing above it can be judged from this process."""
    hw, k = facts.hardware, facts.kernel
    stuck = [e for e, hung in ((hw.error, hw.unanswered), (k.version_error, k.unanswered)) if hung and e]
    if not stuck:
        return []
    return [
        finding(
            "host-read-hung",
            Severity.BLOCKER,
            summary="Reading this machine's own files about its GPUs did not finish: " + "; ".join(stuck) + ".",
            cause=(
                "A read of sysfs, /proc/driver/nvidia or the /dev/nvidia* nodes blocked. On a real machine that is "
                "the nvidia driver stuck in the kernel (a GPU that stopped answering, often after an Xid error); "
                "every program that touches the GPU will hang the same way."
            ),
            remedy=(
                "Look for the processes stuck in the D state (`ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'`) and for "
                "NVRM Xid lines in the kernel log (`dmesg | grep -i xid`); drain the node and reset the GPU "
                "(`nvidia-smi -r`) or reboot it. With GPUCHECK_HOST_ROOT set, check the tree it points at."
            ),
            evidence={"sysfs": hw.source, "version_file": k.version_file, "what_did_not_answer": stuck},
        )
    ]


def _driver_not_loaded(facts: Facts) -> list[Finding]:
    """``driver-not-loaded``: neither /proc's version file nor /sys/module/nvidia shows the module, and
    NVML does not initialise (an NVML that does talks to the module, wherever /proc and /sys are hidden)."""
    hw, k = facts.hardware, facts.kernel
    nf = facts.nvml.facts
    nvml_init = nf.init if nf is not None else None
    if k.version_line is not None or k.module_in_sysfs or (nvml_init is not None and nvml_init.code == 0):
        return []
    bound = {d.bus_id: d.driver for d in hw.nvidia_gpus}
    others = sorted({drv for drv in bound.values() if drv and drv != "nvidia"})
    return [
        finding(
            "driver-not-loaded",
            Severity.BLOCKER,
            summary=f"{len(hw.nvidia_gpus) or 'An'} NVIDIA GPU(s) on the bus, but the nvidia kernel module is not loaded.",
            cause=(
                f"{k.version_file} cannot be read ({k.version_error or 'missing'}) and /sys/module/nvidia does not "
                "exist, so no nvidia kernel module drives the GPU"
                + (f"; the GPU is bound to {', '.join(others)}" if others else "")
                + "."
            ),
            remedy=_not_loaded_remedy(others, k.competing_modules),
            evidence={
                "gpus": {bus: drv for bus, drv in bound.items()},
                "version_file": k.version_file,
                "version_error": k.version_error,
                "competing_modules": list(k.competing_modules),
                "nvmlInit": (
                    {"code": nvml_init.code, "name": nvml_init.name, "message": nvml_init.message}
                    if nvml_init is not None
                    else None
                ),
            },
        )
    ]


def _not_loaded_remedy(others: list[str], competing_modules: tuple[str, ...]) -> str:
    """What to do when the module is not loaded: by the driver that holds the GPU instead, if any."""
    if "nouveau" in others or "nouveau" in competing_modules:
        return (
            "The open-source nouveau driver holds the GPU. Install the NVIDIA driver (e.g. "
            "`sudo apt install nvidia-driver-<branch>` or `sudo ubuntu-drivers install`), which blacklists "
            "nouveau, then reboot."
        )
    if "vfio-pci" in others:
        return (
            "The GPU is bound to vfio-pci for passthrough to a VM. Unbind it from vfio-pci (or remove it from the "
            "vfio-pci ids) and load the nvidia module, or use it inside the VM it is passed to."
        )
    return (
        "Install the NVIDIA driver for this GPU and load it (`sudo modprobe nvidia`). If it is installed but "
        "does not load, read `sudo dmesg | grep -i nvidia`; with Secure Boot on (`mokutil --sb-state`), the "
        "module must be signed (enrol the MOK key) or Secure Boot turned off."
    )


def _device_nodes_inaccessible(facts: Facts) -> list[Finding]:
    """``device-nodes-inaccessible``: a device node CUDA opens is missing, or not a character device
    this user can read and write (see ``_unusable_nodes``)."""
    k = facts.kernel
    bad = _unusable_nodes(k.nodes)
    if none_held(facts):
        # The driver holds no GPU (its probe of each failed: gpu-init-failed says why), so no /dev/nvidia<N> can exist.
        bad = [n for n in bad if n.exists or not n.path[len("/dev/nvidia") :].isdigit()]
    if not bad:
        return []
    missing = [n.path for n in bad if not n.exists]
    denied = [f"{n.path} ({n.mode})" for n in bad if n.exists]
    parts = []
    if missing:
        parts.append("missing: " + ", ".join(missing))
    if denied:
        parts.append("not a character device or not readable and writable by this user: " + ", ".join(denied))
    nvd = facts.visibility.nvidia_visible_devices
    return [
        finding(
            "device-nodes-inaccessible",
            Severity.BLOCKER,
            summary="The nvidia kernel module is loaded, but this process cannot use its device nodes.",
            cause="CUDA opens /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia<N>; " + "; ".join(parts) + ".",
            remedy=_nodes_remedy(missing, denied, nvd),
            evidence={
                "nodes": [
                    {"path": n.path, "exists": n.exists, "mode": n.mode, "readable": n.readable, "writable": n.writable}
                    for n in k.nodes
                ],
                "NVIDIA_VISIBLE_DEVICES": nvd,
            },
        )
    ]


def _nodes_remedy(missing: list[str], denied: list[str], nvd: str | None) -> str:
    """What to do about the nodes: load nvidia-uvm, grant access, or give the container its GPUs."""
    if any(p.endswith("nvidia-uvm") for p in missing) and not any(p.endswith(("nvidiactl",)) for p in missing):
        return (
            "The nvidia-uvm module, which CUDA needs, is not loaded or its node was not created: run "
            "`sudo modprobe nvidia-uvm` (or `nvidia-modprobe -u -c=0`)."
        )
    if denied:
        return (
            "Give this user access to the nodes: add it to the group that owns them (often `video` or `render`), "
            "or fix the mode in the udev rule / `NVreg_DeviceFileMode` module parameter."
        )
    if nvd is not None and nvd in ("", "none", "void"):
        return (
            f"NVIDIA_VISIBLE_DEVICES={nvd!r} told the container runtime to give this container no GPU. "
            "Start it with `--gpus all` or NVIDIA_VISIBLE_DEVICES=all."
        )
    return (
        "Start the container with GPUs: `docker run --gpus all …` (NVIDIA Container Toolkit) or, on "
        "Kubernetes, request `nvidia.com/gpu`. On a bare host, create the nodes with `sudo nvidia-modprobe -c=0 -u`."
    )


def _on_the_cpu(facts: Facts) -> str:
    """" TensorFlow will run on the CPU here." for the frameworks this run diagnoses (none: nothing)."""
    titles = [view.title for view in facts.frameworks.values()]
    return f" {' and '.join(titles)} will run on the CPU here." if titles else ""
