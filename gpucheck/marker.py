"""What ``@pytest.mark.gpu`` asks of a machine, and the answer from a diagnosis: pure functions (no pytest).

A test marked ``gpu(count=1, min_memory=None, compute_capability=None, framework=...)`` needs ``count``
GPUs that the framework (``"tensorflow"``, ``"torch"``, or another registered framework unit) registered here
(``framework=None``: that the CUDA driver lists, no framework asked; not given: the first framework, in the registry's
order, that is installed and that the run diagnosed, else the driver: :func:`bare_framework`), each with at least ``min_memory`` (``8GiB``, or bytes) and a compute capability of at
least ``compute_capability`` (``"8.0"``), and none of them blocked by what the diagnosis found.

A GPU is *usable* when no blocker of the layers the marker needs is about it (or about the whole machine):
with a framework, every layer up to ``framework`` (hardware, kernel, driver, visibility, compatibility,
libraries, framework; blockers of another framework do not count), and ``resources`` and ``health`` (its memory is there, it is not lost); without a
framework, the layers up to ``visibility`` and the same two. Placement, performance and the cluster do not
keep a marked test from running: a marked test is itself what shows whether work lands on the GPU, and
hiding it behind a skip would hide that. A run whose verdict they spoil says so in its summary.

Whose marker it is (gpucheck's, or the project's own ``gpu``) is ``gpucheck.suite.ownership``.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from gpucheck import frameworks, registry
from gpucheck.blocking import blocker_among, layers_needed
from gpucheck.diagnosis import Result
from gpucheck.model import Finding
from gpucheck.rules.devicemap import device_map
from gpucheck.settings import memory_bytes, parse_memory

#: The layers a marked test needs: with a framework (any), every layer up to it; without, the driver's view.
FRAMEWORK_LAYERS = layers_needed("framework") | {"framework", "resources", "health"}
DRIVER_LAYERS = layers_needed("visibility") | {"visibility", "resources", "health"}


def layers_for(framework: str | None) -> frozenset[str]:
    return FRAMEWORK_LAYERS if framework is not None else DRIVER_LAYERS


def title(framework: str) -> str:
    """How people write a framework's name ("TensorFlow")."""
    found = registry.framework_named(framework)
    return found.title if found is not None else framework
#: A compute capability: ASCII digits, at most three each side (``int()`` of thousands of digits raises).
_CC = re.compile(r"^\s*([0-9]{1,3})(?:\.([0-9]{1,3}))?\s*$")
#: The most GPUs a marked test may ask for: a larger count is no machine's (and ``str()`` of it may raise).
MAX_COUNT = 4096


def _shown(value: Any) -> str:
    """A marker's value as its sentence shows it: its repr, at most 60 characters (an integer of thousands of digits,
    which ``repr`` refuses, by its size)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Need:
    """What one marked test asks for."""

    count: int = 1
    min_memory: str | None = None
    compute_capability: tuple[int, int] | None = None
    framework: str | None = frameworks.DEFAULT
    #: Whether the marker named its framework: a bare marker asks for what this run diagnosed of the
    #: frameworks installed (the driver level under --gpucheck-framework=none).
    framework_given: bool = field(default=True, compare=False)

    def describe(self) -> str:
        what = f"{self.count} GPU(s)"
        bits = []
        if self.min_memory is not None:
            bits.append(f"at least {self.min_memory}")
        if self.compute_capability is not None:
            bits.append(f"compute capability {self.compute_capability[0]}.{self.compute_capability[1]} or newer")
        if bits:
            what += " with " + " and ".join(bits)
        return what + (f" that {title(self.framework)} can use" if self.framework is not None else " the CUDA driver lists")


class MarkerError(ValueError):
    """A marker written wrongly: the sentence that says how."""


def installed(module: str) -> bool:
    """Whether a framework's package is on the path, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or shadowed package on the path: not installed as such
        return False


@cache
def installed_frameworks() -> tuple[str, ...]:
    """The framework units whose module is installed here, in the registry's order, found without importing them
    (asked once a process: what is installed does not change while the tests run)."""
    return tuple(fw.name for fw in registry.FRAMEWORKS if installed(fw.module))


def default_framework() -> str | None:
    """What a bare ``@pytest.mark.gpu`` asks for before the run is diagnosed: the first framework installed here (the
    registry's order), else the driver level (None). A suite without TensorFlow never gets "TensorFlow cannot be
    imported" for a marker that did not name it."""
    return next(iter(installed_frameworks()), None)


def bare_framework(installed: Sequence[str], diagnosed: Collection[str]) -> str | None:
    """What a bare ``@pytest.mark.gpu`` (and an unmarked test's ``gpus``) asks for in a run: the first framework, in
    the registry's order, that is installed here and that the run diagnosed (--gpucheck-framework, whose default is
    the installed ones): TensorFlow where it is installed and asked, PyTorch in an environment of PyTorch alone or
    where only it is asked; else the CUDA driver (None): nothing installed, or --gpucheck-framework=none."""
    return next((name for name in installed if name in diagnosed), None)


def resolve(machine: Machine, need: Need) -> Need:
    """``need`` with a bare marker's framework chosen for this run (:func:`bare_framework`); a marker that names its
    framework, or a diagnosis that did not end (its frameworks not known), as it is."""
    if need.framework_given or not machine.result.complete:
        return need
    diagnosed = [name for name in machine.gpus if name != "none"]
    return replace(need, framework=bare_framework(installed_frameworks(), diagnosed))


def parse_need(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Need:
    """The :class:`Need` of ``@pytest.mark.gpu(*args, **kwargs)`` (``count`` may be given by position)."""
    known = {"count", "min_memory", "compute_capability", "framework"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise MarkerError(f"@pytest.mark.gpu takes count, min_memory, compute_capability, framework; not {', '.join(unknown)}")
    if len(args) > 1:
        raise MarkerError("@pytest.mark.gpu takes at most one positional argument (count)")
    if args and "count" in kwargs:
        raise MarkerError(f"@pytest.mark.gpu: count given twice ({_shown(args[0])} by position, "
                          f"{_shown(kwargs['count'])} by name): give it once")
    count: Any = args[0] if args else kwargs.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise MarkerError(f"@pytest.mark.gpu(count=...) must be a whole number of GPUs of at least 1, not {_shown(count)}")
    if count > MAX_COUNT:
        raise MarkerError(f"@pytest.mark.gpu(count=...) must be a whole number of GPUs of at most {MAX_COUNT}, not "
                          f"{_shown(count)}")
    memory = kwargs.get("min_memory")
    min_memory: str | None = None
    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, (int, str)):
            raise MarkerError(f"@pytest.mark.gpu(min_memory=...) must be an amount like '8GiB' or bytes, not {_shown(memory)}")
        try:
            min_memory = parse_memory(str(memory))
        except ValueError as exc:
            raise MarkerError(f"@pytest.mark.gpu(min_memory=...) {exc} (got {_shown(memory)})") from None
        if min_memory.endswith("%"):
            raise MarkerError(f"@pytest.mark.gpu(min_memory=...) must be an absolute amount, not a share (got {_shown(memory)})")
    cc = kwargs.get("compute_capability")
    capability: tuple[int, int] | None = None
    if cc is not None:
        try:
            m = _CC.match(str(cc)) if isinstance(cc, (str, int, float)) and not isinstance(cc, bool) else None
        except ValueError:  # str() of an int of thousands of digits
            m = None
        if m is None or (isinstance(cc, float) and not math.isfinite(cc)):
            raise MarkerError(f"@pytest.mark.gpu(compute_capability=...) must be like '8.0', not {_shown(cc)}")
        capability = (int(m.group(1)), int(m.group(2) or 0))
    framework = kwargs["framework"] if "framework" in kwargs else default_framework()
    if framework is not None and (not isinstance(framework, str) or framework not in frameworks.available()):
        names = " or ".join(f"{name!r}" for name in frameworks.available())
        raise MarkerError(f"@pytest.mark.gpu(framework=...) must be {names} or None, not {_shown(framework)}")
    return Need(count, min_memory, capability, framework, "framework" in kwargs)


@dataclass(frozen=True)
class Gpu:
    """A GPU as a test sees it (the ``gpus`` fixture)."""

    #: The framework's GPU:N in this test process (the CUDA ordinal for framework=None).
    index: int
    #: What the framework's device call takes: "/GPU:0" (``tf.device``; and for framework=None), "cuda:0"
    #: (``torch.device``), its ``FrameworkView.device_name``.
    device: str
    name: str | None
    #: Total memory, bytes.
    memory: int | None
    #: "9.0".
    compute_capability: str | None
    bus_id: str | None
    #: The CUDA ordinal in the diagnosed process's environment (before a worker's CUDA_VISIBLE_DEVICES).
    cuda_ordinal: int | None = None
    #: How findings name it ("GPU-0", nvidia-smi's index), when NVML listed it.
    subject: str | None = None
    #: What keeps it from use: "id: summary", or None when it is usable.
    blocked_by: str | None = None

    @property
    def usable(self) -> bool:
        return self.blocked_by is None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "device": self.device, "name": self.name, "memory": self.memory,
            "compute_capability": self.compute_capability, "bus_id": self.bus_id, "usable": self.usable,
            "blocked_by": self.blocked_by,
        }

    def describe(self) -> str:
        bits = [self.name or "?"]
        if self.memory is not None:
            bits.append(f"{self.memory / 2**30:.0f} GiB")
        if self.compute_capability is not None:
            bits.append(f"cc {self.compute_capability}")
        return f"GPU:{self.index} " + ", ".join(bits)


def _cc(major: Any, minor: Any) -> str | None:
    return f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None


def machine_gpus(result: Result, framework: str | None = frameworks.DEFAULT) -> tuple[Gpu, ...]:
    """The GPUs of the diagnosed process: those the framework registered (or the CUDA driver listed, for
    framework=None), with what the CUDA driver and NVML say of each, and what blocks each, if anything."""
    facts = result.facts
    if facts is None:
        return ()
    cuda = facts.cuda.facts
    by_ordinal = {d.ordinal: d for d in (cuda.devices if cuda is not None else ())}
    rows = device_map(facts)
    subject_of = {r.cuda_ordinal: f"GPU-{r.nvml_index}" for r in rows if r.cuda_ordinal is not None and r.nvml_index is not None}
    layers = layers_for(framework)
    entries: list[tuple[int, int | None, str | None, tuple[int, int] | None]] = []
    device_name = DEVICE_NAME
    if framework is not None:
        view = facts.frameworks.get(framework)
        if view is None:
            return ()
        device_name = view.device_name
        for n, g in enumerate(view.gpus):
            # Where its unit cannot tell the ordinal, the framework's N is taken for CUDA's N (it numbers in order).
            ordinal = g.cuda_ordinal if g.cuda_ordinal is not None else (n if n in by_ordinal else None)
            entries.append((n, ordinal, g.name, g.capability))
    else:
        entries = [(d.ordinal, d.ordinal, None, None) for d in by_ordinal.values()]
    out = []
    for n, ordinal, gpu_name, cc in entries:
        cuda_dev = by_ordinal.get(ordinal) if ordinal is not None else None
        capability = (
            _cc(*cc) if cc is not None else (_cc(cuda_dev.cc_major, cuda_dev.cc_minor) if cuda_dev is not None else None)
        )
        subject = subject_of.get(ordinal) if ordinal is not None else None
        blocker = blocker_among(result.findings, layers, subject, framework)
        out.append(
            Gpu(
                index=n,
                device=device_called(device_name, n),
                name=gpu_name if gpu_name is not None else (cuda_dev.name if cuda_dev else None),
                memory=cuda_dev.memory_total if cuda_dev is not None else None,
                compute_capability=capability,
                bus_id=cuda_dev.pci_bus_id if cuda_dev is not None else None,
                cuda_ordinal=ordinal,
                subject=subject,
                blocked_by=f"{blocker.id}: {blocker.summary}" if blocker is not None else None,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Machine:
    """A diagnosis as the marker reads it: its result and the GPUs of each framework value (computed where
    the facts are, handed to xdist workers as JSON by ``gpucheck.shared``)."""

    result: Result
    #: Each diagnosed framework's ("tensorflow") and "none" (framework=None).
    gpus: Mapping[str, tuple[Gpu, ...]]

    @classmethod
    def of(cls, result: Result) -> Machine:
        """No entry for a framework this run did not diagnose (--gpucheck-framework=none)."""
        gpus = {"none": machine_gpus(result, None)}
        for name in result.facts.frameworks if result.facts is not None else {}:
            gpus[name] = machine_gpus(result, name)
        return cls(result, gpus)

    def gpus_for(self, framework: str | None) -> tuple[Gpu, ...]:
        return self.gpus.get(framework if framework is not None else "none", ())


#: A GPU's device where no framework names it (framework=None): TensorFlow's form, as before frameworks had their own.
DEVICE_NAME = "/GPU:{}"
_TRAILING_NUMBER = re.compile(r"[0-9]+$")


def device_called(name: str, n: int) -> str:
    """The device ``name`` (a ``FrameworkView.device_name``: "cuda:{}") for GPU ``n``; a name without ``{}`` (a
    framework unit's mistake) gets the number appended."""
    return name.replace("{}", str(n)) if "{}" in name else f"{name}{n}"


def renumbered(device: str, n: int) -> str:
    """``device`` ("/GPU:3", "cuda:3") for GPU ``n`` of a worker's own numbering ("cuda:0")."""
    return _TRAILING_NUMBER.sub(str(n), device) if _TRAILING_NUMBER.search(device) else f"{device}{n}"


def for_worker(gpus: tuple[Gpu, ...], ordinals: tuple[int, ...] | None) -> tuple[Gpu, ...]:
    """The GPUs a worker given ``ordinals`` (CUDA ordinals of the diagnosed process, in the order of its
    CUDA_VISIBLE_DEVICES) sees, numbered as it numbers them; all of them when it was given none."""
    if ordinals is None:
        return gpus
    by_ordinal = {g.cuda_ordinal: g for g in gpus if g.cuda_ordinal is not None}
    mine = [by_ordinal[o] for o in ordinals if o in by_ordinal]
    return tuple(
        Gpu(n, renumbered(g.device, n), g.name, g.memory, g.compute_capability, g.bus_id, g.cuda_ordinal, g.subject, g.blocked_by)
        for n, g in enumerate(mine)
    )


def _fits(gpu: Gpu, need: Need) -> bool:
    if need.min_memory is not None and (gpu.memory is None or gpu.memory < memory_bytes(need.min_memory, gpu.memory)):
        return False
    if need.compute_capability is not None:
        m = _CC.match(gpu.compute_capability or "")
        if m is None or (int(m.group(1)), int(m.group(2) or 0)) < need.compute_capability:
            return False
    return True


@dataclass(frozen=True)
class Answer:
    """The answer to one marked test: it runs on ``gpus``, or not, and why."""

    runs: bool
    reason: str
    #: The finding behind a "no": the root cause of what the marker needs, when one is.
    cause: Finding | None
    gpus: tuple[Gpu, ...]


def machine_blocker(result: Result, framework: str | None) -> Finding | None:
    """What keeps every GPU from a marked test: the blocker of the lowest layer it needs, machine-wide."""
    return blocker_among(result.findings, layers_for(framework), framework=framework) if result.complete else result.root_cause


def answer(machine: Machine, need: Need, ordinals: tuple[int, ...] | None = None, per_worker: int | None = None) -> Answer:
    """Whether a test that needs ``need`` runs here, on which GPUs, or why not (its reason leads with the
    root cause's id and summary). ``ordinals``: the GPUs this xdist worker was given (``for_worker``)."""
    result = machine.result
    need = resolve(machine, need)
    if need.framework is not None and need.framework not in machine.gpus and result.complete:
        diagnosed = ",".join(name for name in machine.gpus if name != "none") or frameworks.NONE
        return Answer(
            False,
            f"{title(need.framework)} was not diagnosed (--gpucheck-framework={diagnosed}): only tests marked "
            "gpu(framework=None)" + (f" or gpu(framework={diagnosed!r})" if diagnosed != frameworks.NONE else "")
            + " can be answered in this run",
            None,
            (),
        )
    everyone = machine.gpus_for(need.framework)
    gpus = for_worker(everyone, ordinals)
    usable = [g for g in gpus if g.usable]
    fitting = [g for g in usable if _fits(g, need)]
    if len(fitting) >= need.count:
        return Answer(True, "", None, tuple(fitting[: need.count]))
    blocker = machine_blocker(result, need.framework)
    if not usable:
        if blocker is None and gpus:
            blocked = next(g for g in gpus if g.blocked_by is not None)
            return Answer(False, f"no usable GPU — {blocked.blocked_by}", None, ())
        if blocker is None:
            seen = f"{title(need.framework)} registered no GPU" if need.framework is not None else "the CUDA driver lists no GPU"
            if ordinals is not None and everyone:
                seen = f"this xdist worker was given none of the {len(everyone)} GPU(s) (--gpucheck-gpus-per-worker)"
            return Answer(False, f"no usable GPU — {seen}", None, ())
        return Answer(False, f"no usable GPU — {blocker.id}: {blocker.summary}", blocker, ())
    have = "; ".join(g.describe() + ("" if _fits(g, need) else " (too small)") for g in usable)
    where = f"this xdist worker has {len(gpus)} (--gpucheck-gpus-per-worker {per_worker})" if ordinals is not None else (
        f"this machine has {len(fitting)} that fit"
    )
    reason = f"needs {need.describe()}; {where}: {have}"
    others = [g for g in gpus if g.blocked_by is not None]
    if others:
        reason += "; blocked: " + "; ".join(f"GPU:{g.index} by {g.blocked_by}" for g in others)
    return Answer(False, reason, None, ())
