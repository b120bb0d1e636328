"""The plugin's options: the settings table (``gpucheck.settings``) registered with pytest's parser,
and resolved from a ``pytest.Config``. Imported by the plugin at start-up: standard library and pytest only.
"""

from __future__ import annotations

import os

import pytest

from gpucheck.settings import OPTIONS, SettingError, Settings
from gpucheck.settings import resolve as resolve_settings


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpucheck", "gpucheck: does TensorFlow get GPU acceleration here?")
    group.addoption(
        "--gpucheck",
        action="store_true",
        default=False,
        help="run gpucheck's diagnostic suite (alone when no path is given, else beside the given tests)",
    )
    for opt in OPTIONS:
        group.addoption(opt.flag, **opt.arguments(f"{opt.help}. Also {opt.env} / ini {opt.ini}."))
        parser.addini(opt.ini, f"gpucheck: {opt.help}", default=None)
    parser.addini(
        "gpucheck_marker",
        "gpucheck: the marker gpucheck decides (any name; 'none': no marker). Not set: gpu, unless the project "
        "registers a gpu marker of its own (docs/own-suites.md)",
        default=None,
    )


def resolve(config: pytest.Config, environ: dict[str, str] | None = None) -> Settings:
    """The settings of this run; a bad value is a usage error (exit code 4) naming the option."""
    try:
        return resolve_settings(
            lambda dest: config.getoption(dest, default=None),
            config.getini,
            os.environ if environ is None else environ,
            str(config.inipath or "the ini file"),
        )
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
