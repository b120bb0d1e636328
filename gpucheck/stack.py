"""The lower stack's units, from the PCI bus to placement: each source of facts with its probes, rules
and checks, registered with the layers it answers (``gpucheck.registry`` lists them).

The host's own files (PCI bus, kernel module, device nodes, the visibility variables) are read in the
pytest process by the diagnosis itself, before any child starts: they decide which children are worth one.
"""

from __future__ import annotations

from gpucheck.facts import (
    CudaDriverFacts,
    FrameworkFacts,
    GpuMemoryFacts,
    LibrariesFacts,
    MemoryConfigFacts,
    MultiDeviceFacts,
    NumericsFacts,
    NvmlFacts,
    PlacementFacts,
    TfSetupFacts,
    TrainingStepFacts,
    XlaFacts,
)
from gpucheck.rules import compat, devicemap, driver, framework, host, libraries, memory, nvml, placement, visibility
from gpucheck.unit import CheckFile, ChildProbe, LayerRule, PreStart, TfStep, Unit

#: TensorFlow's own log lines are evidence.
FRAMEWORK_ENV = (("TF_CPP_MIN_LOG_LEVEL", "0"),)


def _no_growth_to_try(pre: PreStart) -> str | None:
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


def _async_allocator_not_asked(pre: PreStart) -> str | None:
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


CUDA_PROBE = ChildProbe("cuda", "driver", "gpucheck.probes.driver:probe_cuda_driver", CudaDriverFacts, "cuda")
#: The ctypes load (for the loader's message) and init, then the inventory and health through nvidia-ml-py.
NVML_PROBE = ChildProbe("nvml", "driver", "gpucheck.probes.nvml:probe_nvml", NvmlFacts, "nvml")
#: The CUDA libraries TensorFlow's build needs, found as the loader would, and XLA's toolchain.
LIBRARIES_PROBE = ChildProbe(
    "libraries", "libraries", "gpucheck.probes.libraries:probe_libraries", LibrariesFacts, "libraries"
)
#: The one TensorFlow process on the critical path: the framework facts, then the steps of the layers above.
TENSORFLOW_PROBE = ChildProbe(
    "framework", "framework", "gpucheck.probes.tfchild:framework_then_steps", FrameworkFacts, "framework", FRAMEWORK_ENV
)
#: The TensorFlow child's shared set-up (its GPUs, the CPU split, the memory limit, the devices created): the
#: child runs it once before every step; registered for its facts.
TF_SETUP_STEP = TfStep("tf_setup", "framework", "gpucheck.probes.tfsetup:set_up", TfSetupFacts)
#: One step per question, each with its facts class and ``Facts`` field.
PLACEMENT_STEP = TfStep("placement", "placement", "gpucheck.probes.placement:placement_step", PlacementFacts)
TRAINING_STEP = TfStep("training_step", "placement", "gpucheck.probes.training:training_step", TrainingStepFacts)
NUMERICS_STEP = TfStep("numerics", "placement", "gpucheck.probes.numerics:numerics_step", NumericsFacts)
XLA_STEP = TfStep("xla", "placement", "gpucheck.probes.xla:xla_step", XlaFacts)
MULTI_DEVICE_STEP = TfStep(
    "multi_device", "placement", "gpucheck.probes.multidevice:multi_device_step", MultiDeviceFacts
)
GPU_MEMORY_STEP = TfStep("gpu_memory", "resources", "gpucheck.probes.memory:gpu_memory_step", GpuMemoryFacts)
#: Memory settings that must be made before TensorFlow touches a GPU, each in a TensorFlow process of its
#: own started beside the main one (none of them reserves more than it allocates).
MEMORY_GROWTH_PROBE = ChildProbe(
    "memory-growth",
    "resources",
    "gpucheck.probes.memory:probe_memory_growth",
    MemoryConfigFacts,
    "memory_growth",
    FRAMEWORK_ENV,
    skip_reason=_no_growth_to_try,
)
MALLOC_ASYNC_PROBE = ChildProbe(
    "cuda-malloc-async",
    "resources",
    "gpucheck.probes.memory:probe_cuda_malloc_async",
    MemoryConfigFacts,
    "cuda_malloc_async",
    (*FRAMEWORK_ENV, ("TF_GPU_ALLOCATOR", "cuda_malloc_async")),
    skip_reason=_async_allocator_not_asked,
)

#: In layer order: the rules of one layer run in the order listed here.
UNITS: tuple[Unit, ...] = (
    Unit(
        "host",
        rules=(
            LayerRule("hardware", host.hardware_rules),
            LayerRule("kernel", host.kernel_rules),
            LayerRule("visibility", visibility.visibility_rules),
        ),
        checks=(CheckFile("hardware", "checks/checks_stack.py"),),
    ),
    # One NVML reading answers visibility (lost GPUs, MIG, compute mode), resources (memory headroom) and
    # health (ECC, clocks, PCIe, P2P); its rules are listed at the lowest of them.
    Unit(
        "driver",
        probes=(CUDA_PROBE, NVML_PROBE),
        rules=(
            LayerRule("driver", driver.driver_rules),
            LayerRule("visibility", nvml.nvml_rules),
            LayerRule("visibility", devicemap.device_map_rules),
        ),
        not_checked=nvml.not_checked,
        checks=(CheckFile("visibility", "checks/checks_nvml.py"),),
    ),
    Unit("compatibility", rules=(LayerRule("compatibility", compat.compat_rules),)),
    Unit(
        "libraries",
        probes=(LIBRARIES_PROBE,),
        rules=(LayerRule("libraries", libraries.library_rules),),
        checks=(CheckFile("libraries", "checks/checks_libraries.py"),),
    ),
    Unit(
        "framework",
        probes=(TENSORFLOW_PROBE,),
        tf_steps=(TF_SETUP_STEP,),
        rules=(LayerRule("framework", framework.framework_rules),),
    ),
    Unit(
        "placement",
        tf_steps=(PLACEMENT_STEP, TRAINING_STEP, NUMERICS_STEP, XLA_STEP, MULTI_DEVICE_STEP),
        rules=(LayerRule("placement", placement.placement_rules),),
        checks=(CheckFile("placement", "checks/checks_placement.py"),),
    ),
    Unit(
        "memory",
        probes=(MEMORY_GROWTH_PROBE, MALLOC_ASYNC_PROBE),
        tf_steps=(GPU_MEMORY_STEP,),
        rules=(LayerRule("resources", memory.memory_rules),),
        not_checked=memory.not_checked,
        checks=(CheckFile("resources", "checks/checks_memory.py"),),
    ),
)
