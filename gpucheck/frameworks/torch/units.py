"""PyTorch's units as the registry lists them (``FRAMEWORK``): its child (``import torch`` and what torch says of its
build and its GPUs), its compatibility and framework rules and its checks, and its benchmarks. ``FRAMEWORK`` is what the registry lists
(``gpucheck.frameworks.BUILT_IN``); nothing outside this package imports its modules, and the modules outside read it
only through what it says of itself (``view``, a ``gpucheck.facts.FrameworkView``).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucheck.frameworks.torch import memory, process, view
from gpucheck.frameworks.torch.facts import (
    FIELD,
    FRACTION_FIELD,
    NUMERICS_FIELD,
    PLACEMENT_FIELD,
    SHM_FIELD,
    TRAINING_FIELD,
    SharedMemory,
    TorchFacts,
    TorchFractionFacts,
    TorchNumericsFacts,
    TorchPlacementFacts,
    TorchTrainingFacts,
)
from gpucheck.frameworks.torch.rules import common as rules_common
from gpucheck.frameworks.torch.rules import compat as rules_compat
from gpucheck.frameworks.torch.rules import framework as rules_framework
from gpucheck.frameworks.torch.rules import placement as rules_placement
from gpucheck.frameworks.torch.rules import resources as rules_resources
from gpucheck.performance.facts import FIELD as PERFORMANCE_FIELD
from gpucheck.performance.facts import PerformanceFacts
from gpucheck.probes.host import host_root
from gpucheck.settings import Settings
from gpucheck.unit import CheckFile, ChildProbe, Framework, InProcess, LayerRule, Step, Unit

#: The PyTorch child: ``import torch`` and its readings, in a process of its own started with every other probe.
TORCH_PROBE = ChildProbe(FIELD, "framework", "gpucheck.frameworks.torch.child:torch_then_steps", TorchFacts, FIELD)
#: The placement layer's steps, in that child after its framework facts (``gpucheck.frameworks.torch.placement``).
PLACEMENT_STEP = Step(PLACEMENT_FIELD, "placement", "gpucheck.frameworks.torch.placement:placement_step",
                      TorchPlacementFacts, FIELD)
NUMERICS_STEP = Step(NUMERICS_FIELD, "placement", "gpucheck.frameworks.torch.placement:numerics_step",
                     TorchNumericsFacts, FIELD)
TRAINING_STEP = Step(TRAINING_FIELD, "placement", "gpucheck.frameworks.torch.placement:training_step",
                     TorchTrainingFacts, FIELD)
#: The resources layer's step there: does set_per_process_memory_fraction bound the process (``fraction``)?
FRACTION_STEP = Step(FRACTION_FIELD, "resources", "gpucheck.frameworks.torch.fraction:fraction_step",
                     TorchFractionFacts, FIELD)
#: The benchmarks of the plan torch measures, by kind or ``kind:variant`` (``Framework.benchmarks``): launch latency
#: eagerly only (TensorFlow's ``function`` variant is its graph executor, which torch programs do not run); TensorFlow's
#: soft-placement fallback, its matpow split by hand and its training towers are TensorFlow's own.
BENCHMARKS = ("matmul", "copy", "conv", "launch:eager", "allreduce")
#: The benchmarks (--gpucheck-benchmarks, where PyTorch measures), in a torch process of their own, after the diagnosis.
PERFORMANCE_PROBE = ChildProbe(
    "performance",
    "performance",
    "gpucheck.frameworks.torch.benchmarks:probe_performance",
    PerformanceFacts,
    PERFORMANCE_FIELD,
)



def _read_shm(settings: Settings, environment: Mapping[str, str | None]) -> SharedMemory:
    """``/dev/shm`` below the host view (``GPUCHECK_HOST_ROOT``): one ``statvfs``, in the pytest process."""
    return memory.read_shared_memory(host_root())


#: In layer order: the rules of one layer run in the order listed here.
UNITS: tuple[Unit, ...] = (
    Unit("torch-compatibility", rules=(LayerRule("compatibility", rules_compat.compat_rules),)),
    Unit(
        "torch-framework",
        probes=(TORCH_PROBE,),
        rules=(LayerRule("framework", rules_framework.framework_rules),),
        checks=(CheckFile("framework", "frameworks/torch/checks_torch.py"),),
    ),
    Unit(
        "torch-placement",
        steps=(PLACEMENT_STEP, NUMERICS_STEP, TRAINING_STEP),
        rules=(LayerRule("placement", rules_placement.placement_rules),),
        checks=(CheckFile("placement", "frameworks/torch/checks_torch_placement.py"),),
    ),
    Unit(
        "torch-resources",
        steps=(FRACTION_STEP,),
        in_process=(InProcess(SHM_FIELD, "resources", _read_shm),),
        rules=(LayerRule("resources", rules_resources.resources_rules),),
        not_checked=rules_resources.not_checked,
        checks=(CheckFile("resources", "frameworks/torch/checks_torch_resources.py"),),
        environment_keys=rules_resources.ENVIRONMENT_KEYS,
    ),
    # Its benchmarks answer the performance unit's questions (--gpucheck-benchmarks) where it measures.
    Unit("torch-benchmarks", after=(PERFORMANCE_PROBE,)),
)

#: The unit as the registry lists it (``gpucheck.frameworks.BUILT_IN``).
FRAMEWORK = Framework(
    view.NAME, view.TITLE, "torch", UNITS, view.view, process.bound_memory,
    log_patterns=rules_common.LOG_PATTERNS, benchmarks=BENCHMARKS,
    # `import torch` stopped by a CUDA library found first (rules.framework): torch cannot run, on the CPU either.
    broken_by=("cuda-library-shadowed", "cudnn-version-mismatch"),
)
