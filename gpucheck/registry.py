"""The registry: every unit, and what a run of given settings gathers from them.

Adding a unit is its package (probes, facts, rules, checks, rendering, pytest side), its catalog ids
(``data/catalog.json``) and one entry in ``UNITS``. A part of a unit (a probe, a step, a rule, a check
file) belongs to a layer (``gpucheck.layers``); a run gathers the parts of the layers it checks.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import Any

from gpucheck import cluster, performance, records, stack
from gpucheck.facts import Facts
from gpucheck.frameworks import tensorflow
from gpucheck.layers import by_name, checked
from gpucheck.model import catalog
from gpucheck.settings import Settings
from gpucheck.unit import ChildProbe, Explain, InProcess, LayerRule, Step, Unit

#: The lower stack's units, the frameworks' units, then the units of the layers a switch asks for.
UNITS: tuple[Unit, ...] = (*stack.UNITS, *tensorflow.UNITS, records.UNIT, performance.UNIT, cluster.UNIT)
#: The NVML reading, whose GPU list the per-GPU checks are parametrized by at collection.
NVML_PROBE = stack.NVML_PROBE


def steps(settings: Settings) -> tuple[Step, ...]:
    """The steps of the layers this run checks, in registry order, whose child this run starts (none where the
    child's own layer is not checked: there is no such child)."""
    on = checked(settings)
    children = {p.name for unit in UNITS for p in unit.probes if p.layer in on}
    return tuple(step for unit in UNITS for step in unit.steps if step.layer in on and step.child in children)


def steps_of(probe: ChildProbe, settings: Settings) -> tuple[Step, ...]:
    """The steps ``probe``'s child runs after its first facts, in order (``GPUCHECK_STEPS``)."""
    return tuple(s for s in steps(settings) if s.child == probe.name)


def probes(settings: Settings) -> tuple[ChildProbe, ...]:
    """Every child probe of the layers this run checks, slowest first (they start in this order): each child that
    runs steps, followed by its steps (read from its facts), then the others."""
    on = checked(settings)
    found = [p for unit in UNITS for p in unit.probes if p.layer in on]
    staged = [p for p in found if steps_of(p, settings)]
    out: list[ChildProbe] = []
    for p in staged:
        out.append(p)
        out += [ChildProbe(s.key, s.layer, p.target, s.facts_cls, s.key, within=p.name) for s in steps_of(p, settings)]
    return tuple(out + [p for p in found if p not in staged])


def measured_after(settings: Settings) -> tuple[ChildProbe, ...]:
    """The probes that run after the diagnosis, for the layers this run checks."""
    on = checked(settings)
    return tuple(p for unit in UNITS for p in unit.after if p.layer in on)


def in_process() -> tuple[InProcess, ...]:
    """The quick readings made in the pytest process, on every run (a set TF_CONFIG is validated always)."""
    return tuple(r for unit in UNITS for r in unit.in_process)


@cache
def rules() -> tuple[LayerRule, ...]:
    """Every rules entry point, bottom-up: by layer, then in registry order."""
    cat = catalog()
    return tuple(sorted((r for unit in UNITS for r in unit.rules), key=lambda r: cat.layer_rank(r.layer)))


def explainers() -> tuple[Explain, ...]:
    """What the units' facts add to the findings of others (``Unit.explains``), in registry order."""
    return tuple(unit.explains for unit in UNITS if unit.explains is not None)


def unit_fields() -> tuple[str, ...]:
    """The facts fields the units fill (``Facts.units``): every one present, None when not gathered."""
    parts: list[Any] = [p for unit in UNITS for p in (*unit.in_process, *unit.probes, *unit.after)]
    fields = [p.field for p in parts if p.field not in Facts.__dataclass_fields__]
    return tuple(dict.fromkeys(fields))


def environment_keys() -> tuple[str, ...]:
    return tuple(key for unit in UNITS for key in unit.environment_keys)


def check_files(settings: Settings | None = None) -> tuple[str, ...]:
    """The check files of every unit, or of the layers ``settings`` asks for (a layer a switch asks for has
    no checks without it, nor with --gpucheck-framework=none when only a framework answers it)."""
    on = checked(settings) if settings is not None else frozenset()
    return tuple(
        c.path
        for unit in UNITS
        for c in unit.checks
        if settings is None or by_name()[c.layer].asked is None or c.layer in on
    )


def pytest_plugins(settings: Settings) -> list[tuple[str, type[Any]]]:
    """The units' pytest sides (``Unit.pytest_plugin``) for the layers this run checks, imported only now."""
    on = checked(settings)
    out = []
    for unit in UNITS:
        if unit.pytest_plugin is not None and any(c.layer in on for c in unit.checks):
            module, _, name = unit.pytest_plugin.partition(":")
            out.append((unit.name, getattr(importlib.import_module(module), name)))
    return out


def not_checked(facts: Facts, settings: Settings) -> dict[str, str]:
    """Why each question the diagnosis could not look at was not checked, by the id it is named after."""
    out: dict[str, str] = {}
    for unit in UNITS:
        if unit.not_checked is not None:
            out.update(unit.not_checked(facts, settings))
    return out


def summary_lines(facts: Facts) -> list[str]:
    """The units' own lines in the terminal summary (figures), in registry order."""
    return [line for unit in UNITS if unit.summary is not None for line in unit.summary(facts)]


def figures(facts_json: Any) -> dict[str, Any]:
    """The units' key figures for ``gpucheck merge``, from a report's facts (any shape)."""
    out: dict[str, Any] = {}
    for unit in UNITS:
        if unit.figures is not None:
            out.update(unit.figures(facts_json))
    return out


def figures_text(values: Mapping[str, Any]) -> list[str]:
    return [text for unit in UNITS if unit.figures_text is not None for text in unit.figures_text(values)]
