"""The PyTorch child: ``import torch``, then what torch says of its build and of the GPUs, read without running a
kernel (``torch.cuda.is_available()`` asks the CUDA runtime for its device count, which initialises the driver; the
names and capabilities initialise torch's CUDA state; nothing is allocated or launched), and on a CUDA build the
allocator configuration the environment sets, looked up in the build's libraries and asked of torch's own parser
(``gpucheck.frameworks.torch.memory``; no CUDA is started for it). Runs only in a probe child:
a hung ``cuInit`` hangs torch with it, and the parent's time limit ends it.

It is a staged child (``gpucheck.probes.steps``): these framework facts first, then, on the GPUs torch can use (on the
CPU under --gpucheck-deep), the placement layer's steps the parent lists (``gpucheck.frameworks.torch.placement``).
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import mmap
import os
import re
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gpucheck.frameworks.torch import memory
from gpucheck.frameworks.torch.facts import AllocatorConfig, FoundFirst, TorchDevice, TorchFacts
from gpucheck.frameworks.torch.placement import set_up
from gpucheck.probes.steps import first_then_steps
from gpucheck.protocol import Checkpoint, stage

#: The key the set-up would write its facts under (it writes none: the framework facts list the devices).
SETUP_KEY = "torch_setup"

T = TypeVar("T")
#: The libraries worth naming among those the process mapped: CUDA's, cuDNN's, NCCL's, the driver's and torch's own.
_LIBRARY = re.compile(
    r"/lib(cuda|cudart|cudnn\w*|cublas\w*|cufft\w*|curand|cusolver\w*|cusparse\w*|nvJitLink|nvrtc\w*|nccl|"
    r"nvidia-ml|torch\w*|c10\w*)\.so[.\w]*$"
)
#: The most lines of /proc/self/maps read (a process maps a few thousand).
_MAPS_LINES = 100_000
#: The dynamic loader's words where a library lacks a symbol another needs of it, with the version node the symbol was
#: linked against: "libcusparse.so.12: undefined symbol: __nvJitLinkAddData_13_0, version libnvJitLink.so.13".
UNDEFINED_SYMBOL = re.compile(r"undefined symbol: (?P<symbol>[^\s,]+),? version (?P<soname>lib[\w+-]+\.so\.\d+)")


def _error(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _read(errors: dict[str, str], what: str, read: Callable[[], T]) -> T | None:
    """``read()``, or None with the exception kept in ``errors`` under ``what``."""
    stage(what)
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - any fault of torch's is the fact we report
        errors[what] = _error(exc)
        return None


def loaded_libraries(maps: str = "/proc/self/maps") -> tuple[str, ...]:
    """The CUDA, cuDNN, NCCL, driver and torch libraries this process has mapped, each once, in mapping order."""
    found: dict[str, None] = {}
    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            for n, line in enumerate(lines):
                if n >= _MAPS_LINES:
                    break
                parts = line.split(maxsplit=5)  # address, perms, offset, device, inode, path (anonymous: none)
                if len(parts) == 6 and _LIBRARY.search(parts[5].strip()):
                    found.setdefault(parts[5].strip())
    except OSError:
        return ()
    return tuple(found)


def found_first(
    error: str, libraries: tuple[str, ...], environ: Mapping[str, str] | None = None,
    wheels: tuple[str, ...] | None = None,
) -> FoundFirst | None:
    """Where ``error`` is the loader's "undefined symbol: S, version libX.so.N": which copy of libX.so.N lacks S, among
    those the loader could have taken, in its order: a copy this process still has mapped that is not the wheels' own
    (preloaded, or loaded by something before torch's libraries), the first on ``LD_LIBRARY_PATH`` (whose folders come
    before a wheel library's RUNPATH; a library whose load failed is unmapped again, so that search is repeated here),
    then the wheels' own copy where it is mapped (the ``nvidia-*`` wheels of versions that do not go together). A copy
    is taken to lack S where S is not among its first bytes (:func:`lacks_symbol`); where none is seen to lack it, the
    first that could not be read, else none is named. ``wheels``: the wheels' copies (found beside torch by default)."""
    m = UNDEFINED_SYMBOL.search(error)
    if m is None:
        return None
    soname, symbol = m["soname"], m["symbol"]
    env = os.environ if environ is None else environ
    wheels = _wheel_copies(soname) if wheels is None else wheels
    own = {os.path.realpath(p) for p in wheels}
    preloaded = {os.path.realpath(p) for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p}
    # The folders as written (an empty entry is the working directory, as the loader reads it), with what each holds.
    search = [(folder, os.path.join(folder or ".", soname)) for folder in env.get("LD_LIBRARY_PATH", "").split(":")]
    on_path = [(folder, os.path.realpath(c)) for folder, c in search if os.path.exists(c)]

    def named(path: str) -> bool:
        name = os.path.basename(path)
        return name == soname or name.startswith(soname + ".")

    candidates: list[tuple[str, str, str | None]] = []
    for path in (p for p in libraries if named(p) and os.path.realpath(p) not in own):
        real = os.path.realpath(path)
        folder = next((f for f, r in on_path if r == real), None)
        how = "LD_PRELOAD" if real in preloaded else "LD_LIBRARY_PATH" if folder is not None else "loaded"
        candidates.append((path, how, folder))
    candidates += [(real, "LD_LIBRARY_PATH", folder) for folder, real in on_path[:1] if real not in own]
    candidates += [(p, "wheel", None) for p in libraries if named(p) and os.path.realpath(p) in own]
    verdicts = [(c, lacks_symbol(c[0], symbol)) for c in candidates]
    chosen = next((c for c, lacks in verdicts if lacks), None) or next((c for c, lacks in verdicts if lacks is None), None)
    if chosen is None:
        return FoundFirst(soname, symbol, None, None, wheels, None, m.group(0))
    loaded, how, folder = chosen
    return FoundFirst(soname, symbol, loaded, how, wheels, folder, m.group(0))


#: How much of a library :func:`lacks_symbol` reads: the dynamic symbol names sit near the start of an ELF file.
SYMBOL_SCAN_BYTES = 256 << 20


def lacks_symbol(path: str, symbol: str) -> bool | None:
    """Whether the library at ``path`` lacks the dynamic symbol ``symbol``: its name, NUL-terminated on both sides as in
    the ELF string table, is not among the file's first :data:`SYMBOL_SCAN_BYTES`; None where the file cannot be read."""
    needle = b"\0" + symbol.encode("utf-8", "surrogateescape") + b"\0"
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return True
            # Mapped, not read: a CUDA library is hundreds of MiB, and the pages are only touched up to the name.
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(needle, 0, SYMBOL_SCAN_BYTES) < 0
    except (OSError, ValueError):
        return None


def _wheel_copies(soname: str) -> tuple[str, ...]:
    """The copies of ``soname`` in the ``nvidia-*`` wheels beside the torch package (found without importing it)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return ()
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    copies: list[str] = []
    for folder in folders:
        site = os.path.dirname(os.path.abspath(folder))
        copies += sorted(glob.glob(os.path.join(glob.escape(site), "nvidia", "*", "lib", glob.escape(soname))))
    return tuple(dict.fromkeys(copies))


def _device(torch: Any, index: int, errors: dict[str, str]) -> TorchDevice:
    def name() -> str:
        return str(torch.cuda.get_device_name(index))

    def capability() -> tuple[int, ...]:
        return tuple(int(v) for v in torch.cuda.get_device_capability(index))

    said = _read(errors, f"torch.cuda.get_device_name({index})", name)
    cap = _read(errors, f"torch.cuda.get_device_capability({index})", capability)
    return TorchDevice(index, said, (cap[0], cap[1]) if cap is not None and len(cap) == 2 else None)


def _availability(torch: Any, errors: dict[str, str]) -> tuple[bool | None, int | None]:
    """``torch.cuda.is_available()`` and ``device_count()``. Before CUDA is initialised, torch 2.14's
    ``device_count()`` answers from NVML (``_device_count_nvml``): it counts a GPU that the CUDA runtime cannot open,
    so only ``is_available()`` (``cudaGetDeviceCount`` through the runtime) says whether torch can use one."""
    available = _read(errors, "torch.cuda.is_available", lambda: bool(torch.cuda.is_available()))
    count = _read(errors, "torch.cuda.device_count", lambda: int(torch.cuda.device_count()))
    return available, count


def _allocator(torch: Any, location: str, errors: dict[str, str]) -> tuple[AllocatorConfig, ...]:
    """The allocator configurations the environment sets, each key looked up in the build's parsing libraries, and
    torch's own parser's word on each (run last: it sets this process's allocator settings; it starts no CUDA)."""
    folder = os.path.dirname(location) if location.endswith(".py") else location
    said = _read(errors, "allocator configuration", lambda: memory.allocator_configs(
        os.environ, memory.parser_libraries(Path(folder)), memory.torch_parser(torch)
    ))
    return said or ()


def probe_torch() -> TorchFacts:
    stage("import torch")
    try:
        torch: Any = importlib.import_module("torch")
    except Exception as exc:  # noqa: BLE001 - any import failure is the fact we report
        text, libraries = _error(exc), loaded_libraries()
        return TorchFacts(False, text, libraries=libraries, found_first=found_first(text, libraries))
    location = getattr(torch, "__file__", None) or ", ".join(getattr(torch, "__path__", []))
    if not hasattr(torch, "__version__") or not hasattr(torch, "cuda"):
        # A file or folder named torch (a script called torch.py, a stray directory) found before the package.
        return TorchFacts(
            False,
            f"`import torch` found {location or 'a namespace package'}, which is not the PyTorch package (a local "
            "file or folder named torch shadows it)",
            location=str(location),
        )
    errors: dict[str, str] = {}
    version = str(torch.__version__)
    # torch only warns where CUDA fails ("CUDA initialization: ... Error 804: ..."), and c10 gives that warning once
    # a process: torch 2.14's ``torch.backends.cudnn.version()`` already asks the runtime for the device count, so the
    # warnings are recorded over every reading, not only ``is_available()``'s. The first reading of a device runs
    # torch's queued capability checks (``_check_capability``: "Found GPU0 ... which is of compute capability (CC)
    # 3.7"), whose warnings are recorded too.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cuda = _read(errors, "torch.version.cuda", lambda: torch.version.cuda)
        compiled = getattr(torch._C, "_cuda_getCompiledVersion", None)
        compiled_cuda = _read(errors, "torch._C._cuda_getCompiledVersion", lambda: int(compiled())) if compiled else None
        cudnn = _read(errors, "torch.backends.cudnn.version", lambda: torch.backends.cudnn.version())
        arch_list = _read(errors, "torch.cuda.get_arch_list", lambda: tuple(str(a) for a in torch.cuda.get_arch_list()))
        available, count = _availability(torch, errors)
        devices = tuple(_device(torch, index, errors) for index in range(count or 0)) if available else ()
    said = tuple(dict.fromkeys(str(w.message) for w in caught))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.cuda's own deprecation of the older parser's name
        allocator = _allocator(torch, str(location), errors) if cuda is not None else ()
    return TorchFacts(
        True,
        None,
        version,
        str(location),
        str(cuda) if cuda is not None else None,
        compiled_cuda,
        int(cudnn) if isinstance(cudnn, int) else None,
        available,
        said,
        count,
        devices,
        arch_list or (),
        loaded_libraries(),
        errors,
        allocator,
    )


def torch_then_steps() -> Iterator[Checkpoint]:
    """The framework facts at once; then, where torch imports, the set-up and the steps the parent lists."""
    facts = probe_torch()
    yield from first_then_steps(facts, facts.importable, SETUP_KEY, set_up)
