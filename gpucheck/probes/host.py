"""Hardware and kernel facts from sysfs, procfs and /dev: plain file reads, no driver calls.

Every path is read below one root (``/`` normally; ``GPUCHECK_HOST_ROOT`` points
it at a copy of a host's files for tests, or at a chroot to inspect). Reading
never raises: an unreadable file is recorded with its error. Reading never blocks
on what is not a regular file (a FIFO, a device): such a file is an error, not a
wait; and the diagnosis bounds these reads in time as a whole (a wedged driver can
make even ``/proc/driver/nvidia`` block), see ``gpucheck.diagnosis``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TypeVar

from gpucheck.facts import DeviceNode, DriverGpu, HardwareFacts, KernelFacts, PciDevice
from gpucheck.isolation import in_daemon_thread

#: How long the in-process reads of sysfs, procfs and /dev may take (milliseconds on a sound machine).
HOST_READ_TIMEOUT_S = 10.0

NVIDIA_VENDOR = "0x10de"
#: PCI base class 0x03: display controller (VGA 0x0300, 3D 0x0302).
DISPLAY_CLASS_PREFIX = "0x03"
_MODULE_VERSION = re.compile(r"Kernel Module(?: for [\w-]+)?\s+([0-9][0-9.]*)")


#: Environment variables the rules weigh, recorded as facts (``Facts.environment``).
ENVIRONMENT_KEYS = (
    "LD_LIBRARY_PATH",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_CACHE_DISABLE",
    "CUDA_CACHE_MAXSIZE",
    "CUDA_CACHE_PATH",
    "TF_GPU_ALLOCATOR",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "XLA_FLAGS",
)


def probe_environment(more: tuple[str, ...] = ()) -> dict[str, str | None]:
    """The variables the rules weigh (``ENVIRONMENT_KEYS``, and ``more``: the units' own), as this run sees them."""
    return {key: os.environ.get(key) for key in (*ENVIRONMENT_KEYS, *more)}


def host_root() -> Path:
    return Path(os.environ.get("GPUCHECK_HOST_ROOT") or "/")


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


#: More than any sysfs or procfs file this reads holds.
_MAX_BYTES = 1 << 20


def read_host_file(path: Path) -> str:
    """The text of a regular file (at most 1 MiB); anything else raises OSError at once instead of waiting
    for a writer (a FIFO) or reading forever (a device)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file"
            raise OSError(errno.EINVAL, f"not a regular file ({kind})", str(path))
        os.set_blocking(fd, True)
        data = os.read(fd, _MAX_BYTES)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _read(path: Path) -> str | None:
    try:
        return read_host_file(path).strip()
    except OSError:
        return None


def probe_hardware(root: Path | None = None) -> HardwareFacts:
    root = root or host_root()
    base = _under(root, "/sys/bus/pci/devices")
    wsl = _under(root, "/dev/dxg").exists()
    try:
        entries = sorted(os.listdir(base))
    except OSError as exc:
        return HardwareFacts(str(base), False, f"{type(exc).__name__}: {exc}", 0, wsl, (), ())
    devices = []
    for bus_id in entries:
        dev = base / bus_id
        vendor = (_read(dev / "vendor") or "").lower()
        if vendor != NVIDIA_VENDOR:
            continue
        driver_link = dev / "driver"
        driver = os.path.basename(os.readlink(driver_link)) if driver_link.is_symlink() else None
        devices.append(
            PciDevice(
                bus_id=bus_id,
                vendor=vendor,
                device=(_read(dev / "device") or "").lower(),
                pci_class=(_read(dev / "class") or "").lower(),
                driver=driver,
            )
        )
    gpus = tuple(d for d in devices if d.pci_class.startswith(DISPLAY_CLASS_PREFIX))
    return HardwareFacts(str(base), True, None, len(entries), wsl, tuple(devices), gpus)


def _node(root: Path, path: str) -> DeviceNode:
    full = _under(root, path)
    try:
        st = full.stat()
    except FileNotFoundError:
        return DeviceNode(path, False, False, False, False, None, None)
    except OSError as exc:
        return DeviceNode(path, False, False, False, False, None, f"{type(exc).__name__}: {exc}")
    return DeviceNode(
        path=path,
        exists=True,
        is_char_device=stat.S_ISCHR(st.st_mode),
        readable=os.access(full, os.R_OK),
        writable=os.access(full, os.W_OK),
        mode=stat.filemode(st.st_mode),
        error=None,
    )


def probe_kernel(gpu_count: int, root: Path | None = None) -> KernelFacts:
    """``gpu_count`` is how many ``/dev/nvidia<N>`` nodes to expect (at least one is looked for)."""
    root = root or host_root()
    version_file = _under(root, "/proc/driver/nvidia/version")
    version_line = module_version = version_error = None
    try:
        text = read_host_file(version_file)
        version_line = text.splitlines()[0].strip() if text.strip() else ""
        m = _MODULE_VERSION.search(text)
        module_version = m.group(1) if m else None
    except OSError as exc:
        version_error = f"{type(exc).__name__}: {exc.strerror or exc}"
    paths = ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    dev_dir = _under(root, "/dev")
    try:
        numbered = sorted(
            (n for n in os.listdir(dev_dir) if re.fullmatch(r"nvidia\d+", n)), key=lambda n: int(n[6:])
        )
    except OSError:
        numbered = []
    wanted = [f"nvidia{i}" for i in range(max(gpu_count, 1))]
    for name in sorted(set(numbered) | set(wanted), key=lambda n: int(n[6:])):
        paths.append(f"/dev/{name}")
    nodes = tuple(_node(root, p) for p in paths)
    competing = tuple(
        m for m in ("nouveau", "vfio_pci") if _under(root, f"/sys/module/{m}").is_dir()
    )
    driver_gpus = _driver_gpus(root) if version_error is None else None
    params = _read(_under(root, "/proc/driver/nvidia/params")) or ""
    disabled = re.search(r"^NvLinkDisable:\s*(\d+)", params, re.MULTILINE)
    return KernelFacts(
        version_file=str(version_file),
        version_line=version_line,
        module_version=module_version,
        version_error=version_error,
        nodes=nodes,
        module_in_sysfs=_under(root, "/sys/module/nvidia").is_dir(),
        competing_modules=competing,
        nvlink_disabled=bool(int(disabled.group(1))) if disabled else None,
        driver_gpus=driver_gpus,
    )


_MINOR = re.compile(r"^Device Minor:\s*(\d{1,6})\s*$", re.MULTILINE)
#: More GPUs than any machine has: a folder listing more is read no further.
_MAX_DRIVER_GPUS = 1024


def _driver_gpus(root: Path) -> tuple[DriverGpu, ...] | None:
    """The GPUs ``/proc/driver/nvidia/gpus`` lists, each with the "Device Minor" of its ``information`` file (None
    where that does not say); None where the folder cannot be listed."""
    folder = _under(root, "/proc/driver/nvidia/gpus")
    try:
        names = sorted(os.listdir(folder))[:_MAX_DRIVER_GPUS]
    except OSError:
        return None
    out = []
    for name in names:
        m = _MINOR.search(_read(folder / name / "information") or "")
        out.append(DriverGpu(name, int(m.group(1)) if m else None))
    return tuple(out)


T = TypeVar("T")


def _within(fn: Callable[[], T], timeout: float) -> T | None:
    """``fn()``, or None when it has not returned within ``timeout`` seconds. It runs in a daemon thread: a
    read stuck in the kernel (a wedged driver) cannot be interrupted, but the run goes on without it."""
    try:
        return in_daemon_thread(fn).result(timeout)
    except FutureTimeout:
        return None


def probe_hardware_within(
    timeout: float, root: Path | None = None, probe: Callable[[Path], HardwareFacts] = probe_hardware
) -> HardwareFacts:
    """``probe(root)`` (:func:`probe_hardware`), bounded in time; past ``timeout`` the facts say the bus did
    not answer."""
    root = root or host_root()
    facts = _within(lambda: probe(root), timeout)
    if facts is not None:
        return facts
    source = str(_under(root, "/sys/bus/pci/devices"))
    return HardwareFacts(source, False, f"reading {source} did not finish within {timeout:g} s", 0, False, (), (), True)


def probe_kernel_within(
    gpu_count: int, timeout: float, root: Path | None = None, probe: Callable[[int, Path], KernelFacts] = probe_kernel
) -> KernelFacts:
    """``probe(gpu_count, root)`` (:func:`probe_kernel`), bounded in time; past ``timeout`` the facts say what
    did not answer."""
    root = root or host_root()
    facts = _within(lambda: probe(gpu_count, root), timeout)
    if facts is not None:
        return facts
    version_file = str(_under(root, "/proc/driver/nvidia/version"))
    return KernelFacts(
        version_file=version_file,
        version_line=None,
        module_version=None,
        version_error=f"reading {version_file} and the /dev/nvidia* nodes did not finish within {timeout:g} s",
        nodes=(),
        module_in_sysfs=False,
        competing_modules=(),
        unanswered=True,
    )
