"""Compatibility knowledge read from the data files (each carries its ``_source``), and the pure
judgements over it: which driver a CUDA release needs, which CUDA a driver serves, whether a GPU
architecture is covered by a build's SASS or PTX.

Standard library only; no probe or rule state. The data files are the authority, this module only reads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, TypeVar

Version = tuple[int, ...]
T = TypeVar("T")


def parse_version(text: str | None) -> Version | None:
    """``"555.42.06"`` -> ``(555, 42, 6)``; ``"12.5.1"`` -> ``(12, 5, 1)``; None when there is no number."""
    if not text:
        return None
    parts = re.findall(r"\d+", str(text))
    return tuple(int(p) for p in parts) if parts else None


def cuda_int_to_text(value: int | None) -> str | None:
    """cuDriverGetVersion / cudaRuntimeGetVersion encoding: ``12040`` -> ``"12.4"``."""
    if not value:
        return None
    return f"{value // 1000}.{value % 1000 // 10}"


@cache
def data(name: str) -> dict[str, Any]:
    text = resources.files("gpucheck").joinpath(f"data/{name}").read_text(encoding="utf-8")
    loaded = json.loads(text)
    assert isinstance(loaded, dict)
    return loaded


#: The basis of a row read from NVIDIA's release notes (Table 3), the default.
TABLE = "NVIDIA's CUDA toolkit/driver table"


@dataclass(frozen=True)
class ToolkitRow:
    toolkit: str
    version: Version
    linux_driver: Version
    linux_driver_text: str
    #: Where the row comes from, when not from NVIDIA's table itself (see the data file's ``_source``).
    basis: str = TABLE


@cache
def toolkit_rows() -> tuple[ToolkitRow, ...]:
    rows = []
    for row in data("cuda_compat.json")["toolkit_drivers"]:
        version = parse_version(row["version"])
        driver = parse_version(row["linux_driver"])
        assert version is not None and driver is not None
        rows.append(ToolkitRow(row["toolkit"], version, driver, row["linux_driver"], row.get("basis", TABLE)))
    return tuple(rows)


def _text(v: Version) -> str:
    return ".".join(str(p) for p in v)


def row_for(cuda_version: str) -> ToolkitRow | None:
    """The table row of a CUDA release: exact (``12.5.1``), else the GA of its major.minor (``12.5``)."""
    want = parse_version(cuda_version)
    if not want:
        return None
    same = [r for r in toolkit_rows() if r.version[:2] == want[:2]]
    if not same:
        return None
    exact = [r for r in same if r.version[: len(want)] == want]
    if len(want) > 2 and exact:
        return min(exact, key=lambda r: r.version)
    return min(same, key=lambda r: r.version)


def required_driver(cuda_version: str) -> str | None:
    row = row_for(cuda_version)
    return row.linux_driver_text if row else None


def cuda_of_driver(driver_version: str) -> Version | None:
    """The newest CUDA release (major, minor) whose minimum driver this driver meets."""
    drv = parse_version(driver_version)
    if not drv:
        return None
    served = [r.version for r in toolkit_rows() if r.linux_driver <= drv]
    return max(served)[:2] if served else None


def minor_version_floor(cuda_major: int) -> str | None:
    floors = data("cuda_compat.json")["minor_version_compatibility"]
    value = floors.get(str(cuda_major))
    return str(value) if value is not None else None


def min_compute_capability(cuda_major: int) -> str | None:
    value = data("cuda_compat.json")["min_compute_capability"].get(str(cuda_major))
    return str(value) if value is not None else None


@dataclass(frozen=True)
class DriverJudgement:
    #: "ok", "minor-version-compatibility", "too-old" or "unknown".
    status: str
    build_cuda: str
    #: The CUDA version the driver serves (major.minor), from cuDriverGetVersion or the table.
    driver_cuda: str | None
    driver_version: str | None
    required_driver: str | None
    minor_version_floor: str | None
    #: Where ``required_driver`` comes from (a ``ToolkitRow.basis``).
    required_driver_basis: str | None = None


def judge_driver(build_cuda: str, driver_version: str | None, driver_cuda_int: int | None = None) -> DriverJudgement:
    """Can a driver run code built with CUDA ``build_cuda``? By NVIDIA's table when the driver's version
    is known, else by the CUDA version the driver reports; minor version compatibility is the fallback
    within one major (and only from CUDA 11 on, and only above that major's floor)."""
    build = parse_version(build_cuda) or ()
    row = row_for(build_cuda)
    required = row.linux_driver_text if row else None
    drv = parse_version(driver_version)
    dcuda: Version | None = parse_version(cuda_int_to_text(driver_cuda_int)) if driver_cuda_int else None
    if dcuda is None and driver_version:
        dcuda = cuda_of_driver(driver_version)
    floor = minor_version_floor(build[0]) if build else None

    def result(status: str) -> DriverJudgement:
        return DriverJudgement(
            status, build_cuda, _text(dcuda) if dcuda else None, driver_version, required, floor,
            row.basis if row else None,
        )

    if len(build) < 2:
        return result("unknown")
    if drv and required:
        ok = drv >= (parse_version(required) or ())
    elif dcuda:
        ok = dcuda[:2] >= build[:2]
    else:
        return result("unknown")
    if ok:
        return result("ok")
    same_major = dcuda is not None and dcuda[0] == build[0]
    above_floor = floor is not None and (drv is None or drv >= (parse_version(floor) or ()))
    if same_major and above_floor:
        return result("minor-version-compatibility")
    return result("too-old")


# --- architectures --------------------------------------------------------------------

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([a-z]?)$")


@dataclass(frozen=True)
class Arch:
    kind: str  # "sass" or "ptx"
    major: int
    minor: int
    #: Arch-specific variant (sm_90a): runs on exactly that architecture, no forward compatibility.
    specific: bool
    text: str


def parse_archs(values: list[Any] | tuple[Any, ...] | str | None) -> list[Arch]:
    """TensorFlow's ``cuda_compute_capabilities``: ``["sm_60", "compute_90"]`` (older builds: ``"6.0"``
    meaning SASS + PTX of that arch)."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [v for v in re.split(r"[,\s]+", values) if v]
    out: list[Arch] = []
    for raw in values:
        text = str(raw).strip()
        m = _ARCH.match(text)
        if m:
            kind = "sass" if m.group(1) == "sm" else "ptx"
            out.append(Arch(kind, int(m.group(2)), int(m.group(3)), bool(m.group(4)), text))
            continue
        v = parse_version(text)
        if v and len(v) >= 2:
            out.append(Arch("sass", v[0], v[1], False, f"sm_{v[0]}{v[1]}"))
            out.append(Arch("ptx", v[0], v[1], False, f"compute_{v[0]}{v[1]}"))
    return out


@dataclass(frozen=True)
class ArchJudgement:
    #: "sass" (native code for this GPU), "ptx" (JIT-compiled from PTX) or "unsupported".
    status: str
    compute_capability: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    #: The SASS or PTX the GPU would use.
    uses: str | None


def judge_arch(cc_major: int, cc_minor: int, archs: list[Arch]) -> ArchJudgement:
    """SASS runs on the same major architecture with an equal or higher minor (``sm_80`` on 8.6, not
    ``sm_86`` on 8.0); PTX is JIT-compiled for the same or any newer architecture."""
    cc = (cc_major, cc_minor)
    sass = tuple(a.text for a in archs if a.kind == "sass")
    ptx = tuple(a.text for a in archs if a.kind == "ptx")
    runs = [
        a for a in archs
        if a.kind == "sass" and ((a.major, a.minor) == cc if a.specific else (a.major == cc_major and a.minor <= cc_minor))
    ]
    text = f"{cc_major}.{cc_minor}"
    if runs:
        best = max(runs, key=lambda a: (a.major, a.minor))
        return ArchJudgement("sass", text, sass, ptx, best.text)
    jit = [a for a in archs if a.kind == "ptx" and not a.specific and (a.major, a.minor) <= cc]
    if jit:
        best = max(jit, key=lambda a: (a.major, a.minor))
        return ArchJudgement("ptx", text, sass, ptx, best.text)
    return ArchJudgement("unsupported", text, sass, ptx, None)


# --- TensorFlow builds ----------------------------------------------------------------


def tested_build(version: str | None) -> dict[str, str] | None:
    """The tested configuration (CUDA, cuDNN) of a TensorFlow release, by major.minor."""
    v = parse_version(version)
    if not v or len(v) < 2:
        return None
    for row in data("tf_builds.json")["builds"]:
        if parse_version(row["tensorflow"]) == v[:2]:
            return {k: str(val) for k, val in row.items()}
    return None


def cudnn_satisfies(loaded: str, needed: str) -> bool:
    """TensorFlow's rule: matching major version and an equal or higher minor version."""
    have, want = parse_version(loaded), parse_version(needed)
    if not have or not want:
        return True
    if have[0] != want[0]:
        return False
    return len(want) < 2 or (have[1] if len(have) > 1 else 0) >= want[1]


def cudnn_supports_cuda(cudnn_version: str, cuda_major: int) -> bool | None:
    """Whether a cuDNN line ships builds for a CUDA major (data/cuda_libraries.json, cuDNN support matrix);
    None when the matrix does not list that cuDNN major."""
    major = (parse_version(cudnn_version) or (None,))[0]
    majors = data("cuda_libraries.json")["cudnn_support"].get(str(major))
    return None if majors is None else str(cuda_major) in majors


def decode_cudnn_version(value: int) -> str:
    """cudnnGetVersion(): ``90300`` -> ``"9.3.0"`` (cuDNN 9: major*10000); ``8907`` -> ``"8.9.7"`` (cuDNN 8)."""
    if value >= 90000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def libraries_for(cuda_version: str, cudnn_version: str | None) -> list[dict[str, Any]]:
    """The CUDA libraries a build of ``cuda_version`` needs (data/cuda_libraries.json), cuDNN's soname filled in."""
    v = parse_version(cuda_version)
    if not v:
        return []
    entries = data("cuda_libraries.json")["by_cuda_major"].get(str(v[0]), [])
    cudnn_major = (parse_version(cudnn_version) or (None,))[0]
    out = []
    for entry in entries:
        entry = dict(entry)
        if "{cudnn_major}" in entry["soname"]:
            if cudnn_major is None:
                continue
            entry["soname"] = entry["soname"].replace("{cudnn_major}", str(cudnn_major))
        out.append(entry)
    return out


# --- NVLink per GPU model ---------------------------------------------------------------------------------------

#: Prefixes that NVML, nvidia-smi and TensorFlow put before the model name ("NVIDIA H100 PCIe", "Tesla T4").
_VENDOR_PREFIX = re.compile(r"^(?:(?:NVIDIA|Tesla)\s+)+", re.IGNORECASE)


def model_name(name: str) -> str:
    """The device name as the data files' ``names`` patterns see it: ``"NVIDIA H100 80GB HBM3"`` -> ``"H100 80GB HBM3"``."""
    return _VENDOR_PREFIX.sub("", name.strip()).strip()


#: A data file's models, each with its ``names`` patterns compiled: (patterns, what the file says of the model).
ModelTable = tuple[tuple[tuple[re.Pattern[str], ...], T], ...]


def model_table(rows: list[dict[str, Any]], entry: Callable[[dict[str, Any]], T]) -> ModelTable[T]:
    """The ``models`` of a data file (``gpu_performance.json``, ``nvlink_skus.json``), in file order: each row's
    ``names`` (regular expressions, case-insensitive; a row without is reached by no name) and ``entry(row)``."""
    return tuple((tuple(re.compile(p, re.IGNORECASE) for p in row.get("names") or ()), entry(row)) for row in rows)


def find_model(table: ModelTable[T], name: str | None) -> T | None:
    """What ``table`` says of the model the device name ``name`` belongs to (as NVML, nvidia-smi or TensorFlow
    report it): the first row one of whose ``names`` matches the whole of :func:`model_name`; None for None or an
    unknown model."""
    wanted = model_name(name) if name else ""
    if not wanted:
        return None
    return next((e for patterns, e in table if any(p.fullmatch(wanted) for p in patterns)), None)


@dataclass(frozen=True)
class NvlinkSku:
    """What a GPU model's NVLinks look like when healthy (``data/nvlink_skus.json``)."""

    model: str
    #: "fixed" (wired on the board: all active), "bridge" (through optional bridges: 0 or the bridged count),
    #: "none" (no NVLink).
    kind: str
    #: The active counts a healthy card of the model shows.
    healthy: tuple[int, ...]
    #: How many link indices NVML lists for it, where a public report shows it.
    slots: int | None
    sources: tuple[str, ...]
    note: str

    @property
    def designed(self) -> int:
        """The most links it has active when healthy (the bridged count of a bridge card)."""
        return max(self.healthy)


def _nvlink_sku(row: dict[str, Any]) -> NvlinkSku:
    return NvlinkSku(
        model=str(row["model"]),
        kind=str(row["kind"]),
        healthy=tuple(int(n) for n in row["healthy"]),
        slots=int(row["slots"]) if row.get("slots") is not None else None,
        sources=tuple(str(s) for s in row["sources"]),
        note=str(row.get("note", "")),
    )


@cache
def _nvlink_table() -> ModelTable[NvlinkSku]:
    return model_table(data("nvlink_skus.json")["models"], _nvlink_sku)


def nvlink_sku(name: str | None) -> NvlinkSku | None:
    """The NVLink design of the model ``name`` (as NVML reports it) belongs to; None for an unknown model."""
    return find_model(_nvlink_table(), name)
