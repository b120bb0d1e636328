"""pytest-gpucheck's two entry points: the pytest plugin (``pytest11: pytest_gpucheck``) and the ``gpucheck`` command.

The unrelated PyPI package ``gpucheck`` (a pytest plugin for GPU kernels) installs the same import package,
``gpucheck/``, with a pytest11 entry point named ``gpucheck`` too. Installed in one folder, whichever comes second
overwrites ``gpucheck/__init__.py`` and ``gpucheck/plugin.py`` of the other, and uninstalling either one deletes those
two files from under the other (docs/troubleshooting.md). So the entry points live here, in a module of a name of its
own outside ``gpucheck/``, which is still there in each of those states: before loading ``gpucheck.plugin`` or
``gpucheck.cli`` they check that ``gpucheck`` is pytest-gpucheck's, and when it is not, a ``--gpucheck`` run and the
``gpucheck`` command stop with one sentence that says what happened and the fix, and any other pytest run goes on
with that sentence as a warning.

The entry point's name is ``pytest_gpucheck``, not ``gpucheck``: pluggy loads one entry point per name, so under a
shared name either package's plugin could be the one loaded. ``-p no:gpucheck`` still turns the plugin off (pytest
blocks ``pytest_gpucheck`` with ``gpucheck``); with plugin autoloading off, ``-p pytest_gpucheck`` turns it on. The
plugin itself, ``gpucheck.plugin``, is registered under the name ``gpucheck`` as before.

Standard library only at import (it is loaded on every pytest run, and it starts the command): pytest is imported
in the hooks, once pytest runs.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

#: The files that both distributions install in ``gpucheck/`` (the intersection of the two wheels' RECORDs).
SHARED_FILES = ("__init__.py", "plugin.py")
OTHER = "the PyPI package `gpucheck`{version} (an unrelated pytest plugin for GPU kernels)"
FIX = "run `pip uninstall -y gpucheck pytest-gpucheck && pip install pytest-gpucheck`"


@functools.cache
def clash() -> str | None:
    """Why ``gpucheck`` here is not pytest-gpucheck's, in one sentence with the fix; None when it is."""
    here = os.path.dirname(os.path.abspath(__file__))  # site-packages, or the source tree of an editable install
    ours = os.path.join(here, "gpucheck")
    other = _other_distribution(here)
    if other is not None:
        return (
            f"gpucheck: {OTHER.format(version=f' {other}')} is installed in {here} beside pytest-gpucheck and "
            f"installs the same import package: the one installed second overwrote the other's "
            f"{' and '.join(SHARED_FILES)} in {ours}, and the two cannot share an environment; {FIX}"
        )
    missing = [name for name in SHARED_FILES if not os.path.isfile(os.path.join(ours, name))]
    if missing:
        return (
            f"gpucheck: pytest-gpucheck is installed but its {' and '.join(missing)} in {ours} are gone, as after "
            f"`pip uninstall gpucheck` of {OTHER.format(version='')}, which installs the same files: {FIX}"
        )
    try:
        spec = importlib.util.find_spec("gpucheck")
    except (ImportError, ValueError):
        spec = None
    found = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
    if found is None or _same(found, ours) or os.path.isfile(os.path.join(os.path.dirname(found), "pytest_gpucheck.py")):
        # Ours, or another copy of pytest-gpucheck (a source checkout ahead of the installed one on sys.path).
        return None
    other = _other_distribution(os.path.dirname(found))
    if other is not None:
        return (
            f"gpucheck: `import gpucheck` finds {found}, installed by {OTHER.format(version=f' {other}')}, instead "
            f"of pytest-gpucheck's {ours}: run `pip uninstall -y gpucheck` (pytest-gpucheck's own files are untouched)"
        )
    return (
        f"gpucheck: `import gpucheck` finds {found}, a package that is not pytest-gpucheck's ({ours}), so "
        "pytest-gpucheck stays off: take that folder off sys.path (PYTHONPATH, or `python -m pytest` run from its parent)"
    )


def _other_distribution(folder: str) -> str | None:
    """The version of a distribution named ``gpucheck`` installed in ``folder`` that has files in ``gpucheck/``."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for name in names:
        lower = name.lower()
        if not lower.startswith("gpucheck-") or not lower.endswith((".dist-info", ".egg-info")):
            continue
        version = name[len("gpucheck-") :].rsplit(".", 1)[0].split("-")[0]
        try:
            with open(os.path.join(folder, name, "RECORD"), encoding="utf-8") as record:
                owns = any(line.startswith("gpucheck/") for line in record)
        except OSError:
            owns = True  # an egg-info, or a RECORD gone: its files are not listed, so take it as sharing ours
        if owns:
            return version
    return None


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """The ``gpucheck`` command: gpucheck.cli, once ``gpucheck`` is pytest-gpucheck's (else one sentence, exit 2)."""
    sentence = clash()
    if sentence is not None:
        sys.stderr.write(sentence + "\n")
        return 2
    from gpucheck.cli import main as run

    return run(argv)


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """Once this module is registered, gpucheck's plugin beside it, when ``gpucheck`` is pytest-gpucheck's: under the
    name ``gpucheck``, the entry point's name before, which it keeps for ``get_plugin`` and ``-p no:gpucheck``, and
    which an entry point of an older pytest-gpucheck's metadata still in view (a source tree's stale egg-info) then
    skips instead of registering the same module a second time."""
    if plugin is not sys.modules[__name__] or clash() is not None:
        return
    _not_rewritten(manager)
    if manager.has_plugin("gpucheck"):
        return
    from gpucheck import plugin as gpucheck_plugin

    if not manager.is_registered(gpucheck_plugin):
        manager.register(gpucheck_plugin, "gpucheck")


def _not_rewritten(manager: object) -> None:
    """Leave gpucheck's own modules to Python's bytecode, out of pytest's assertion rewriting. pytest marks every module
    of a plugin's distribution for rewriting, and where it cannot cache what it rewrote (``PYTHONDONTWRITEBYTECODE``, which
    many container images set, or a site-packages the user cannot write) it parses, rewrites and compiles each of the
    hundred modules a ``pytest --gpucheck`` imports again at every start: 0.28 s of a 0.76 s run on this project's build
    machine (docs/measured.md). They hold no test code (the checks files call ``gpucheck_answer.check()`` and assert
    nothing). Only where ``gpucheck`` is pytest-gpucheck's (never another package's of that name). Read through
    pytest's private ``_must_rewrite``, checked, so that a pytest without it changes nothing."""
    hook = getattr(manager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set) and "gpucheck" in marked:
        marked.discard("gpucheck")
        cache = getattr(hook, "_marked_for_rewrite_cache", None)
        if isinstance(cache, dict):
            cache.clear()


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """A run that asks for gpucheck (any ``--gpucheck`` option) stops here: a usage error, before its options are
    parsed (they may be nobody's, or the other package's plugin may have registered ours)."""
    sentence = clash()
    if sentence is not None and any(a == "--gpucheck" or a.startswith(("--gpucheck-", "--gpucheck=")) for a in args):
        import pytest

        raise pytest.UsageError(sentence)


def pytest_configure(config: pytest.Config) -> None:
    """Any other run goes on, with the sentence as a warning (once: not again in each pytest-xdist worker); where
    warnings are errors (``-W error``, ``filterwarnings = error``), a usage error rather than pytest's traceback."""
    sentence = clash()
    if sentence is not None and not hasattr(config, "workerinput"):
        import pytest

        try:
            config.issue_config_time_warning(pytest.PytestConfigWarning(sentence), stacklevel=2)
        except pytest.PytestConfigWarning:
            raise pytest.UsageError(sentence) from None
