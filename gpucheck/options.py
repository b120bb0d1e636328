"""Settings: one table, one prefix, one order of precedence.

Every setting ``X`` can be given as the command-line option ``--gpucheck-X``,
the environment variable ``GPUCHECK_X`` or the ini key ``gpucheck_X``
(dashes become underscores), and the first of those that is set wins, in that
order, before the default. A bad value is a usage error that names the
setting and where its value came from.

This module is imported by the plugin at start-up: standard library and pytest only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[str], Any]
    default: str | None
    help: str
    metavar: str = "VALUE"

    @property
    def flag(self) -> str:
        return f"--gpucheck-{self.name}"

    @property
    def dest(self) -> str:
        return "gpucheck_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "GPUCHECK_" + self.name.replace("-", "_").upper()

    @property
    def ini(self) -> str:
        return self.dest


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("must be a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a positive number of seconds")
    return value


def parse_report_path(text: str) -> str:
    """A path the report can be written to: its nearest existing ancestor is a writable directory."""
    if not text.strip():
        raise ValueError("must be a file path")
    path = os.path.abspath(text)
    if os.path.isdir(path):
        raise ValueError(f"cannot write the report to {text}: it is a directory")
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"cannot write the report to {text}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the report to {text}: {parent} is not writable")
    return text


OPTIONS: tuple[Option, ...] = (
    Option(
        "timeout",
        parse_seconds,
        "60",
        "seconds a probe child process (driver calls, TensorFlow) may take before it is killed "
        "and reported as hung (default 60)",
        "SECONDS",
    ),
    Option("json", parse_report_path, None, "write the report JSON (schema gpucheck-report/1) to PATH", "PATH"),
)


@dataclass(frozen=True)
class Settings:
    timeout: float = 60.0
    json: str | None = None
    #: Where each value came from ("--gpucheck-timeout", "GPUCHECK_TIMEOUT", "ini gpucheck_timeout", "default").
    sources: tuple[tuple[str, str], ...] = ()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpucheck", "gpucheck: does TensorFlow get GPU acceleration here?")
    group.addoption(
        "--gpucheck",
        action="store_true",
        default=False,
        help="run gpucheck's diagnostic suite (alone when no path is given, else beside the given tests)",
    )
    for opt in OPTIONS:
        group.addoption(opt.flag, dest=opt.dest, default=None, metavar=opt.metavar, help=f"{opt.help}. Also {opt.env} / ini {opt.ini}.")
        parser.addini(opt.ini, f"gpucheck: {opt.help}", default=None)


def resolve(config: pytest.Config, environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: list[tuple[str, str]] = []
    for opt in OPTIONS:
        raw, origin = _raw(config, opt, env)
        if raw is None:
            values[opt.dest[len("gpucheck_") :]] = None
            sources.append((opt.name, "default"))
            continue
        try:
            values[opt.dest[len("gpucheck_") :]] = opt.parse(raw)
        except ValueError as exc:
            raise pytest.UsageError(f"{opt.flag} {exc} (got {raw!r} from {origin})") from None
        sources.append((opt.name, origin))
    return Settings(**values, sources=tuple(sources))


def _raw(config: pytest.Config, opt: Option, env: Any) -> tuple[str | None, str]:
    cli = config.getoption(opt.dest, default=None)
    if cli is not None:
        return str(cli), opt.flag
    if opt.env in env:
        return str(env[opt.env]), f"environment variable {opt.env}"
    ini = config.getini(opt.ini)
    if ini not in (None, "", []):
        return str(ini), f"ini key {opt.ini} in {config.inipath or 'the ini file'}"
    if opt.default is not None:
        return opt.default, "default"
    return None, "default"
