"""The acceleration stack as units, and the registry that lists them.

A :class:`Layer` names everything that is its own: the layers it ``needs``, the child probes that
gather its facts, its rules, its check files, and whether only a framework answers it. Its catalog ids
are the causes of ``data/catalog.json`` whose ``layer`` is its name. ``LAYERS`` is the registry: adding
a layer is a probe (a module under ``gpucheck/probes``, or a step of the TensorFlow child), a facts
class and its field in ``Facts``, a rules module, a check file, its catalog ids, and one entry here.

Blocking is computed over the ``needs`` graph, not a line: a question is blocked only by a broken layer
that it needs, directly or through others (NVML's memory and health readings need the driver and the
visibility of the GPUs, not TensorFlow; a collective over gRPC needs TensorFlow, not the GPUs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpucheck.facts import (
    ClusterFacts,
    CudaDriverFacts,
    Facts,
    FrameworkFacts,
    LibrariesFacts,
    MemoryConfigFacts,
    NvmlFacts,
    PerformanceFacts,
    PlacementFacts,
)
from gpucheck.model import RUN_LAYER, Finding, Severity, catalog
from gpucheck.probes.clusterconfig import read_config
from gpucheck.protocol import CLUSTER_COLLECTIVE_ENV, CLUSTER_SPEC_ENV, CLUSTER_WAIT_ENV
from gpucheck.rules import (
    cluster,
    compat,
    devicemap,
    driver,
    framework,
    host,
    libraries,
    memory,
    nvml,
    performance,
    placement,
    visibility,
)
from gpucheck.settings import Settings

Rule = Callable[[Facts, Settings], list[Finding]]


@dataclass(frozen=True)
class ChildProbe:
    """A probe that runs in a child process (``python -m gpucheck.probes.child TARGET OUT``).

    ``target`` is ``module:function`` under ``gpucheck.``; the function returns a facts object, or
    yields ever more complete ones (a staged probe: each is written as soon as it is known, so a crash
    in a later step keeps the earlier facts). ``field`` is the ``Facts`` field its outcome fills."""

    name: str
    target: str
    facts_cls: type[Any]
    field: str
    #: Variables set for the child; otherwise it runs with the user's environment, as their programs do.
    env: tuple[tuple[str, str], ...] = ()
    #: Runs inside the child of the probe of that name (its facts under ``field`` in that child's JSON).
    within: str | None = None
    #: When the probe is worth a process: a pure function of what is known before any child starts
    #: (the host's PCI view and the environment). None: always.
    when: Callable[[PreStart], str | None] | None = None
    #: Its time limit, where it is not --gpucheck-timeout (the cluster child waits for its peers).
    timeout: Callable[[Settings], float] | None = None
    #: Variables set for the child from the settings (the cluster spec and the wait).
    settings_env: Callable[[Settings], dict[str, str]] | None = None

    def time_limit(self, settings: Settings) -> float:
        return self.timeout(settings) if self.timeout is not None else settings.timeout


@dataclass(frozen=True)
class TfStep:
    """A step of a layer in the one TensorFlow process (``gpucheck.probes.tfchild``): ``target`` is a
    function ``(timeout) -> Iterator[(facts, budget)]`` under ``gpucheck.probes``; its facts land under
    ``key`` in that child's JSON and fill the ``Facts`` field of the same name."""

    key: str
    target: str
    facts_cls: type[Any]


@dataclass(frozen=True)
class PreStart:
    """What is known before any probe child starts: the in-process host facts and the settings."""

    nvidia_gpus_on_bus: int
    environment: dict[str, str | None]
    settings: Settings


@dataclass(frozen=True)
class Layer:
    name: str
    needs: tuple[str, ...]
    probes: tuple[ChildProbe, ...] = ()
    #: Its steps in the one TensorFlow process, run in registry order after the framework facts.
    tf_steps: tuple[TfStep, ...] = ()
    #: Pure functions from facts to findings, run bottom-up in registry order.
    rules: tuple[Rule, ...] = ()
    #: Check files (paths relative to the gpucheck package) that pytest collects for this layer.
    checks: tuple[str, ...] = ()
    #: Only the framework probes answer it: "not checked" with --gpucheck-framework=none.
    framework: bool = False
    #: This version gathers its facts; a layer not yet built is reported as "not checked".
    built: bool = True
    #: Blockers of a layer it does not need as a whole that still block it: the performance layer needs
    #: ops to reach the GPU (no placement-failed, no soft-placement-fallback), not right results from
    #: them (a GPU that computes wrong is still timed: numerical-mismatch stands as its own root cause).
    blocked_by_ids: tuple[str, ...] = ()
    #: The ``Settings`` switch that asks for it (``benchmarks``): off, the layer is "not checked".
    asked_by: str | None = None
    #: Whether these settings ask for it, where that is more than one switch (the cluster layer: a set
    #: TF_CONFIG, or --gpucheck-cluster).
    asked: Callable[[Settings], bool] | None = None
    #: Its child probe, started only once the diagnosis of every layer below has ended (``Diagnosis.measure``),
    #: so that it times on a machine where no probe of ours still runs.
    after: ChildProbe | None = None


# --- probes -------------------------------------------------------------------------------------------

#: TensorFlow's own log lines are evidence.
FRAMEWORK_ENV = (("TF_CPP_MIN_LOG_LEVEL", "0"),)


def _gpus_for_growth(pre: PreStart) -> str | None:
    """Memory growth is tried where there may be GPUs, and where the environment does not turn it off."""
    if pre.settings.framework == "none":
        return "--gpucheck-framework=none"
    if pre.nvidia_gpus_on_bus == 0:
        return "no NVIDIA GPU on the PCI bus"
    if pre.environment.get("TF_FORCE_GPU_ALLOW_GROWTH") == "false":
        return "TF_FORCE_GPU_ALLOW_GROWTH=false turns memory growth off in every TensorFlow process"
    if pre.environment.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async":
        return "TF_GPU_ALLOCATOR=cuda_malloc_async: the allocator whose growth this tries is not in use"
    return None


def _async_allocator_asked(pre: PreStart) -> str | None:
    """TF_GPU_ALLOCATOR=cuda_malloc_async is tried in a process of its own with --gpucheck-deep. Where the
    environment sets it, the main TensorFlow process (which runs with the user's environment, as their
    programs do) already tries it."""
    if pre.settings.framework == "none":
        return "--gpucheck-framework=none"
    if pre.nvidia_gpus_on_bus == 0:
        return "no NVIDIA GPU on the PCI bus"
    if pre.environment.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async":
        return "the environment sets TF_GPU_ALLOCATOR=cuda_malloc_async: the main TensorFlow process runs with it"
    if pre.settings.deep:
        return None
    return "TF_GPU_ALLOCATOR is not cuda_malloc_async here (--gpucheck-deep tries it anyway)"


CUDA_PROBE = ChildProbe("cuda", "gpucheck.probes.driver:probe_cuda_driver", CudaDriverFacts, "cuda")
#: The ctypes load (for the loader's message) and init, then the inventory and health through nvidia-ml-py.
NVML_PROBE = ChildProbe("nvml", "gpucheck.probes.nvml:probe_nvml", NvmlFacts, "nvml")
#: The CUDA libraries TensorFlow's build needs, found as the loader would, and XLA's toolchain.
LIBRARIES_PROBE = ChildProbe("libraries", "gpucheck.probes.libraries:probe_libraries", LibrariesFacts, "libraries")
#: The one TensorFlow process on the critical path: the framework facts, then the placement steps.
TENSORFLOW_PROBE = ChildProbe(
    "framework",
    "gpucheck.probes.tfchild:framework_then_steps",
    FrameworkFacts,
    "framework",
    FRAMEWORK_ENV,
)
PLACEMENT_STEP = TfStep("placement", "gpucheck.probes.placement:placement_facts", PlacementFacts)
#: Memory settings that must be made before TensorFlow touches a GPU, each in a TensorFlow process of its
#: own started beside the main one (none of them reserves more than it allocates).
MEMORY_GROWTH_PROBE = ChildProbe(
    "memory-growth",
    "gpucheck.probes.memory:probe_memory_growth",
    MemoryConfigFacts,
    "memory_growth",
    FRAMEWORK_ENV,
    when=_gpus_for_growth,
)
MALLOC_ASYNC_PROBE = ChildProbe(
    "cuda-malloc-async",
    "gpucheck.probes.memory:probe_cuda_malloc_async",
    MemoryConfigFacts,
    "cuda_malloc_async",
    (*FRAMEWORK_ENV, ("TF_GPU_ALLOCATOR", "cuda_malloc_async")),
    when=_async_allocator_asked,
)

#: The performance layer's benchmarks, in a TensorFlow process of their own, after the diagnosis.
PERFORMANCE_PROBE = ChildProbe(
    "performance", "gpucheck.probes.performance:probe_performance", PerformanceFacts, "performance"
)


def _cluster_wanted(pre: PreStart) -> str | None:
    """The peers and the collective are tried when --gpucheck-cluster asks and the configuration is valid."""
    config = read_config(pre.settings.cluster, pre.environment)
    if not config.asked:
        return "--gpucheck-cluster was not given"
    if config.blocking():
        return "the cluster configuration is invalid"
    if pre.settings.framework == "none" and config.source == "local":
        return "--gpucheck-framework=none: the local:N tasks are TensorFlow's"
    return None


#: TensorFlow's import and its set-up, beyond the wait for the peers (a local:N run's tasks each need it).
CLUSTER_MARGIN_S = 30.0


def _cluster_env(settings: Settings) -> dict[str, str]:
    return {
        CLUSTER_SPEC_ENV: settings.cluster or "",
        CLUSTER_WAIT_ENV: f"{settings.cluster_timeout:g}",
        # With --gpucheck-framework=none the peers are still reached (a node's network needs no TensorFlow).
        CLUSTER_COLLECTIVE_ENV: "0" if settings.framework == "none" else "1",
    }


#: The cluster layer's child: its own port, its peers, and a real collective over gRPC (on the CPU: no GPU
#: memory taken from the other probes, and what it tests is the distributed runtime and the network).
CLUSTER_PROBE = ChildProbe(
    "cluster",
    "gpucheck.probes.cluster:probe_cluster",
    ClusterFacts,
    "cluster",
    (*FRAMEWORK_ENV, ("CUDA_VISIBLE_DEVICES", "")),
    when=_cluster_wanted,
    timeout=lambda s: s.cluster_timeout + CLUSTER_MARGIN_S,
    settings_env=_cluster_env,
)


# --- the registry ------------------------------------------------------------------------------------

#: Bottom-up; the order is the catalog's (a test holds them equal) and breaks ties between root causes.
LAYERS: tuple[Layer, ...] = (
    Layer("hardware", (), rules=(host.hardware_rules,), checks=("checks/checks_stack.py",)),
    Layer("kernel", ("hardware",), rules=(host.kernel_rules,)),
    Layer("driver", ("kernel",), probes=(CUDA_PROBE, NVML_PROBE), rules=(driver.driver_rules,)),
    # NVML's rules answer visibility (lost GPUs, MIG, compute mode), resources (memory headroom) and
    # health (ECC, clocks, PCIe, P2P) from one reading; they are listed at the lowest of them.
    Layer(
        "visibility",
        ("driver",),
        rules=(visibility.visibility_rules, nvml.nvml_rules, devicemap.device_map_rules),
        checks=("checks/checks_nvml.py",),
    ),
    Layer("compatibility", ("visibility",), rules=(compat.compat_rules,), framework=True),
    Layer(
        "libraries",
        ("compatibility",),
        probes=(LIBRARIES_PROBE,),
        rules=(libraries.library_rules,),
        checks=("checks/checks_libraries.py",),
        framework=True,
    ),
    Layer("framework", ("libraries",), probes=(TENSORFLOW_PROBE,), rules=(framework.framework_rules,), framework=True),
    Layer(
        "placement",
        ("framework",),
        tf_steps=(PLACEMENT_STEP,),
        rules=(placement.placement_rules,),
        checks=("checks/checks_placement.py",),
        framework=True,
    ),
    Layer(
        "resources",
        ("visibility",),
        probes=(MEMORY_GROWTH_PROBE, MALLOC_ASYNC_PROBE),
        rules=(memory.memory_rules,),
        checks=("checks/checks_memory.py",),
    ),
    Layer("health", ("visibility",)),
    Layer(
        "performance",
        ("framework", "resources", "health"),
        blocked_by_ids=("placement-failed", "soft-placement-fallback"),
        rules=(performance.performance_rules,),
        checks=("checks/checks_performance.py",),
        framework=True,
        asked_by="benchmarks",
        after=PERFORMANCE_PROBE,
    ),
    # As a whole it needs nothing below it: its configuration needs the environment, its peers the network;
    # its collective needs TensorFlow itself (the check asks for that), not the GPUs.
    Layer(
        "cluster",
        (),
        probes=(CLUSTER_PROBE,),
        rules=(cluster.cluster_rules,),
        checks=("checks/checks_cluster.py",),
        asked=lambda s: s.cluster is not None or s.tf_config_set,
    ),
)


@cache
def by_name() -> dict[str, Layer]:
    return {layer.name: layer for layer in LAYERS}


@cache
def requires(layer: str) -> frozenset[str]:
    """Every layer ``layer`` needs, directly or through others (not itself). The run pseudo layer needs none."""
    if layer == RUN_LAYER:
        return frozenset()
    out: set[str] = set()
    todo = list(by_name()[layer].needs)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(by_name()[name].needs)
    return frozenset(out)


def cause_requires(cause_id: str, layer: str) -> frozenset[str]:
    """What a finding's evidence needs: its cause's ``needs`` in the catalog where that says more than
    its layer (memory-config-failed is a resource but needs TensorFlow), else its layer's needs."""
    cause = catalog().causes.get(cause_id)
    if cause is not None and cause.needs != cause.layer:
        return requires(cause.needs) | {cause.needs}
    return requires(layer)


def checked(settings: Settings) -> frozenset[str]:
    """The layers whose facts this run gathers."""
    return frozenset(
        layer.name
        for layer in LAYERS
        if layer.built
        and not (layer.framework and settings.framework == "none")
        and (layer.asked_by is None or bool(getattr(settings, layer.asked_by)))
        and (layer.asked is None or layer.asked(settings))
    )


def tf_steps(settings: Settings) -> tuple[TfStep, ...]:
    """The steps the TensorFlow child runs, in registry order, for the layers this run checks."""
    on = checked(settings)
    return tuple(step for layer in LAYERS if layer.name in on for step in layer.tf_steps)


def probes(settings: Settings) -> tuple[ChildProbe, ...]:
    """Every child probe of the layers this run checks, slowest first (they start in this order): the
    TensorFlow child, its steps (read from its facts), then the others."""
    on = checked(settings)
    found = [p for layer in LAYERS if layer.name in on for p in layer.probes]
    tensorflow = [p for p in found if p is TENSORFLOW_PROBE]
    steps = [
        ChildProbe(s.key, TENSORFLOW_PROBE.target, s.facts_cls, s.key, within=TENSORFLOW_PROBE.name)
        for s in tf_steps(settings)
    ]
    return tuple(tensorflow + (steps if tensorflow else []) + [p for p in found if p not in tensorflow])


def rules() -> tuple[Rule, ...]:
    return tuple(rule for layer in LAYERS for rule in layer.rules)


def check_files(settings: Settings | None = None) -> tuple[str, ...]:
    """The check files of every layer, or of the layers ``settings`` asks for (a layer a switch asks for has
    no checks without it, nor with --gpucheck-framework=none when only a framework answers it)."""
    return tuple(
        path
        for layer in LAYERS
        for path in layer.checks
        if settings is None or (layer.asked_by is None and layer.asked is None) or layer.name in checked(settings)
    )


def measured_after(settings: Settings) -> tuple[ChildProbe, ...]:
    """The probes that run after the diagnosis, for the layers this run checks."""
    on = checked(settings)
    return tuple(layer.after for layer in LAYERS if layer.name in on and layer.after is not None)


def _other_gpu(f: Finding, subject: str | None) -> bool:
    """``f`` is about one GPU ("GPU-5") and the question about another ("GPU-0")."""
    return (
        subject is not None
        and f.subject is not None
        and f.subject != subject
        and f.subject.startswith("GPU-")
        and subject.startswith("GPU-")
    )


def blocker_among(findings: Iterable[Finding], layers: frozenset[str], subject: str | None = None) -> Finding | None:
    """The blocker of the lowest layer among ``layers`` (the run pseudo layer blocks everything). For a
    question about one GPU, a blocker about another GPU does not count: one lost GPU of eight leaves the
    seven others' questions answered."""
    cat = catalog()
    candidates = [
        f
        for f in findings
        if f.severity is Severity.BLOCKER and (f.layer in layers or f.layer == RUN_LAYER) and not _other_gpu(f, subject)
    ]
    return min(candidates, key=lambda f: cat.layer_rank(f.layer)) if candidates else None


def layer_blocker(findings: Iterable[Finding], layer: str, subject: str | None = None) -> Finding | None:
    """What blocks ``layer`` as a whole: the lowest broken layer it needs, or one of its ``blocked_by_ids``."""
    found = list(findings)
    own = by_name()[layer].blocked_by_ids if layer in by_name() else ()
    return blocker_among(found, requires(layer), subject) or next(
        (f for f in found if f.id in own and f.severity is Severity.BLOCKER and not _other_gpu(f, subject)), None
    )


def consequence_of(findings: Iterable[Finding], f: Finding) -> Finding | None:
    """The blocker of a broken layer that ``f``'s own evidence needs, if any: ``f`` is then its consequence."""
    return blocker_among(findings, cause_requires(f.id, f.layer), f.subject)


def independent_of(f: Finding, rc: Finding | None) -> bool:
    """Whether ``f`` lies above the root cause ``rc`` but cannot be a consequence of it: what ``f``
    rests on does not need ``rc``'s layer (NVML's health readings do not need TensorFlow)."""
    if rc is None or f is rc or rc.layer == RUN_LAYER:
        return False
    cat = catalog()
    return cat.layer_rank(rc.layer) < cat.layer_rank(f.layer) and rc.layer not in cause_requires(f.id, f.layer)
