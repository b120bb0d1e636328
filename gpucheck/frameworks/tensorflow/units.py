"""TensorFlow's units as the registry lists them (``FRAMEWORK``): its child (the framework facts, a shared set-up,
then one step per question of the layers above), the CUDA libraries its build needs, its memory settings, its rules
and checks, its benchmarks and its collective.
``FRAMEWORK`` is what the registry lists (``gpucheck.frameworks.BUILT_IN``); nothing outside this package imports its
modules, and the modules outside read it only through what it says of itself (``view``, a
``gpucheck.facts.FrameworkView``).
"""

from __future__ import annotations

from gpucheck.cluster.collective import COLLECTIVE_STEP as COLLECTIVE
from gpucheck.frameworks.tensorflow import process, view
from gpucheck.frameworks.tensorflow.facts import (
    FrameworkFacts,
    GpuMemoryFacts,
    LibrariesFacts,
    MemoryConfigFacts,
    MultiDeviceFacts,
    NumericsFacts,
    PlacementFacts,
    TfSetupFacts,
    TrainingStepFacts,
    XlaFacts,
)

# Aliased: the package's own modules of the same names are its probes.
from gpucheck.frameworks.tensorflow.rules import compat as rules_compat
from gpucheck.frameworks.tensorflow.rules import framework as rules_framework
from gpucheck.frameworks.tensorflow.rules import libraries as rules_libraries
from gpucheck.frameworks.tensorflow.rules import memory as rules_memory
from gpucheck.frameworks.tensorflow.rules import placement as rules_placement
from gpucheck.performance.facts import FIELD as PERFORMANCE_FIELD
from gpucheck.performance.facts import PerformanceFacts
from gpucheck.unit import CheckFile, ChildProbe, Framework, LayerRule, PreStart, Step, Unit

#: The cluster unit's child, whose collective this unit runs.
CLUSTER_PROBE_NAME = "cluster"
#: TensorFlow's own log lines are evidence.
FRAMEWORK_ENV = (("TF_CPP_MIN_LOG_LEVEL", "0"),)


def _no_growth_to_try(pre: PreStart) -> str | None:
    """Memory growth is tried where there may be GPUs, and where the environment does not turn it off."""
    if "tensorflow" not in pre.settings.frameworks:
        return "--gpucheck-framework=none"
    if pre.nvidia_gpus_on_bus == 0:
        return "no NVIDIA GPU on the PCI bus"
    if pre.environment.get("TF_FORCE_GPU_ALLOW_GROWTH") == "false":
        return "TF_FORCE_GPU_ALLOW_GROWTH=false turns memory growth off in every TensorFlow process"
    if pre.environment.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async":
        return "TF_GPU_ALLOCATOR=cuda_malloc_async: the allocator whose growth this tries is not in use"
    return None


def _async_allocator_not_asked(pre: PreStart) -> str | None:
    """TF_GPU_ALLOCATOR=cuda_malloc_async is tried in a process of its own with --gpucheck-deep. Where the
    environment sets it, the main TensorFlow process (which runs with the user's environment, as their
    programs do) already tries it."""
    if "tensorflow" not in pre.settings.frameworks:
        return "--gpucheck-framework=none"
    if pre.nvidia_gpus_on_bus == 0:
        return "no NVIDIA GPU on the PCI bus"
    if pre.environment.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async":
        return "the environment sets TF_GPU_ALLOCATOR=cuda_malloc_async: the main TensorFlow process runs with it"
    if pre.settings.deep:
        return None
    return "TF_GPU_ALLOCATOR is not cuda_malloc_async here (--gpucheck-deep tries it anyway)"


#: The CUDA libraries TensorFlow's build needs, found as the loader would, and XLA's toolchain.
LIBRARIES_PROBE = ChildProbe(
    "libraries", "libraries", "gpucheck.frameworks.tensorflow.libraries:probe_libraries", LibrariesFacts, "libraries"
)
#: The one TensorFlow process on the critical path: the framework facts, then the steps of the layers above.
TENSORFLOW_PROBE = ChildProbe(
    "framework", "framework", "gpucheck.frameworks.tensorflow.child:framework_then_steps", FrameworkFacts, "framework", FRAMEWORK_ENV
)
#: The steps run in the TensorFlow child.
CHILD = TENSORFLOW_PROBE.name
#: The TensorFlow child's shared set-up (its GPUs, the CPU split, the memory limit, the devices created): the
#: child runs it once before every step; registered for its facts.
TF_SETUP_STEP = Step("tf_setup", "framework", "gpucheck.frameworks.tensorflow.setup:set_up", TfSetupFacts, CHILD)
#: One step per question, each with its facts class and ``Facts`` field.
PLACEMENT_STEP = Step("placement", "placement", "gpucheck.frameworks.tensorflow.placement:placement_step", PlacementFacts, CHILD)
TRAINING_STEP = Step("training_step", "placement", "gpucheck.frameworks.tensorflow.training:training_step", TrainingStepFacts, CHILD)
NUMERICS_STEP = Step("numerics", "placement", "gpucheck.frameworks.tensorflow.numerics:numerics_step", NumericsFacts, CHILD)
XLA_STEP = Step("xla", "placement", "gpucheck.frameworks.tensorflow.xla:xla_step", XlaFacts, CHILD)
MULTI_DEVICE_STEP = Step(
    "multi_device", "placement", "gpucheck.frameworks.tensorflow.multidevice:multi_device_step", MultiDeviceFacts, CHILD)
GPU_MEMORY_STEP = Step("gpu_memory", "resources", "gpucheck.frameworks.tensorflow.memory:gpu_memory_step", GpuMemoryFacts, CHILD)
#: Memory settings that must be made before TensorFlow touches a GPU, each in a TensorFlow process of its
#: own beside the main one (none of them reserves more than it allocates), forked from it once TensorFlow is imported.
MEMORY_GROWTH_PROBE = ChildProbe(
    "memory-growth",
    "resources",
    "gpucheck.frameworks.tensorflow.memory:probe_memory_growth",
    MemoryConfigFacts,
    "memory_growth",
    FRAMEWORK_ENV,
    skip_reason=_no_growth_to_try,
    forked_from=CHILD,
)
MALLOC_ASYNC_PROBE = ChildProbe(
    "cuda-malloc-async",
    "resources",
    "gpucheck.frameworks.tensorflow.memory:probe_cuda_malloc_async",
    MemoryConfigFacts,
    "cuda_malloc_async",
    (*FRAMEWORK_ENV, ("TF_GPU_ALLOCATOR", "cuda_malloc_async")),
    skip_reason=_async_allocator_not_asked,
    forked_from=CHILD,
)

#: The benchmarks (--gpucheck-benchmarks), in a TensorFlow process of their own, after the diagnosis.
PERFORMANCE_PROBE = ChildProbe(
    "performance",
    "performance",
    "gpucheck.frameworks.tensorflow.benchmarks:probe_performance",
    PerformanceFacts,
    PERFORMANCE_FIELD,
)

#: The cluster child's collective in TensorFlow (``gpucheck.cluster.collective``): its facts are the tasks'.
COLLECTIVE_STEP = Step(
    COLLECTIVE, "cluster", "gpucheck.frameworks.tensorflow.collective:collective", None, CLUSTER_PROBE_NAME
)

#: In layer order: the rules of one layer run in the order listed here.
UNITS: tuple[Unit, ...] = (
    Unit("compatibility", rules=(LayerRule("compatibility", rules_compat.compat_rules),)),
    Unit(
        "libraries",
        probes=(LIBRARIES_PROBE,),
        rules=(LayerRule("libraries", rules_libraries.library_rules),),
        checks=(CheckFile("libraries", "frameworks/tensorflow/checks_libraries.py"),),
    ),
    Unit(
        "framework",
        probes=(TENSORFLOW_PROBE,),
        steps=(TF_SETUP_STEP,),
        rules=(LayerRule("framework", rules_framework.framework_rules),),
        checks=(CheckFile("framework", "frameworks/tensorflow/checks_framework.py"),),
    ),
    Unit(
        "placement",
        steps=(PLACEMENT_STEP, TRAINING_STEP, NUMERICS_STEP, XLA_STEP, MULTI_DEVICE_STEP),
        rules=(LayerRule("placement", rules_placement.placement_rules),),
        checks=(CheckFile("placement", "frameworks/tensorflow/checks_placement.py"),),
    ),
    Unit(
        "memory",
        probes=(MEMORY_GROWTH_PROBE, MALLOC_ASYNC_PROBE),
        steps=(GPU_MEMORY_STEP,),
        rules=(LayerRule("resources", rules_memory.memory_rules),),
        not_checked=rules_memory.not_checked,
        checks=(CheckFile("resources", "frameworks/tensorflow/checks_memory.py"),),
    ),
    # Its benchmarks answer the performance unit's questions (--gpucheck-benchmarks).
    Unit("benchmarks", after=(PERFORMANCE_PROBE,)),
    # Its collective, run by the cluster child once the peers are reached (--gpucheck-cluster).
    Unit("collective", steps=(COLLECTIVE_STEP,)),
)

#: The unit as the registry lists it (``gpucheck.frameworks.BUILT_IN``).
FRAMEWORK = Framework(
    view.NAME, view.TITLE, "tensorflow", UNITS, view.view, process.bound_memory, log_patterns="data/log_patterns.json"
)
