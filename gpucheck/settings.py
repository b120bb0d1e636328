"""Settings: one table, one prefix, one order of precedence (no pytest here: rules and the CLI use it).

Every setting ``X`` can be given as the command-line option ``--gpucheck-X``,
the environment variable ``GPUCHECK_X`` or the ini key ``gpucheck_X``
(dashes become underscores), and the first of those that is set wins, in that
order, before the default. A bad value is a :class:`SettingError` that names the
setting and where its value came from; the plugin turns it into a usage error.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The longest a probe may be given (one day): beyond it the runner's waits overflow the platform's limit.
MAX_TIMEOUT_S = 86400.0


class SettingError(ValueError):
    """A bad value for a setting, with the sentence that says so."""


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
    if value > MAX_TIMEOUT_S:
        raise ValueError(f"must be at most {MAX_TIMEOUT_S:g} seconds (one day)")
    return value


FRAMEWORKS = ("tensorflow", "none")


def parse_framework(text: str) -> str:
    if text not in FRAMEWORKS:
        raise ValueError(f"must be one of {', '.join(FRAMEWORKS)}")
    return text


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


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[KMGT]i?B|[KMGT]|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4,
    "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4,
}


def parse_memory(text: str) -> str:
    """An amount of GPU memory: absolute (``2GiB``, ``512MiB``, ``4GB``, bytes) or a share of each GPU's
    total (``10%``). Returned as given (stripped); :func:`memory_bytes` turns it into bytes for a GPU."""
    m = _MEMORY.match(text)
    if not m:
        raise ValueError("must be an amount of memory like 2GiB, 512MiB or a percentage like 10%")
    value, unit = float(m.group(1)), (m.group(2) or "B").upper()
    if unit == "%" and not 0 < value < 100:
        raise ValueError("must be a percentage above 0 and below 100")
    if unit != "%" and value <= 0:
        raise ValueError("must be a positive amount of memory")
    return text.strip()


def memory_bytes(spec: str, total: int) -> int:
    """The bytes ``spec`` (a value :func:`parse_memory` accepted) asks for on a GPU with ``total`` bytes."""
    m = _MEMORY.match(spec)
    if not m:
        raise ValueError(f"not an amount of memory: {spec!r}")
    value, unit = float(m.group(1)), (m.group(2) or "B").upper()
    if unit == "%":
        return int(total * value / 100)
    return int(value * _UNITS[unit])


def parse_gpu_count(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number of GPUs") from None
    if value < 1:
        raise ValueError("must be a number of GPUs of at least 1")
    return value


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
    Option(
        "min-free-memory",
        parse_memory,
        "10%",
        "free memory each GPU must have for the work: absolute (2GiB, 512MiB) or a share of the GPU's "
        "memory (10%); less is gpu-memory-exhausted (default 10%)",
        "AMOUNT",
    ),
    Option(
        "expect-gpus",
        parse_gpu_count,
        None,
        "how many GPUs this machine should show; another count is gpu-count-mismatch",
        "N",
    ),
    Option(
        "framework",
        parse_framework,
        "tensorflow",
        "the framework to diagnose: tensorflow, or none for the GPU stack alone (hardware, kernel, driver, "
        "visibility, resources, health: a node's health without TensorFlow; default tensorflow)",
        "NAME",
    ),
)


@dataclass(frozen=True)
class Settings:
    timeout: float = 60.0
    json: str | None = None
    #: As given (``2GiB``, ``10%``); options.memory_bytes() says how many bytes that is on a GPU.
    min_free_memory: str = "10%"
    expect_gpus: int | None = None
    #: "tensorflow", or "none" for the GPU stack alone (no framework probes: a node's health without TensorFlow).
    framework: str = "tensorflow"
    #: Where each value came from ("--gpucheck-timeout", "GPUCHECK_TIMEOUT", "ini gpucheck_timeout", "default").
    sources: tuple[tuple[str, str], ...] = ()


#: Looks a setting up on the command line (``--gpucheck-X`` dest) or in the ini file (key): None when unset.
Lookup = Callable[[str], Any]


def resolve(
    cli: Lookup, ini: Lookup, environ: Mapping[str, str] | None = None, ini_origin: str = "the ini file"
) -> Settings:
    """The settings from the command line, the environment and the ini file, in that order."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: list[tuple[str, str]] = []
    for opt in OPTIONS:
        raw, origin = _raw(cli, ini, opt, env, ini_origin)
        if raw is None:
            values[opt.dest[len("gpucheck_") :]] = None
            sources.append((opt.name, "default"))
            continue
        try:
            values[opt.dest[len("gpucheck_") :]] = opt.parse(raw)
        except ValueError as exc:
            raise SettingError(f"{opt.flag} {exc} (got {raw!r} from {origin})") from None
        sources.append((opt.name, origin))
    return Settings(**values, sources=tuple(sources))


def _raw(cli: Lookup, ini: Lookup, opt: Option, env: Mapping[str, str], ini_origin: str) -> tuple[str | None, str]:
    value = cli(opt.dest)
    if value is not None:
        return str(value), opt.flag
    if opt.env in env:
        return str(env[opt.env]), f"environment variable {opt.env}"
    value = ini(opt.ini)
    if value not in (None, "", []):
        return str(value), f"ini key {opt.ini} in {ini_origin}"
    if opt.default is not None:
        return opt.default, "default"
    return None, "default"
