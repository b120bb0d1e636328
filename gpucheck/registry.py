"""The registry: every unit, and what a run of given settings gathers from them.

Adding a unit is its package (probes, facts, rules, checks, rendering, pytest side), its catalog ids
(``data/catalog.json``) and one entry in ``UNITS``; adding a framework is its package under
``gpucheck.frameworks`` (a ``FRAMEWORK``), its catalog ids and one line in ``gpucheck.frameworks.BUILT_IN`` (or an
entry point of another distribution). A part of a unit (a probe, a step, a rule, a check file) belongs to a layer
(``gpucheck.layers``); a run gathers the parts of the layers it checks, and of a framework's units only where the
run asks for that framework (--gpucheck-framework).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any

from gpucheck import cluster, frameworks, logs, performance, records, stack
from gpucheck.blocking import unchecked_key
from gpucheck.facts import Facts, FrameworkView
from gpucheck.layers import by_name, checked
from gpucheck.model import Finding, catalog
from gpucheck.settings import Settings
from gpucheck.unit import ChildProbe, Explain, Framework, InProcess, LayerRule, Step, Unit


def _load(name: str, module: str) -> Framework:
    """A framework unit's ``FRAMEWORK``: a module's attribute, or the object an entry point names."""
    found = frameworks.resolve(module)
    if not isinstance(found, Framework) or found.name != name:
        raise TypeError(f"{module} (framework {name!r}) is not a gpucheck.unit.Framework named {name!r}")
    return found


def _load_all() -> tuple[tuple[Framework, ...], dict[str, str]]:
    """The built-in framework units (an error in one is gpucheck's own, and raises), then those other distributions
    register: one that cannot be loaded is left out with a warning that says why, never a traceback of the run."""
    loaded: list[Framework] = []
    refused: dict[str, str] = {}
    for name, module in frameworks.available().items():
        if name in frameworks.BUILT_IN:
            loaded.append(_load(name, module))
            continue
        try:
            loaded.append(_load(name, module))
        except Exception as exc:  # noqa: BLE001 - another distribution's code: any fault is a sentence
            refused[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"gpucheck: the framework unit {name!r} ({module}, entry point of the group {frameworks.GROUP}) "
                f"cannot be loaded and is left out: {refused[name]}",
                RuntimeWarning,
                stacklevel=2,
            )
    return tuple(loaded), refused


#: Every framework unit: the built-in ones, then those other distributions register (``gpucheck.frameworks``), and
#: those that could not be loaded (name -> why).
FRAMEWORKS, REFUSED = _load_all()
#: The lower stack's units, the frameworks' units, then the units of the layers a switch asks for.
UNITS: tuple[Unit, ...] = (
    *stack.UNITS,
    *(unit for framework in FRAMEWORKS for unit in framework.units),
    records.UNIT,
    performance.UNIT,
    cluster.UNIT,
)
#: The framework each framework unit belongs to, by the unit's identity.
_FRAMEWORK_OF: dict[int, str] = {id(unit): fw.name for fw in FRAMEWORKS for unit in fw.units}


def framework_of(unit: Unit) -> str | None:
    """The framework ``unit`` belongs to; None for a unit of the lower stack or a layer a switch asks for."""
    return _FRAMEWORK_OF.get(id(unit))


def _asked(unit: Unit, settings: Settings) -> bool:
    name = framework_of(unit)
    return name is None or name in settings.frameworks


def not_asked(probe: ChildProbe, settings: Settings) -> str | None:
    """Why a probe of a checked layer does not run here: it is a framework's that this run does not ask for."""
    for unit in UNITS:
        if probe in unit.probes and not _asked(unit, settings):
            return f"--gpucheck-framework={settings.framework}"
    return None


#: The NVML reading, whose GPU list the per-GPU checks are parametrized by at collection.
NVML_PROBE = stack.NVML_PROBE


def steps(settings: Settings) -> tuple[Step, ...]:
    """The steps of the layers this run checks, in registry order, whose child this run starts (none where the
    child's own layer is not checked: there is no such child)."""
    on = checked(settings)
    children = {p.name for unit in UNITS if _asked(unit, settings) for p in unit.probes if p.layer in on}
    return tuple(
        step
        for unit in UNITS
        if _asked(unit, settings)
        for step in unit.steps
        if step.layer in on and step.child in children
    )


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
        out += [
            ChildProbe(s.key, s.layer, p.target, s.facts_cls, s.key, within=p.name)
            for s in steps_of(p, settings)
            if s.facts_cls is not None
        ]
    return tuple(out + [p for p in found if p not in staged])


def measured_after(settings: Settings) -> tuple[ChildProbe, ...]:
    """The probes that run after the diagnosis, for the layers this run checks: of a framework's, only the measuring
    framework's (``measuring_framework``): with TensorFlow and PyTorch asked, one benchmark process times the
    machine, and one facts field holds what it measured."""
    on = checked(settings)
    return tuple(
        p
        for unit in UNITS
        for p in unit.after
        if p.layer in on and framework_of(unit) in (None, measuring_framework(settings, p.layer))
    )


def in_process(settings: Settings) -> tuple[InProcess, ...]:
    """The quick readings made in the pytest process, on every run (a set TF_CONFIG is validated always), and a
    framework's where the run asks for it."""
    return tuple(r for unit in UNITS if _asked(unit, settings) for r in unit.in_process)


@cache
def rules() -> tuple[tuple[LayerRule, str | None], ...]:
    """Every rules entry point with the framework whose unit it is (None: the lower stack's, a switch's), bottom-up:
    by layer, then in registry order."""
    cat = catalog()
    found = [(r, framework_of(unit)) for unit in UNITS for r in unit.rules]
    return tuple(sorted(found, key=lambda pair: cat.layer_rank(pair[0].layer)))


def findings(facts: Facts, settings: Settings) -> tuple[Finding, ...]:
    """Every rule's findings, bottom-up; a framework's carry its name (``Finding.framework``): what they block is
    that framework's questions, never another framework's. The rules of a framework this run does not ask for do not
    run (TensorFlow's mixed-precision advice, read from NVML alone, named Keras in a run that asked for torch only)."""
    out: list[Finding] = []
    asked = settings.frameworks
    for rule, framework in rules():
        if framework is not None and framework not in asked:
            continue
        found = rule.rule(facts, settings)
        out += [dataclasses.replace(f, framework=framework) for f in found] if framework is not None else found
    return tuple(out)


def with_views(facts: Facts, settings: Settings) -> Facts:
    """``facts`` with what each framework this run asks for says of itself (``Facts.frameworks``)."""
    views: dict[str, FrameworkView] = {}
    for framework in FRAMEWORKS:
        if framework.name in settings.frameworks and (view := framework.view(facts)) is not None:
            views[framework.name] = view
    return dataclasses.replace(facts, frameworks=views)


def measuring_framework(settings: Settings, layer: str) -> str | None:
    """The framework that measures a layer of no framework's own for this run (the performance layer's benchmarks,
    the cluster's collective): the first one asked whose units register a probe or a step of that layer, in the order
    of ``FRAMEWORKS`` (the built-in ones as ``gpucheck.frameworks.BUILT_IN`` lists them: TensorFlow, then PyTorch; so
    with both asked TensorFlow measures, and ``--gpucheck-framework=torch`` has PyTorch measure). Its questions there
    are scoped to it, so another framework's blocker does not block them. None for a layer every run checks (the lower
    stack's questions are no framework's)."""
    if layer not in by_name() or by_name()[layer].asked is None:
        return None
    for fw in FRAMEWORKS:
        layers = {p.layer for unit in fw.units for p in (*unit.probes, *unit.after)}
        layers |= {s.layer for unit in fw.units for s in unit.steps}
        if fw.name in settings.frameworks and layer in layers:
            return fw.name
    return None


def framework_named(name: str) -> Framework | None:
    return next((fw for fw in FRAMEWORKS if fw.name == name), None)


def log_tables() -> tuple[logs.Table, ...]:
    """The log patterns of every framework unit that has them (``Framework.log_patterns``), in registry order, for
    ``gpucheck explain``; a table that cannot be read is left out with a warning."""
    tables: list[logs.Table] = []
    for fw in FRAMEWORKS:
        if fw.log_patterns is None:
            continue
        try:
            tables.append(logs.table(fw.log_patterns, fw.name, fw.title))
        except (OSError, ValueError, KeyError, TypeError, AssertionError, re.error) as exc:
            warnings.warn(f"gpucheck: the log patterns of {fw.name} ({fw.log_patterns}) cannot be read: {exc}", stacklevel=2)
    return tuple(tables)


def explainers() -> tuple[Explain, ...]:
    """What the units' facts add to the findings of others (``Unit.explains``), in registry order."""
    return tuple(unit.explains for unit in UNITS if unit.explains is not None)


def unit_fields() -> tuple[str, ...]:
    """The facts fields the units fill (``Facts.units``): every one present, None when not gathered."""
    fields: list[str] = []
    for unit in UNITS:
        fields += [r.field for r in unit.in_process] + [p.field for p in unit.probes]
        fields += [s.key for s in unit.steps if s.facts_cls is not None]
        fields += [p.field for p in unit.after]
    fields = [f for f in fields if f not in Facts.__dataclass_fields__]
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


def check_framework(path: str) -> str | None:
    """The framework whose unit a check file is (its questions are that framework's), or None."""
    return next((framework_of(unit) for unit in UNITS for c in unit.checks if c.path == path), None)


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
    """Why each question the diagnosis could not look at was not checked, by the id it is named after; a framework
    unit's reasons under ``unchecked_key(framework, id)``, so that TensorFlow's reason for ``memory-config-failed``
    never answers PyTorch's question of that id (``blocking.decide`` looks its question's framework up first)."""
    out: dict[str, str] = {}
    for unit in UNITS:
        if unit.not_checked is not None:
            framework = framework_of(unit)
            out.update({unchecked_key(framework, k): why for k, why in unit.not_checked(facts, settings).items()})
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
