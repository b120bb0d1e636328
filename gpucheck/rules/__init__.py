"""Rules: pure functions from facts to findings, one module a layer (or two close ones).

``evaluate`` runs them bottom-up. Each rule sees all facts, so a higher layer
can tell "broken here" from "broken because of something lower" and a lower
one can use evidence from above (a GPU that CUDA enumerates is on a bus even
where sysfs does not show it).
"""

from __future__ import annotations

from gpucheck.facts import Facts
from gpucheck.model import Finding
from gpucheck.rules import compat, devicemap, driver, framework, host, libraries, nvml, placement, visibility
from gpucheck.settings import Settings

#: Layers whose facts this version gathers; the others are reported as "not checked".
CHECKED_LAYERS = frozenset(
    {"hardware", "kernel", "driver", "visibility", "compatibility", "libraries", "framework", "placement", "resources", "health"}
)

#: Layers that only the framework probes answer: not checked with --gpucheck-framework=none.
FRAMEWORK_LAYERS = frozenset({"compatibility", "libraries", "framework", "placement"})


def checked_layers(settings: Settings) -> frozenset[str]:
    return CHECKED_LAYERS - FRAMEWORK_LAYERS if settings.framework == "none" else CHECKED_LAYERS


RULES = (
    host.hardware_rules,
    host.kernel_rules,
    driver.driver_rules,
    visibility.visibility_rules,
    nvml.nvml_rules,
    devicemap.device_map_rules,
    compat.compat_rules,
    libraries.library_rules,
    framework.framework_rules,
    placement.placement_rules,
)


def evaluate(facts: Facts, settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(facts, settings))
    return findings
