"""The lower stack's units, from the PCI bus to the driver's view of the GPUs: each source of facts with its
probes, rules and checks, registered with the layers it answers (``gpucheck.registry`` lists them; the
frameworks' units are packages of ``gpucheck.frameworks``).

The host's own files (PCI bus, kernel module, device nodes, the visibility variables) are read in the
pytest process by the diagnosis itself, before any child starts: they decide which children are worth one.
"""

from __future__ import annotations

from gpucheck.facts import CudaDriverFacts, NvmlFacts
from gpucheck.rules import devicemap, driver, host, nvml, visibility
from gpucheck.unit import CheckFile, ChildProbe, LayerRule, Unit

CUDA_PROBE = ChildProbe("cuda", "driver", "gpucheck.probes.driver:probe_cuda_driver", CudaDriverFacts, "cuda")
#: The ctypes load (for the loader's message) and init, then the inventory and health through nvidia-ml-py.
NVML_PROBE = ChildProbe("nvml", "driver", "gpucheck.probes.nvml:probe_nvml", NvmlFacts, "nvml")

#: In layer order: the rules of one layer run in the order listed here.
UNITS: tuple[Unit, ...] = (
    Unit(
        "host",
        rules=(
            LayerRule("hardware", host.hardware_rules),
            LayerRule("kernel", host.kernel_rules),
            LayerRule("visibility", visibility.visibility_rules),
        ),
        checks=(CheckFile("hardware", "checks/checks_host.py"), CheckFile("visibility", "checks/checks_visibility.py")),
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
        checks=(CheckFile("driver", "checks/checks_driver.py"), CheckFile("visibility", "checks/checks_nvml.py")),
    ),
)
