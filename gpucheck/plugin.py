"""The pytest plugin (registered as ``gpucheck`` by the entry point ``pytest11: pytest_gpucheck``, pytest_gpucheck.py):
options, activation, hooks.

Without ``--gpucheck`` this module only registers options, the ``gpu`` marker and the suite side
(``gpucheck.suite``): it imports nothing heavy and loads no shared library, since it is loaded on every
pytest run of every project where gpucheck is installed.
"""

from __future__ import annotations

import os

import pytest

from gpucheck import suite
from gpucheck.options import add_options, resolve
from gpucheck.settings import conflicts

SESSION_PLUGIN_NAME = suite.SESSION_PLUGIN_NAME
HTML_PLUGIN_NAME = "gpucheck-html"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before the project's conftests: an xdist worker reads whether a framework initialised CUDA before gpucheck did
    # anything in it (gpucheck.suite.read_early_cuda; nothing is read elsewhere).
    suite.read_early_cuda(early_config)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # trylast: the project's conftests and other plugins register their markers first (gpucheck.suite.ownership).
    suite.register(config)
    if not config.getoption("gpucheck", default=False):
        return
    worker = hasattr(config, "workerinput")
    controller = not worker and config.getoption("dist", default="no") not in ("no", None)
    settings = resolve(config)
    if (worker or controller) and settings.benchmarks:
        # pytest-benchmark disables itself under xdist: the benchmarks would silently not run.
        raise pytest.UsageError(
            "--gpucheck-benchmarks runs its benchmarks in one process: drop -n / --dist (pytest-xdist) for this run"
        )
    _refuse_one_path_for_two_files(config, settings.json)
    if not worker:
        for note in conflicts(settings):
            config.issue_config_time_warning(pytest.PytestConfigWarning(f"gpucheck: {note}"), stacklevel=2)
    # Imported only now: the diagnosis machinery (still no TensorFlow, NVML or ctypes in this process).
    from gpucheck.session import GpucheckSession

    session = GpucheckSession(config, settings, role="worker" if worker else "controller" if controller else "plain")
    config.pluginmanager.register(session, SESSION_PLUGIN_NAME)
    if config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", default=None):
        from gpucheck import htmlreport  # pytest-html's report (--html): optional, docs/html-report.md

        htmlreport.register(config, session, HTML_PLUGIN_NAME)
    if worker:
        # An xdist worker judges the facts of the run's one diagnosis, which the controller writes.
        from gpucheck.shared import Remote, SharedRun

        session.start(Remote(SharedRun(config.workerinput[suite.WORKERINPUT_KEY]), settings))  # type: ignore[attr-defined]
    else:
        session.start()
    if controller:
        plugin = config.pluginmanager.get_plugin(suite.PLUGIN_NAME)
        assert isinstance(plugin, suite.SuitePlugin)
        session.publish_to(plugin.run_folder())


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
    suite.unregister(config)
