"""The pytest plugin (entry point ``pytest11: gpucheck``): options, activation, hooks.

Without ``--gpucheck`` this module only registers options and markers: it
imports nothing heavy and loads no shared library, since it is loaded on every
pytest run of every project where gpucheck is installed.
"""

from __future__ import annotations

import os

import pytest

from gpucheck.options import add_options, resolve
from gpucheck.settings import conflicts

SESSION_PLUGIN_NAME = "gpucheck-session"
HTML_PLUGIN_NAME = "gpucheck-html"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("gpucheck", default=False):
        return
    if config.getoption("dist", default="no") not in ("no", None) or hasattr(config, "workerinput"):
        # Each xdist worker would run its own diagnosis and the controller, which runs no check, would
        # write the report: refuse with a sentence. The probes already run in parallel.
        raise pytest.UsageError(
            "--gpucheck runs its checks in one process: drop -n / --dist (pytest-xdist) for this run; "
            "its probes already run in parallel"
        )
    settings = resolve(config)
    _refuse_one_path_for_two_files(config, settings.json)
    for note in conflicts(settings):
        config.issue_config_time_warning(pytest.PytestConfigWarning(f"gpucheck: {note}"), stacklevel=2)
    # Imported only now: the diagnosis machinery (still no TensorFlow, NVML or ctypes in this process).
    from gpucheck.session import GpucheckSession

    session = GpucheckSession(config, settings)
    config.pluginmanager.register(session, SESSION_PLUGIN_NAME)
    if config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", default=None):
        from gpucheck import htmlreport  # pytest-html's report (--html): optional, docs/html-report.md

        htmlreport.register(config, session, HTML_PLUGIN_NAME)
    session.start()


def _refuse_one_path_for_two_files(config: pytest.Config, report: str | None) -> None:
    """``--junitxml`` and ``--gpucheck-json`` on one path: each would overwrite the other, silently."""
    xml = config.getoption("xmlpath", default=None)
    if report is None or not xml or report == "-":
        return
    a, b = os.path.realpath(os.path.expanduser(str(xml))), os.path.realpath(os.path.expanduser(report))
    if a == b:
        raise pytest.UsageError(
            f"--junitxml and --gpucheck-json name the same file ({report}): each would overwrite the other; give two paths"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.pluginmanager.get_plugin(SESSION_PLUGIN_NAME)
    if session is not None:
        session.close()
        config.pluginmanager.unregister(session, SESSION_PLUGIN_NAME)
    if config.pluginmanager.get_plugin(HTML_PLUGIN_NAME) is not None:
        config.pluginmanager.unregister(name=HTML_PLUGIN_NAME)
