"""The frameworks gpucheck diagnoses, each a unit of its own: a package here (built in, one line in ``BUILT_IN``),
or a module another distribution names under the entry-point group ``gpucheck.frameworks`` (its ``FRAMEWORK``, a
``gpucheck.unit.Framework``), as pytest finds its plugins under ``pytest11``.

Only names live here (the lowest floor: the settings check --gpucheck-framework against them); the registry
(``gpucheck.registry``) imports a framework's package when a run diagnoses. Entry points are read only for a name
that is not built in, and by the registry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

#: The entry-point group of the framework units other distributions add.
GROUP = "gpucheck.frameworks"
#: --gpucheck-framework=none: the GPU stack alone.
NONE = "none"
#: --gpucheck-framework=all: every installed framework.
ALL = "all"
#: The built-in framework units: name -> package. Adding one is its package, its catalog ids and this line.
BUILT_IN: dict[str, str] = {
    "tensorflow": "gpucheck.frameworks.tensorflow.units",
    "torch": "gpucheck.frameworks.torch.units",
}
#: The module a program imports to use each built-in framework (its ``Framework.module``, which a test holds equal):
#: whether it is installed is asked of ``importlib.util.find_spec``, without importing it or its unit.
MODULES: dict[str, str] = {"tensorflow": "tensorflow", "torch": "torch"}
#: Where a built-in framework says whether it has initialised CUDA in this process: its name -> (the module that
#: answers, the function), asked only where that module is already imported (``cuda_initialised``).
CUDA_INITIALISED: dict[str, tuple[str, str]] = {"torch": ("torch.cuda", "is_initialized")}
#: A framework's name: what --gpucheck-framework and ``gpu(framework=...)`` take.
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: What a run diagnoses where no framework is installed (so that it says framework-missing with the pip command).
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


def installed_module(module: str) -> bool:
    """Whether ``module`` can be imported here, asked of the import system without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails, a module whose __spec__ is None
        return False


def installed() -> tuple[str, ...]:
    """The built-in frameworks installed here (their module is found; nothing is imported)."""
    return tuple(name for name, module in MODULES.items() if installed_module(module))


def cuda_initialised(modules: Mapping[str, object]) -> tuple[str, ...]:
    """The built-in frameworks that have initialised CUDA in this process (PyTorch: ``torch.cuda.is_initialized()``),
    read from ``modules`` (``sys.modules``): a framework not imported has not, and nothing is imported to ask. An answer
    that is not True (a module of another shape, a call that raises) counts as not initialised."""
    out = []
    for name, (module, function) in CUDA_INITIALISED.items():
        loaded = modules.get(module)
        if loaded is None:
            continue
        try:
            initialised = getattr(loaded, function)() is True
        except Exception:  # noqa: BLE001 - the framework's own code, of any version: no answer is no
            initialised = False
        if initialised:
            out.append(name)
    return tuple(out)


def default() -> str:
    """What a run diagnoses unless told otherwise: the built-in frameworks installed here, else ``DEFAULT``."""
    return ",".join(installed()) or DEFAULT


def _all() -> list[str]:
    """--gpucheck-framework=all: every framework unit whose module is installed (another distribution's unit is
    loaded to ask for its module); where none is, every framework unit, each then saying it is missing."""
    names = list(available())
    found = [n for n in names if installed_module(MODULES[n] if n in MODULES else _module_of(available()[n]))]
    return found or names


def _module_of(unit: str) -> str:
    """The module another distribution's framework unit (``module:attribute``) says a program imports ("" where it
    cannot be loaded: that unit is then not installed)."""
    try:
        module = getattr(resolve(unit), "module", "")
    except Exception:  # noqa: BLE001 - another distribution's code: any fault means it cannot be asked
        return ""
    return module if isinstance(module, str) and module else ""


def parse(text: str) -> str:
    """A value of --gpucheck-framework: ``none``, ``all`` (every installed framework), or one or more framework names,
    comma-separated (normalised: lower case, no spaces, no repeats). Raises ValueError naming the frameworks there
    are."""
    names = list(dict.fromkeys(n.strip() for n in text.strip().lower().split(",") if n.strip()))
    if names == [NONE]:
        return NONE
    if names == [ALL]:
        names = _all()
    unknown = [n for n in names if n not in BUILT_IN and n not in available()]
    if not names or unknown or NONE in names or ALL in names:
        choices = ", ".join([*available(), ALL, NONE])
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
