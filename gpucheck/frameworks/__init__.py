"""The frameworks gpucheck diagnoses, each a unit of its own: a package here (built in, one line in ``BUILT_IN``),
or a module another distribution names under the entry-point group ``gpucheck.frameworks`` (its ``FRAMEWORK``, a
``gpucheck.unit.Framework``), as pytest finds its plugins under ``pytest11``.

Only names live here (the lowest floor: the settings check --gpucheck-framework against them); the registry
(``gpucheck.registry``) imports a framework's package when a run diagnoses. Entry points are read only for a name
that is not built in, and by the registry.
"""

from __future__ import annotations

import re
from functools import cache

#: The entry-point group of the framework units other distributions add.
GROUP = "gpucheck.frameworks"
#: --gpucheck-framework=none: the GPU stack alone.
NONE = "none"
#: The built-in framework units: name -> package. Adding one is its package, its catalog ids and this line.
BUILT_IN: dict[str, str] = {"tensorflow": "gpucheck.frameworks.tensorflow.units"}
#: A framework's name: what --gpucheck-framework and ``gpu(framework=...)`` take.
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: What a run diagnoses unless told otherwise.
DEFAULT = "tensorflow"


@cache
def available() -> dict[str, str]:
    """Every framework unit: the built-in ones, then those other distributions register (name -> module)."""
    import importlib.metadata  # only here: every probe child of a framework unit imports this package

    out = dict(BUILT_IN)
    for ep in importlib.metadata.entry_points(group=GROUP):
        # A name --gpucheck-framework could not give (``none``, a comma, a space) is no framework's.
        if _NAME.match(ep.name) and ep.name != NONE:
            out.setdefault(ep.name, ep.value)
    return out


def parse(text: str) -> str:
    """A value of --gpucheck-framework: ``none``, or one or more framework names, comma-separated (normalised:
    lower case, no spaces, no repeats). Raises ValueError naming the frameworks there are."""
    names = list(dict.fromkeys(n.strip() for n in text.strip().lower().split(",") if n.strip()))
    if names == [NONE]:
        return NONE
    unknown = [n for n in names if n not in BUILT_IN and n not in available()]
    if not names or unknown or NONE in names:
        choices = ", ".join([*available(), NONE])
        return _refuse(f"must be one of {choices}")
    for name in names:
        if name not in BUILT_IN and (why := unloadable(available()[name])) is not None:
            return _refuse(f"names the framework unit {name!r}, which cannot be loaded ({why})")
    return ",".join(names)


def resolve(module: str) -> object:
    """The object a unit's ``module:attribute`` names (the attribute ``FRAMEWORK`` where none is given), imported now;
    whatever the import raises, it raises (AttributeError where the module has no such attribute)."""
    import importlib

    where, _, attribute = module.partition(":")
    return getattr(importlib.import_module(where), attribute or "FRAMEWORK")


def unloadable(module: str) -> str | None:
    """Why another distribution's unit (``module:attribute``) cannot be imported, or None: asked for by name, it is
    imported now, so that a run never goes on without the framework it was asked to diagnose."""
    try:
        resolve(module)
    except Exception as exc:  # noqa: BLE001 - another distribution's code: any fault is the reason
        return f"{type(exc).__name__}: {exc}"
    return None


def _refuse(message: str) -> str:
    raise ValueError(message)


def asked(value: str) -> tuple[str, ...]:
    """The frameworks a parsed --gpucheck-framework value asks for (none for ``none``)."""
    return () if value == NONE else tuple(value.split(","))
