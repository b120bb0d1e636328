"""Facts built by hand for the rules' own tests, as the diagnosis builds them: a unit's fields (a framework's
``framework``, ``libraries``, its steps ...) go in ``Facts.units``, and what each framework says of itself
(``Facts.frameworks``) is derived by the registry, as ``gpucheck.diagnosis`` does before the rules run."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpucheck import registry
from gpucheck.facts import Facts
from gpucheck.settings import Settings

ROOT_FIELDS = frozenset(f.name for f in dataclasses.fields(Facts))


def make_facts(settings: Settings | None = None, **fields: Any) -> Facts:
    """``Facts(**fields)``, with the fields that are not the root's put in ``units``; then the frameworks' views."""
    units = {**dict.fromkeys(registry.unit_fields()), **fields.pop("units", {})}
    units.update({k: fields.pop(k) for k in list(fields) if k not in ROOT_FIELDS})
    return registry.with_views(Facts(**fields, units=units), settings or Settings())


def replace_facts(facts: Facts, settings: Settings | None = None, **fields: Any) -> Facts:
    """``dataclasses.replace`` for facts, a unit's field included; the frameworks' views derived again."""
    units = {**facts.units, **{k: fields.pop(k) for k in list(fields) if k not in ROOT_FIELDS}}
    return registry.with_views(dataclasses.replace(facts, **fields, units=units), settings or Settings())
