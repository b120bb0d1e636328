"""Classify a framework's log lines with the patterns of its table (:class:`Table`): TensorFlow's in
data/log_patterns.json, the default; each framework unit names its own (``Framework.log_patterns``, gathered by
``registry.log_tables``), PyTorch's in frameworks/torch/log_patterns.json.

Used by ``gpucheck explain`` on a log a person pasted (every framework's table, the log's own framework's first), and
by the framework rules on the TensorFlow probe child's stderr (TensorFlow's table). Pure functions, standard library
only. Harmless lines (oneDNN, NUMA node, cpu_feature_guard, ...) are recognised so that they are reported as such and
never become a finding.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from gpucheck import knowledge
from gpucheck.blocking import root_cause
from gpucheck.model import Finding, Severity, finding

_SEVERITY = {"blocker": Severity.BLOCKER, "degraded": Severity.DEGRADED, "info": Severity.INFO}
_CODE_IN_PARENS = re.compile(r"\((\d+)\)\s*$")
_ERROR_NAME = re.compile(r"\b(CUDA_ERROR_[A-Z_]+)\b")


@dataclass(frozen=True)
class Pattern:
    id: str
    regex: re.Pattern[str]
    finding: str | None
    severity: str
    summary: str
    cause: str
    remedy: str
    report: str | None
    #: Its remedy installs CUDA pieces the way of TensorFlow >= 2.14 (pip's tensorflow[and-cuda], -cu12 wheels):
    #: a log of an older TensorFlow gets its era's remedy of this kind instead (:func:`era_remedy`):
    #: "libraries", "toolchain" (ptxas, libdevice) or "cudnn-version"; None: the remedy fits every era.
    remedy_old_era: str | None = None
    #: The framework whose table it is in ("tensorflow", "torch"): only TensorFlow's findings are told its era.
    framework: str = "tensorflow"


#: TensorFlow's table, the default of every function here (``Framework.log_patterns`` of the TensorFlow unit).
TENSORFLOW = "data/log_patterns.json"


@dataclass(frozen=True)
class Table:
    """One framework's patterns: its name and title, its patterns in order, and its ``signature``, the lines that
    show a log is this framework's (its patterns are then tried first); None: the table is tried in its turn."""

    framework: str
    title: str
    patterns: tuple[Pattern, ...]
    signature: re.Pattern[str] | None


@dataclass(frozen=True)
class LineMatch:
    line: str
    pattern: Pattern
    groups: dict[str, str]
    #: The finding this line supports (a cuInit code can redirect the pattern's own).
    finding: str | None


@dataclass
class Classification:
    matches: list[LineMatch] = field(default_factory=list)
    unrecognised: list[str] = field(default_factory=list)

    @property
    def harmless(self) -> list[LineMatch]:
        return [m for m in self.matches if m.finding is None]

    @property
    def meaningful(self) -> list[LineMatch]:
        return [m for m in self.matches if m.finding is not None]


@cache
def table_data(path: str) -> dict[str, Any]:
    """A table's JSON: ``path`` relative to the gpucheck package (``data/log_patterns.json``), or absolute."""
    if os.path.isabs(path):
        with open(path, encoding="utf-8") as f:
            loaded = json.load(f)
    else:
        loaded = json.loads(resources.files("gpucheck").joinpath(path).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@cache
def table(path: str = TENSORFLOW, framework: str = "tensorflow", title: str = "TensorFlow") -> Table:
    """The table of the patterns file at ``path`` (see :func:`table_data`)."""
    raw = table_data(path)
    out = [
        Pattern(
            id=p["id"],
            regex=re.compile(p["regex"]),
            finding=p.get("finding"),
            severity=p["severity"],
            summary=p.get("summary", ""),
            cause=p.get("cause", ""),
            remedy=p.get("remedy", ""),
            report=p.get("report"),
            remedy_old_era=p.get("remedy_old_era"),
            framework=framework,
        )
        for p in raw["patterns"]
    ]
    signature = raw.get("signature")
    return Table(framework, title, tuple(out), re.compile(signature) if signature else None)


def patterns() -> tuple[Pattern, ...]:
    """TensorFlow's patterns."""
    return table().patterns


def ordered(lines: list[str] | tuple[str, ...], tables: tuple[Table, ...] | None = None) -> tuple[Table, ...]:
    """The tables to read ``lines`` with, in the order they are tried: those whose signature a line shows first (the
    log's own framework), then the others in their order; TensorFlow's alone when none is given."""
    given = tables or (table(),)
    own = tuple(t for t in given if t.signature is not None and any(t.signature.search(line) for line in lines))
    return own + tuple(t for t in given if t not in own)


@cache
def cuinit_codes() -> dict[int, dict[str, str]]:
    raw = knowledge.data("log_patterns.json")["cuinit_codes"]
    return {int(k): v for k, v in raw.items() if not k.startswith("_")}


@cache
def _error_codes_by_name() -> dict[str, int]:
    raw = knowledge.data("cuda_errors.json")
    return {v: int(k) for k, v in raw.items() if not k.startswith("_")}


def cuinit_code(detail: str) -> int | None:
    """``INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)`` -> 303;
    ``CUDA_ERROR_NO_DEVICE`` -> 100."""
    m = _CODE_IN_PARENS.search(detail.strip())
    if m:
        return int(m.group(1))
    n = _ERROR_NAME.search(detail)
    if n:
        return _error_codes_by_name().get(n.group(1))
    return None


def classify(lines: list[str] | tuple[str, ...], tables: tuple[Table, ...] | None = None) -> Classification:
    """Each line's first matching pattern, over ``tables`` in :func:`ordered`'s order (TensorFlow's by default)."""
    result = Classification()
    in_order = tuple(p for t in ordered(lines, tables) for p in t.patterns)
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        for pattern in in_order:
            m = pattern.regex.search(line)
            if m is None:
                continue
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            if "driver_cuda_int" in groups:  # torch's "found version 11040": the CUDA version 11.4
                groups["driver_cuda"] = knowledge.cuda_int_to_text(int(groups["driver_cuda_int"])) or groups["driver_cuda_int"]
            if pattern.id == "nvidia-smi-versions-differ" and _differ_as_under_wsl(groups["nvml"], groups["driver"]):
                continue  # the next pattern reads it as a header that is in order
            target = pattern.finding
            if pattern.id == "cuinit-failed":
                code = cuinit_code(groups.get("detail", ""))
                if code is not None and code in cuinit_codes():
                    target = cuinit_codes()[code]["finding"]
                if code is not None:
                    groups["code"] = str(code)
            result.matches.append(LineMatch(line, pattern, groups, target))
            break
        else:
            result.unrecognised.append(line)
    return result


def _differ_as_under_wsl(nvml: str, driver: str) -> bool:
    """Whether nvidia-smi's two versions differ as they do under WSL, where NVML is the Linux side's build
    (555.52.01, 545.46) and the driver the Windows one (555.99, 546.80): a Windows driver version has two
    parts and a major close to NVML's. A Linux driver of another install than its libraries (three parts,
    or a major far from NVML's: 352.63 against 384.130) is a fault."""
    n, d = knowledge.parse_version(nvml), knowledge.parse_version(driver)
    if n is None or d is None:
        return False
    return len(d) == 2 and abs(n[0] - d[0]) <= 5


# --- the log's own era: which CUDA and cuDNN its TensorFlow was built with ---------------------------------

_CUDA_SONAME = re.compile(r"\blib(?:cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse)\.so\.(\d+)(?:\.(\d+))?")
#: XLA lists the CUDA directories it searched, the build's own version among them (/usr/local/cuda-11.8).
_CUDA_DIR = re.compile(r"/usr/local/cuda-(\d+)\.(\d+)\b")
_CUDA_DLL = re.compile(r"\b(?:cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse)64_(\d+)\.dll", re.IGNORECASE)
_CUDNN = re.compile(
    r"\blibcudnn\.so\.(\d+)|\bcudnn64_(\d+)\.dll|source was compiled with:? (\d+)(?:\.|\s|\(|$)"
    r"|Loaded cuDNN version (\d{4,})",
    re.IGNORECASE,
)
#: pip's tensorflow[and-cuda] (the CUDA libraries as wheels) exists from TensorFlow 2.14.
AND_CUDA_SINCE = (2, 14)


@dataclass(frozen=True)
class Era:
    """What a log shows of its TensorFlow's build: the CUDA version of the libraries it loads (``"10.1"``,
    or a major alone, ``"11"``), the cuDNN major, and the TensorFlow releases built so (tf_builds.json)."""

    cuda: str | None
    cudnn: str | None
    tensorflow: tuple[str, ...]

    @property
    def before_and_cuda(self) -> bool:
        """Some TensorFlow of this era predates pip's tensorflow[and-cuda]: a remedy must not count on it."""
        versions = [knowledge.parse_version(v) or (0,) for v in self.tensorflow]
        return bool(versions) and min(versions) < AND_CUDA_SINCE

    def builds(self) -> list[dict[str, str]]:
        return [b for b in knowledge.data("tf_builds.json")["builds"] if b["tensorflow"] in self.tensorflow]


def _cuda_of_dll(digits: str) -> str:
    """cudart64_101.dll -> 10.1, cudart64_110.dll -> 11 (every CUDA 11 names it so), cudart64_90 -> 9.0,
    cublas64_11.dll -> 11, cudart64_12.dll -> 12."""
    if len(digits) == 3:
        major, minor = digits[:2], digits[2]
        return major if major == "11" else f"{major}.{minor}"
    if len(digits) == 2 and digits[0] in "89":
        return f"{digits[0]}.{digits[1]}"
    return digits


def era(lines: list[str] | tuple[str, ...]) -> Era | None:
    """The CUDA / cuDNN era of the TensorFlow that wrote the log, from the library names it shows; None
    when it shows none."""
    cuda = cudnn = None
    for line in lines:
        if cuda is None:
            m = _CUDA_SONAME.search(line)
            if m:
                major, minor = m.group(1), m.group(2)
                cuda = f"{major}.{minor}" if minor is not None and int(major) <= 10 else major
            else:
                d = _CUDA_DLL.search(line)
                if d:
                    cuda = _cuda_of_dll(d.group(1))
                elif (x := _CUDA_DIR.search(line)) is not None:
                    cuda = f"{x.group(1)}.{x.group(2)}"
        if cudnn is None:
            c = _CUDNN.search(line)
            if c:
                cudnn = next(g for g in c.groups() if g)
                if len(cudnn) >= 4:  # 5110: cuDNN 5.1.10 as old TensorFlow printed it
                    cudnn = str(int(cudnn) // 1000)
    if cuda is None and cudnn is None:
        return None
    rows = knowledge.data("tf_builds.json")["builds"]

    def fits(row: dict[str, str]) -> bool:
        row_cuda = row["cuda"]
        if cuda is not None:
            if "." in cuda:  # "10.1", "9.0": the release, or a row that gives the major alone ("9")
                same = row_cuda == cuda or ("." not in row_cuda and cuda.startswith(row_cuda + "."))
            else:  # "11", "12": any release of that major
                same = row_cuda.split(".")[0] == cuda
            if not same:
                return False
        return cudnn is None or row["cudnn"].split(".")[0] == cudnn

    tensorflow = tuple(row["tensorflow"] for row in rows if fits(row))
    return Era(cuda, cudnn, tensorflow)


def _span(versions: tuple[str, ...]) -> str:
    ordered = sorted(versions, key=lambda v: knowledge.parse_version(v) or (0,))
    if not ordered:
        return ""
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]} to {ordered[-1]}"


def era_hint(e: Era | None) -> str:
    """A clause naming the CUDA and cuDNN of the log's era, for remedies that say "install what TensorFlow
    was built with"."""
    if e is None or not e.tensorflow:
        return " (tensorflow.org/install/source#gpu lists each TensorFlow's CUDA and cuDNN)"
    builds = e.builds()
    cudas = sorted({b["cuda"] for b in builds})
    cudnns = sorted({b["cudnn"] for b in builds})
    if not e.before_and_cuda and all((knowledge.parse_version(v) or (0,)) >= AND_CUDA_SINCE for v in e.tensorflow):
        return (
            f" (TensorFlow {_span(e.tensorflow)}: CUDA {' / '.join(cudas)}, cuDNN {' / '.join(cudnns)}; "
            '`pip install "tensorflow[and-cuda]==<your TensorFlow version>"` brings them)'
        )
    return f" (this log's TensorFlow, {_span(e.tensorflow)}, was built with CUDA {' / '.join(cudas)} and cuDNN {' / '.join(cudnns)})"


def era_remedy(e: Era, library: str | None, kind: str = "libraries") -> str:
    """How to install the CUDA libraries (or XLA's toolchain) of an era before pip's tensorflow[and-cuda]:
    the toolkit and cuDNN of the tested build, on the loader's path (conda's packages of those versions)."""
    builds = e.builds()
    if kind == "toolchain":
        cuda = " / ".join(sorted({b["cuda"] for b in builds})) or (e.cuda or "?")
        return (
            f"ptxas and libdevice come with the CUDA toolkit: install the one this TensorFlow ({_span(e.tensorflow)}) "
            f"was built with, CUDA {cuda}, put its bin folder first on PATH, and point XLA at it: "
            "`export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda-<that version>`."
        )
    cuda = " / ".join(sorted({b["cuda"] for b in builds})) or (e.cuda or "?")
    cudnn = " / ".join(sorted({b["cudnn"] for b in builds})) or (e.cudnn or "?")
    what = f"{library} comes with " if library else ""
    conda_cuda = sorted({b["cuda"] for b in builds})[-1] if builds else e.cuda
    conda_cudnn = sorted({b["cudnn"] for b in builds})[-1] if builds else e.cudnn
    return (
        f"{what}the CUDA toolkit and cuDNN this TensorFlow ({_span(e.tensorflow)}) was built with: CUDA {cuda} and "
        f"cuDNN {cudnn}. Install those versions and put their library folder on LD_LIBRARY_PATH (on Windows, "
        f"their bin folder on PATH); or in a conda environment `conda install cudatoolkit={conda_cuda} cudnn={conda_cudnn}`."
    )


_CC = re.compile(r"compute capability:? (\d+\.\d+)|major: (\d+) minor: (\d+)|computeCapability: (\d+\.\d+)")


def compute_capability(lines: list[str] | tuple[str, ...]) -> str | None:
    """The GPU's compute capability where the log shows it (TensorFlow's device lines, old and new)."""
    for line in lines:
        m = _CC.search(line)
        if m:
            if m.group(2) is not None:
                return f"{m.group(2)}.{m.group(3)}"
            return m.group(1) or m.group(4)
    return None


def _cudnn_text(value: str) -> str:
    """cuDNN versions as old TensorFlow printed them, encoded (5110 = 5.1.10, 7104 = 7.1.4), as x.y.z."""
    if value.isdigit() and len(value) >= 4:
        n = int(value)
        return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"
    return value


def _fill(text: str, groups: dict[str, str]) -> str:
    try:
        return text.format(**groups)
    except (KeyError, IndexError, ValueError):
        return text


#: What explains a cuDNN / cuBLAS handle failure, other than memory, when the log shows it too.
HANDLE_FAILURE_CAUSES = (
    "cudnn-version-mismatch", "cudnn-missing", "cuda-runtime-missing", "gpu-arch-unsupported", "ptx-jit-failed"
)
HANDLE_PATTERNS = ("cudnn-handle", "cublas-handle")
_RANK = {"blocker": 0, "degraded": 1, "info": 2}


def findings_from_log(lines: list[str] | tuple[str, ...], tables: tuple[Table, ...] | None = None) -> list[Finding]:
    """One finding per cause the log supports, with its lines as evidence; harmless lines give none. ``tables``: the
    patterns to read it with (:func:`classify`), TensorFlow's by default.

    A generic line ("Cannot dlopen some GPU libraries") does not add a cause when a specific line
    names the library (cuDNN missing is its own cause, not also "CUDA runtime missing")."""
    found = classify(lines, tables)
    log_era = era(lines)
    by_id: dict[str, list[LineMatch]] = {}
    for m in found.meaningful:
        by_id.setdefault(m.finding or "", []).append(m)
    generic = {"cannot-dlopen-gpu-libraries"}
    if "cuda-runtime-missing" in by_id and all(m.pattern.id in generic for m in by_id["cuda-runtime-missing"]):
        if any(k in by_id for k in ("cudnn-missing", "libcuda-missing")):
            del by_id["cuda-runtime-missing"]
    # A failed cuInit is explained by a more precise driver-layer line when the log has one.
    if "cuda-init-failed" in by_id and any(
        k in by_id for k in ("driver-library-mismatch", "libcuda-missing", "forward-compat-unsupported", "driver-not-loaded")
    ):
        del by_id["cuda-init-failed"]
    # A cuDNN / cuBLAS handle that cannot be created is most often memory; beside a line that says why
    # otherwise (cuDNN missing or of the wrong version, no code for the GPU) it is that cause's consequence.
    consequences: list[LineMatch] = []
    explained_by = next((k for k in HANDLE_FAILURE_CAUSES if k in by_id), None)
    memory = by_id.get("gpu-memory-exhausted", [])
    if explained_by is not None and memory and all(m.pattern.id in HANDLE_PATTERNS for m in memory):
        consequences = by_id.pop("gpu-memory-exhausted")
    # A cuInit that failed without a precise code beside a driver too old for any TensorFlow.
    too_old = legacy_driver(lines) if "cuda-init-failed" in by_id and "driver-too-old" not in by_id else None
    out: list[Finding] = []
    for cause_id, matches in by_id.items():
        first = min(matches, key=lambda m: _RANK.get(m.pattern.severity, 3))  # the most severe, then the earliest
        groups = {**_UNSHOWN, **first.groups, "era_hint": era_hint(log_era)}
        if first.pattern.id == "cudnn-version":
            groups.update({k: _cudnn_text(groups[k]) for k in ("loaded", "compiled") if k in groups})
        summary = _fill(first.pattern.summary, groups)
        cause = _fill(first.pattern.cause, groups)
        remedy = _fill(first.pattern.remedy, groups)
        if first.pattern.remedy_old_era and log_era is not None and log_era.before_and_cuda:
            if first.pattern.remedy_old_era == "cudnn-version":
                remedy = _fill(
                    "Install cuDNN {compiled} (the version this TensorFlow was compiled with, or a later release of "
                    "the same major version) and make it the first one the loader finds (LD_LIBRARY_PATH on Linux, "
                    "PATH on Windows); remove the older cuDNN from the search path.",
                    groups,
                )
            else:
                remedy = era_remedy(log_era, groups.get("library"), first.pattern.remedy_old_era)
        severity = _SEVERITY.get(first.pattern.severity, Severity.INFO)
        if first.pattern.id == "cuinit-failed" and "code" in groups:
            override = cuinit_codes().get(int(groups["code"]))
            if override:
                summary = override.get("summary", summary)
                remedy = override.get("remedy", remedy)
                cause = f"{cause} {summary}"
        evidence: dict[str, Any] = {
            "log_lines": [m.line for m in matches][:12],
            "patterns": sorted({m.pattern.id for m in matches}),
        }
        libraries = sorted({m.groups["library"] for m in matches if "library" in m.groups})
        if libraries:
            evidence["libraries"] = libraries
        if cause_id == explained_by and consequences:
            evidence["consequences"] = [m.line for m in consequences][:6]
            cause = f"{cause} The cuDNN / cuBLAS handle failures the log shows are its consequence."
        if cause_id in ("gpu-arch-unsupported", "ptx-jit-compilation", "ptx-jit-failed") and "cc" not in groups:
            cc = compute_capability(lines)
            if cc is not None:
                evidence["compute_capability"] = cc
                summary = f"{summary} The log shows a GPU of compute capability {cc}."
        if log_era is not None and first.pattern.framework == "tensorflow":
            evidence["era"] = {"cuda": log_era.cuda, "cudnn": log_era.cudnn, "tensorflow": list(log_era.tensorflow)}
        reports = sorted({m.pattern.report for m in matches if m.pattern.report})
        if reports:
            evidence["reports"] = reports
        if cause_id == "cuda-init-failed" and too_old is not None:
            cause = f"{cause} The driver the log shows is too old for TensorFlow (driver-too-old): replace it first."
        if cause_id == "xla-toolchain-missing":
            cause, remedy = _with_ptxas_search(found, cause, remedy, evidence)
        for key, value in groups.items():
            if key not in ("library", "era_hint", "driver_cuda_int") and (key in first.groups or key not in _UNSHOWN):
                evidence.setdefault(key, value)
        out.append(finding(cause_id, severity, summary=summary, cause=cause, remedy=remedy, evidence=evidence))
    if too_old is not None:
        out.append(too_old)
    return out


#: What a message's text says where the pasted line lacks the part (a bare "Could not load dynamic library
#: 'libcudnn.so.8'" has no dlerror).
_UNSHOWN = {"dlerror": "the paste does not show the loader's reason (no dlerror part)"}


def _with_ptxas_search(found: Classification, cause: str, remedy: str, evidence: dict[str, Any]) -> tuple[str, str]:
    """XLA's own account of where it looked for ptxas ("Looking for ptxas at", "Using ptxas at"), where the
    log has it (TF_CPP_VMODULE=asm_compiler=2): the candidates it tried in order and the one it took."""
    looked: list[str] = []
    used: str | None = None
    for m in found.harmless:
        if m.pattern.id != "ptxas-search":
            continue
        if "looked" in m.groups and m.groups["looked"] not in looked:
            looked.append(m.groups["looked"])
        used = m.groups.get("used") or m.groups.get("used_") or used
    if not looked and used is None:
        return cause, remedy
    missing = [p for p in looked if p != used]
    if looked:
        evidence["ptxas_looked_at"] = looked
    if used is not None:
        evidence["ptxas_used"] = used
    said = []
    if missing and used is not None:
        said.append(f"XLA looked for ptxas at {', '.join(missing)} (not there) and used {used}.")
    elif used is not None:
        said.append(f"XLA used the ptxas at {used}." if "/" in used else f"XLA used `{used}`, the first one on PATH.")
    else:
        said.append(f"XLA looked for ptxas at {', '.join(looked)}.")
    doubled = [p for p in looked if "/bin/bin/" in p]
    if doubled:
        root = doubled[0].split("/bin/bin/")[0]
        said.append(
            f"{doubled[0]} cannot exist: XLA adds bin/ptxas to each CUDA directory it is given, and it was given "
            f"{root}/bin, a bin directory instead of the toolkit's root."
        )
        remedy = f"{remedy} Here: `export XLA_FLAGS=--xla_gpu_cuda_data_dir={root}` (the toolkit's root, without bin)."
    return f"{cause} {' '.join(said)}", remedy


_DRIVER_REPORTED = re.compile(
    r"(?:kernel|libcuda) reported version is: (?P<v>\d+\.\d+(?:\.\d+)?)|NVRM version: NVIDIA UNIX \S+ Kernel Module\s+(?P<w>\d+\.\d+(?:\.\d+)?)"
)


def reported_driver(lines: list[str] | tuple[str, ...]) -> tuple[str, list[str]] | None:
    """The Linux driver version TensorFlow's CUDA diagnostics print after a failed cuInit (the kernel module's,
    libcuda's, /proc/driver/nvidia/version), and the lines that show it; None when the log shows none."""
    version: str | None = None
    shown: list[str] = []
    for line in lines:
        m = _DRIVER_REPORTED.search(line)
        if m:
            v = m.group("v") or m.group("w")
            version = version or v
            shown.append(line.rstrip("\n"))
    return (version, shown) if version is not None else None


def legacy_driver(lines: list[str] | tuple[str, ...]) -> Finding | None:
    """``driver-too-old`` beside a cuInit that failed without a precise code (CUDA_ERROR_UNKNOWN), where the
    driver the log shows is older than any TensorFlow GPU build needs (340.101 below the 346.46 of CUDA 7.0,
    that of the first TensorFlow releases: ``legacy_driver`` in log_patterns.json)."""
    shown = reported_driver(lines)
    if shown is None:
        return None
    version, evidence_lines = shown
    floor = knowledge.data("log_patterns.json")["legacy_driver"]
    needed, cuda = floor["driver"], floor["cuda"]
    drv = knowledge.parse_version(version)
    if drv is None or drv >= (knowledge.parse_version(needed) or ()):
        return None
    return finding(
        "driver-too-old",
        Severity.BLOCKER,
        summary=(
            f"The NVIDIA driver the log shows, {version}, is older than any TensorFlow GPU build needs "
            f"(CUDA {cuda}, that of the first TensorFlow releases, needs {needed})."
        ),
        cause=(
            f"TensorFlow's CUDA diagnostics show driver {version}. NVIDIA's table of CUDA toolkits and their drivers "
            f"gives {needed} as the oldest driver for CUDA {cuda}, and no TensorFlow GPU build is of an older CUDA: "
            "this driver runs none of them, whatever else makes cuInit fail."
        ),
        remedy=(
            f"Install a newer NVIDIA driver for this GPU (at least {needed}, and what this TensorFlow's CUDA needs) and "
            "reboot; if the newest driver NVIDIA publishes for the GPU is older (a legacy branch such as 340.xx is "
            "the last for its GPUs), this GPU cannot run TensorFlow."
        ),
        evidence={"log_lines": evidence_lines[:12], "driver_version": version, "required_driver": needed},
    )


def explain(
    lines: list[str] | tuple[str, ...], tables: tuple[Table, ...] | None = None
) -> tuple[list[Finding], Classification, Finding | None]:
    """Findings of a log, its classification, and the root cause among them (lowest layer); ``tables`` as for
    :func:`classify`."""
    findings = findings_from_log(lines, tables)
    return findings, classify(lines, tables), root_cause(findings)
