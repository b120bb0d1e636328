"""PyTorch's units as the registry lists them (``FRAMEWORK``): its child (``import torch`` and what torch says of its
build and its GPUs), its compatibility and framework rules and its checks. ``FRAMEWORK`` is what the registry lists
(``gpucheck.frameworks.BUILT_IN``); nothing outside this package imports its modules, and the modules outside read it
only through what it says of itself (``view``, a ``gpucheck.facts.FrameworkView``).
"""

from __future__ import annotations

from gpucheck.frameworks.torch import process, view
from gpucheck.frameworks.torch.facts import FIELD, TorchFacts
from gpucheck.frameworks.torch.rules import compat as rules_compat
from gpucheck.frameworks.torch.rules import framework as rules_framework
from gpucheck.unit import CheckFile, ChildProbe, Framework, LayerRule, Unit

#: The PyTorch child: ``import torch`` and its readings, in a process of its own started with every other probe.
TORCH_PROBE = ChildProbe(FIELD, "framework", "gpucheck.frameworks.torch.child:probe_torch", TorchFacts, FIELD)

#: In layer order: the rules of one layer run in the order listed here.
UNITS: tuple[Unit, ...] = (
    Unit("torch-compatibility", rules=(LayerRule("compatibility", rules_compat.compat_rules),)),
    Unit(
        "torch-framework",
        probes=(TORCH_PROBE,),
        rules=(LayerRule("framework", rules_framework.framework_rules),),
        checks=(CheckFile("framework", "frameworks/torch/checks_torch.py"),),
    ),
)

#: The unit as the registry lists it (``gpucheck.frameworks.BUILT_IN``).
FRAMEWORK = Framework(
    view.NAME, view.TITLE, "torch", UNITS, view.view, process.bound_memory,
    log_patterns="frameworks/torch/log_patterns.json",
)
