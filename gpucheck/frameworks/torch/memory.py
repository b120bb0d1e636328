"""PyTorch's resources read without starting CUDA: its caching allocator's configuration (``PYTORCH_CUDA_ALLOC_CONF``,
``PYTORCH_ALLOC_CONF``) parsed as torch parses it, each key looked up in the libraries of the installed build that
parse it, and ``/dev/shm``, where NCCL makes its shared-memory segments between the GPUs of one machine.

How torch parses the variable (read in torch 2.14.1's own headers, ``torch/include/c10/core/AllocatorConfig.h``,
``ConfigTokenizer``, and ``torch/include/c10/cuda/CUDAAllocatorConfig.h``): the text is cut into tokens at ``,``,
``:``, ``[`` and ``]`` (each a token of its own), whitespace dropped; the options are ``key:value`` separated by
commas, a value one token or a ``[...]`` list. Earlier torch (``lexArgs`` in ``CUDAAllocatorConfig.cpp``) cut it
the same way and said "Unrecognized CachingAllocator option: KEY"; 2.14 says "Unrecognized key 'KEY' in Accelerator
allocator config.", at the first allocation, while an option without ``:value`` aborts ``import torch`` itself (its
CUDA library parses the variable as it loads: "Index out of bounds in ConfigTokenizer").

The keys a build knows are found in the build: a key is known where it is a NUL-terminated string in one of the
libraries that parse the variable (``libc10.so``: torch 2.8 and later parse the common keys there; ``libc10_cuda.so``:
the CUDA keys, and every key in earlier torch). Pure functions, but for the file reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck.frameworks.torch.facts import AllocatorConfig, SharedMemory

#: The variables torch reads its allocator configuration from, in the order torch 2.14's CUDA allocator reads them
#: (``PYTORCH_ALLOC_CONF`` came with torch 2.8; an earlier build ignores it, which its libraries show).
VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
#: The libraries of torch/lib that parse it.
PARSERS = ("libc10_cuda.so", "libc10.so")
#: The most bytes read of one library (libc10.so of torch 2.14.1 is 1.6 MB, libc10_cuda.so 0.7 MB).
_MAX_LIBRARY_BYTES = 64 << 20
_SPECIAL = ",:[]"


def tokens(text: str) -> list[str]:
    """``ConfigTokenizer``: ``,``, ``:``, ``[`` and ``]`` are tokens of their own, whitespace is dropped."""
    out: list[str] = []
    buffer = ""
    for ch in text:
        if ch in _SPECIAL:
            if buffer:
                out.append(buffer)
                buffer = ""
            out.append(ch)
        elif not ch.isspace():
            buffer += ch
    if buffer:
        out.append(buffer)
    return out


@dataclass(frozen=True)
class Parsed:
    """A configuration as torch reads it: its keys in order, and where it is not a list of ``key:value`` options,
    what is wrong (None where the form is sound)."""

    keys: tuple[str, ...]
    malformed: str | None


def parse(text: str) -> Parsed:
    """The keys of a configuration and whether its form is one torch accepts: ``key:value`` or ``key:[v,...]``
    options separated by commas (an empty text, and a trailing comma, are accepted)."""
    toks = tokens(text)
    keys: list[str] = []
    i = 0
    while i < len(toks):
        key = toks[i]
        if key in _SPECIAL:
            return Parsed(tuple(keys), f"{key!r} where an option's name belongs (token {i})")
        keys.append(key)
        if i + 1 >= len(toks) or toks[i + 1] != ":":
            return Parsed(tuple(keys), f"the option {key!r} has no ':value'")
        i += 2
        if i >= len(toks) or toks[i] in ",:]":
            return Parsed(tuple(keys), f"the option {key!r} has no value after ':'")
        if toks[i] == "[":
            while i < len(toks) and toks[i] != "]":
                i += 1
            if i >= len(toks):
                return Parsed(tuple(keys), f"the list of {key!r} has no closing ']'")
        i += 1
        if i < len(toks):
            if toks[i] != ",":
                return Parsed(tuple(keys), f"{toks[i]!r} after the value of {key!r}, where ',' belongs")
            i += 1
    return Parsed(tuple(keys), None)


def library_holds(data: bytes, name: str) -> bool:
    """Whether ``name`` is a NUL-terminated string of a library's bytes (the tail of one: the linker merges a literal
    into a longer one that ends with it)."""
    return name.encode() + b"\0" in data


def parser_libraries(torch_dir: Path) -> dict[str, bytes]:
    """The bytes of the libraries of ``torch_dir/lib`` that parse the configuration, by path (those present)."""
    out: dict[str, bytes] = {}
    for name in PARSERS:
        path = torch_dir / "lib" / name
        try:
            with open(path, "rb") as f:
                out[str(path)] = f.read(_MAX_LIBRARY_BYTES)
        except OSError:
            continue
    return out


def allocator_configs(
    environment: Mapping[str, str | None],
    libraries: Mapping[str, bytes],
    torch_parser: Callable[[str], str | None] | None = None,
) -> tuple[AllocatorConfig, ...]:
    """Each variable of ``VARIABLES`` set in ``environment`` that the build reads (its name is in one of its parsing
    libraries), with its keys, those none of ``libraries`` holds, its form, and where ``torch_parser`` is given, what
    torch's own parser said of it (None: accepted)."""
    out = []
    for variable in VARIABLES:
        value = environment.get(variable)
        if value is None or not any(library_holds(data, variable) for data in libraries.values()):
            continue
        parsed = parse(value)
        unknown = tuple(k for k in parsed.keys if not any(library_holds(data, k) for data in libraries.values()))
        said = torch_parser(value) if torch_parser is not None and parsed.malformed is None else None
        out.append(AllocatorConfig(variable, value, parsed.keys, unknown, parsed.malformed, tuple(libraries), said))
    return tuple(out)


def torch_parser(torch: Any) -> Callable[[str], str | None] | None:
    """torch's own parser of the configuration, run without starting CUDA, as a function that gives its error in one
    line or None: ``torch._C._accelerator_setAllocatorSettings`` (torch 2.14), else
    ``torch._C._cuda_cudaCachingAllocator_set_allocator_settings`` (earlier torch); None where the build has
    neither. It sets this process's allocator settings, so only the PyTorch child calls it, after its readings."""
    call = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or getattr(
        torch._C, "_cuda_cudaCachingAllocator_set_allocator_settings", None
    )
    if call is None:
        return None

    def said(value: str) -> str | None:
        try:
            call(value)
        except Exception as exc:  # noqa: BLE001 - torch's refusal is the fact we report
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None

    return said


# --- /dev/shm ---------------------------------------------------------------------------------------------------

#: What NCCL's troubleshooting guide asks a container to give: "--shm-size=1g --ulimit memlock=-1"
#: (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#shared-memory).
NCCL_SHM_BYTES = 1 << 30
SHM = "/dev/shm"


def shared_memory(path: str, stat: os.statvfs_result, writable: bool) -> SharedMemory:
    """``/dev/shm`` from its ``os.statvfs``: its size and what is free to an unprivileged process (``f_bavail``)."""
    return SharedMemory(path, stat.f_frsize * stat.f_blocks, stat.f_frsize * stat.f_bavail, writable, None)


def read_shared_memory(root: Path) -> SharedMemory:
    """``/dev/shm`` below the host view ``root`` (``GPUCHECK_HOST_ROOT``, ``/`` on a real machine); never raises."""
    path = root / SHM.lstrip("/")
    try:
        return shared_memory(str(path), os.statvfs(path), os.access(path, os.W_OK))
    except OSError as exc:
        return SharedMemory(str(path), None, None, None, f"{type(exc).__name__}: {exc.strerror or exc}")


def short_bytes(n: int | None) -> str:
    """Bytes in MiB or GiB as `df -h` would say them: 67108864 -> "64 MiB"."""
    if n is None:
        return "?"
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB".replace(".0 ", " ")
    return f"{n / (1 << 20):.0f} MiB"

