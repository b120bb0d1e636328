"""Build fake driver libraries from the C sources in tests/fakes and lay them out like a real install.

A library is compiled once per test session with the system C compiler (into a cache folder that
every pytest-xdist worker of the session shares, each build under its source's hash and moved into place
atomically, so two workers building one library at once are no harm), then installed as
``<dir>/<soname-stem>.so.<version>`` with the link ``<soname>`` beside it
(``libcuda.so.1 -> libcuda.so.550.54.15``), as a driver install lays them out:
TensorFlow reads the driver version from that file name (../shared/PITFALLS.md).

Scenarios are JSON files under tests/scenarios; :func:`flatten` turns one into
the ``key=value`` lines that ``tests/fakes/fakecfg.h`` reads through
``GPUCHECK_FAKE_SCENARIO``.

GPU memory is shared by the processes of one fake machine, as on a real GPU: the fake libcuda
records what each process holds in a ledger beside the scenario file (:func:`ledger_path`,
``tests/fakes/fakeledger.h``), its cuMemGetInfo and the fake NVML's memory and process queries read
it, and a process that dies gives its memory back. :func:`hold_gpu_memory` starts a process that
holds some.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FAKES = Path(__file__).resolve().parent / "fakes"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


@dataclass(frozen=True)
class FakeLibrary:
    soname: str
    source: str
    #: Preprocessor symbols for a scenario-independent build variant (e.g. an old driver that lacks
    #: an entry point: absent from the .so, not an error code).
    defines: tuple[str, ...] = ()
    #: Sonames recorded as DT_NEEDED, as the real library has them (libcusparse.so.12 needs
    #: libnvJitLink.so.12): without them beside it, dlopen fails naming the dependency.
    needs: tuple[str, ...] = ()


LIBCUDA = FakeLibrary("libcuda.so.1", "libcuda.c")
LIBNVML = FakeLibrary("libnvidia-ml.so.1", "libnvidia-ml.c")
#: NVML of the 470 branch: no nvmlDeviceGetMemoryInfo_v2, no ..._v3 process calls, no ClocksEvent names.
LIBNVML_R470 = FakeLibrary(
    "libnvidia-ml.so.1",
    "libnvidia-ml.c",
    ("FAKE_NVML_NO_MEMORY_V2", "FAKE_NVML_NO_PROCESSES_V3", "FAKE_NVML_NO_CLOCKS_EVENT"),
)
#: CUDA 12 user-space libraries as the nvidia-*-cu12 wheels ship them. A scenario names one
#: as "libcudart@12.5.82" to install it as libcudart.so.12.5.82 with the libcudart.so.12 link.
LIBCUDART = FakeLibrary("libcudart.so.12", "libcudart.c")
LIBCUDNN = FakeLibrary("libcudnn.so.9", "libcudnn.c")
LIBCUBLAS = FakeLibrary("libcublas.so.12", "libcudamath.c")
LIBCUBLASLT = FakeLibrary("libcublasLt.so.12", "libcudamath.c")
LIBCUFFT = FakeLibrary("libcufft.so.11", "libcudamath.c")
LIBCUSOLVER = FakeLibrary("libcusolver.so.11", "libcudamath.c")
LIBCUSPARSE = FakeLibrary("libcusparse.so.12", "libcudamath.c", needs=("libnvJitLink.so.12",))
LIBNVJITLINK = FakeLibrary("libnvJitLink.so.12", "libcudamath.c")
#: Under the CUDA 13 soname: a copy without the versioned entry points the cu13 wheels' libcusparse links against
#: (``__nvJitLinkAddData_13_0``...), as an older toolkit's is to newer wheels (tests/test_torch_cuda_scenarios.py).
LIBNVJITLINK13 = FakeLibrary("libnvJitLink.so.13", "libcudamath.c")
#: Every library TensorFlow 2.21 must dlopen before it registers a GPU (dlopen_checker.cc), cuDNN last.
CUDA12_RUNTIME = (
    "libcudart@12.5.82",
    "libcublas@12.5.3.2",
    "libcublasLt@12.5.3.2",
    "libcufft@11.2.3.61",
    "libcusolver@11.6.3.83",
    "libcusparse@12.5.1.3",
    "libnvJitLink@12.5.82",
)


def _stub_dir(cc: str, sonames: tuple[str, ...], cache_dir: Path) -> Path:
    """Empty libraries named after ``sonames``, only to link DT_NEEDED entries against."""
    stubs = cache_dir / "link-stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    src = stubs / "stub.c"
    if not src.exists():
        _write_atomically(src, lambda tmp: tmp.write_text("void gpucheck_link_stub(void) {}\n"))
    for soname in sonames:
        out = stubs / soname
        if not out.exists():

            def link(tmp: Path, soname: str = soname) -> None:
                cmd = [cc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(tmp), str(src)]
                subprocess.run(cmd, capture_output=True, text=True, check=True)

            _write_atomically(out, link)
    return stubs


def _write_atomically(path: Path, make: Callable[[Path], object]) -> None:
    """``make`` writes a temporary file of this process beside ``path``, which is then renamed to it: another
    process (an xdist worker of the same session) sees the whole file or none, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        make(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _headers() -> str:
    """Every header the fakes include (fakecfg.h, fakeledger.h): part of each build's cache key."""
    return "".join(h.read_text() for h in sorted(FAKES.glob("*.h")))


def build(lib: FakeLibrary, out_dir: Path, version: str, cache_dir: Path) -> Path:
    """Compile ``lib`` (cached per source content) and install it into ``out_dir`` as
    ``<stem>.so.<version>`` plus the ``soname`` link. Returns ``out_dir``."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")
    src = FAKES / lib.source
    digest = hashlib.sha256(
        (src.read_text() + _headers() + " ".join(lib.defines + lib.needs)).encode()
    ).hexdigest()[:16]
    built = cache_dir / f"{lib.soname}-{digest}.so"
    if not built.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)

        def compile_to(tmp: Path) -> None:
            cmd = [cc, "-shared", "-fPIC", "-O1", "-Wall", f"-Wl,-soname,{lib.soname}", "-I", str(FAKES), "-o", str(tmp), str(src)]
            cmd[1:1] = [f"-D{d}" for d in lib.defines]
            if lib.needs:
                stubs = _stub_dir(cc, lib.needs, cache_dir)
                cmd += ["-Wl,--no-as-needed", f"-L{stubs}", *[f"-l:{n}" for n in lib.needs]]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"compiling {src.name} failed:\n{proc.stderr}")

        _write_atomically(built, compile_to)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = lib.soname.split(".so")[0]
    real = out_dir / f"{stem}.so.{version}"
    shutil.copyfile(built, real)
    link = out_dir / lib.soname
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(real.name)
    return out_dir


def load_scenario(name: str) -> dict[str, Any]:
    data = json.loads((SCENARIOS / f"{name}.json").read_text())
    assert isinstance(data, dict)
    return data


def flatten(data: Any, prefix: str = "") -> list[str]:
    """``{"gpus": [{"name": "T4"}]}`` -> ``["gpus.count=1", "gpus.0.name=T4"]``."""
    lines: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key.startswith("_"):
                continue
            lines += flatten(value, f"{prefix}{key}.")
    elif isinstance(data, list):
        lines.append(f"{prefix}count={len(data)}")
        for i, value in enumerate(data):
            lines += flatten(value, f"{prefix}{i}.")
    else:
        value = {True: "1", False: "0", None: ""}.get(data, data) if isinstance(data, (bool, type(None))) else data
        lines.append(f"{prefix[:-1]}={value}")
    return lines


def write_scenario(data: dict[str, Any], path: Path) -> Path:
    path.write_text("\n".join(flatten(data)) + "\n")
    return path


def make_host_root(root: Path, host: dict[str, Any]) -> Path:
    """Lay out a host view for GPUCHECK_HOST_ROOT from a scenario's ``host`` section:

    ``pci``: list of {bus_id, vendor, device, class, driver}; ``module_version``: the nvidia module's
    version (writes /proc/driver/nvidia/version and /sys/module/nvidia) or null; ``version_line``: the
    first line of /proc/driver/nvidia/version as a real machine wrote it (default: one naming
    ``module_version``); ``modules``: other loaded modules; ``dev``: device node names, each a link to
    /dev/null (a character device anyone may open); ``links``: ``{path in the host view: target}``, each
    a symbolic link to a path of this machine (``{"usr/local/cuda": "/usr/local/cuda"}``: the CUDA
    toolkit installed here stands for the one the modelled machine had). A target that does not exist
    here leaves a dangling link, as a toolkit that is not installed: :func:`missing_link_targets` names
    those, for tests that need them to skip or to expect what their absence causes. ``files``: ``{path in
    the host view: {"text": ..., "mode": ...}}``, files written there (a toolkit's ``bin/ptxas`` as a script
    that answers ``--version`` as the real one does).
    """
    pci = root / "sys/bus/pci/devices"
    pci.mkdir(parents=True, exist_ok=True)
    drivers = root / "sys/bus/pci/drivers"
    for dev in host.get("pci", []):
        d = pci / dev["bus_id"]
        d.mkdir(parents=True, exist_ok=True)
        (d / "vendor").write_text(dev.get("vendor", "0x10de") + "\n")
        (d / "device").write_text(dev.get("device", "0x0000") + "\n")
        (d / "class").write_text(dev.get("class", "0x030200") + "\n")
        if dev.get("driver"):
            target = drivers / dev["driver"]
            target.mkdir(parents=True, exist_ok=True)
            (d / "driver").symlink_to(target)
    version = host.get("module_version")
    if version:
        proc = root / "proc/driver/nvidia"
        proc.mkdir(parents=True, exist_ok=True)
        line = host.get("version_line") or (
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Release Build  (dvs-builder@U16-I3-B03-4-3)"
        )
        (proc / "version").write_text(line + "\n" + "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
        (root / "sys/module/nvidia").mkdir(parents=True, exist_ok=True)
    for module in host.get("modules", []):
        (root / "sys/module" / module).mkdir(parents=True, exist_ok=True)
    dev_dir = root / "dev"
    dev_dir.mkdir(parents=True, exist_ok=True)
    for node in host.get("dev", []):
        (dev_dir / node).symlink_to("/dev/null")
    for path, target in host.get("links", {}).items():
        link = root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    for path, spec in host.get("files", {}).items():
        file = root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(spec["text"])
        file.chmod(spec.get("mode", 0o644))
    return root


def missing_link_targets(host: Mapping[str, Any]) -> list[str]:
    """The targets of a scenario's ``host.links`` that do not exist on this machine."""
    return [target for target in host.get("links", {}).values() if not os.path.exists(target)]


# --- GPU memory shared across the processes of a fake machine -------------------------------------

HOLDMEM = FAKES / "holdmem.c"


def ledger_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The memory ledger of the machine ``env`` (default: this process's environment) describes:
    ``$GPUCHECK_FAKE_SCENARIO.ledger`` unless the scenario names one (key ``memory_ledger``)."""
    env = os.environ if env is None else env
    scenario = env.get("GPUCHECK_FAKE_SCENARIO")
    if not scenario:
        return None
    for line in Path(scenario).read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "memory_ledger" and value:
            return Path(value)
    return Path(scenario + ".ledger")


def _default_tool_cache() -> Path:
    return Path(tempfile.gettempdir()) / f"gpucheck-fake-tools-{os.getuid()}"


def build_holder(cache_dir: Path | None = None) -> Path:
    """Compile tests/fakes/holdmem.c (cached by content) and return the executable's path."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")
    cache_dir = cache_dir or _default_tool_cache()
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(HOLDMEM.read_bytes()).hexdigest()[:16]
    exe = cache_dir / f"holdmem-{digest}"
    if not exe.exists():
        tmp = cache_dir / f"holdmem-{digest}.{os.getpid()}.tmp"
        cmd = [cc, "-O1", "-Wall", "-o", str(tmp), str(HOLDMEM), "-ldl"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {HOLDMEM.name} failed:\n{proc.stderr}")
        tmp.replace(exe)
    return exe


def hold_gpu_memory(
    gpu: int,
    nbytes: int | None = None,
    *,
    leave: int | None = None,
    env: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    timeout: float = 30.0,
) -> subprocess.Popen[str]:
    """Start a process that holds ``nbytes`` of GPU memory on CUDA device ``gpu`` (an ordinal, after
    CUDA_VISIBLE_DEVICES) through the fake libcuda, and return it once it holds them.

    ``leave=X`` instead of ``nbytes``: hold everything but X bytes of what the helper sees free in its
    own context. The helper's context costs the scenario's ``gpus.N.context_memory`` besides what it
    allocates (NVML lists it with both), and so does the context of the next process: that one sees
    X - context_memory free. To leave a new process F bytes, pass ``leave=F + context_memory``.

    ``env`` is the environment of the fake machine (default: this process's, which the
    ``fake_machine`` fixture sets: LD_LIBRARY_PATH, GPUCHECK_FAKE_SCENARIO). The process holds the
    memory until it is killed (``proc.kill(); proc.wait()``, or ``terminate``); the fake driver then
    gives it back. Raises RuntimeError, with what the helper printed, if it could not allocate
    (e.g. ``failed cuMemAlloc_v2 2``: out of memory) or did not report within ``timeout`` seconds.
    """
    if (nbytes is None) == (leave is None):
        raise TypeError("hold_gpu_memory needs nbytes or leave, not both")
    amount = str(nbytes) if leave is None else f"free-{leave}"
    exe = build_holder(cache_dir)
    proc = subprocess.Popen(
        [str(exe), str(gpu), amount],
        env=dict(os.environ if env is None else env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = ""
    # The helper prints one line, "held ..." or "failed ...", so waiting on the pipe then reading a line
    # does not block past the deadline.
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            continue
        line = proc.stdout.readline()
        if line.startswith("held "):
            return proc
        if not line or line.startswith("failed "):
            break
    if proc.poll() is None:
        proc.kill()
    out = line + (proc.communicate(timeout=5)[0] or "")
    raise RuntimeError(f"holdmem {gpu} {amount} did not hold the memory (status {proc.returncode}): {out.strip()}")
