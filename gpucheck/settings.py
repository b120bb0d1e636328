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
from dataclasses import dataclass, field
from typing import Any

from gpucheck.reportfile import parse_report_path

#: The longest a probe may be given (one day): beyond it the runner's waits overflow the platform's limit.
MAX_TIMEOUT_S = 86400.0


#: The largest absolute memory amount accepted (1 PiB): far above any GPU, far below float overflow.
MAX_MEMORY_BYTES = 1 << 50


class SettingError(ValueError):
    """A bad value for a setting, with the sentence that says so."""


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[str], Any]
    default: str | None
    help: str
    metavar: str = "VALUE"
    #: A switch: ``--gpucheck-X`` alone on the command line, a yes/no value in the environment or ini file.
    switch: bool = False
    #: An option whose value may be left out: ``--gpucheck-X`` alone means this value (``--gpucheck-cluster``).
    const: str | None = None
    #: A setting of a pytest run of the user's own suite (the ``gpu`` marker, xdist workers): not doctor's.
    pytest_only: bool = False
    #: Where the default depends on the machine (the installed frameworks): the value a run that leaves the setting
    #: alone gets, asked when the settings are resolved (``default`` is then what ``Settings()`` itself holds).
    default_of: Callable[[], str] | None = None

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

    def arguments(self, text: str) -> dict[str, Any]:
        """How a command line takes it: the keywords of argparse's ``add_argument`` and pytest's ``addoption``
        after the flag (``--gpucheck-X`` for pytest, ``--X`` for ``gpucheck doctor``), with ``text`` as its help."""
        # argparse %-formats help texts: a literal "10%" must reach it as "10%%".
        keywords: dict[str, Any] = {"dest": self.dest, "default": None, "help": text.replace("%", "%%")}
        if self.const is not None:
            return {**keywords, "nargs": "?", "const": self.const, "metavar": self.metavar}
        if self.switch:
            return {**keywords, "action": "store_const", "const": "true"}
        return {**keywords, "metavar": self.metavar}


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


_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off", "")


def parse_switch(text: str) -> bool:
    value = text.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise ValueError("must be one of 1, true, yes, on or 0, false, no, off")


def deep_from_env() -> bool:
    """--gpucheck-deep, as the parent hands it down to its probe children (``DEEP_ENV``)."""
    from gpucheck.protocol import DEEP_ENV

    try:
        return parse_switch(os.environ.get(DEEP_ENV, ""))
    except ValueError:
        return False


#: What a run diagnoses unless told otherwise (``gpucheck.frameworks.DEFAULT``, which a test holds equal).
DEFAULT_FRAMEWORK = "tensorflow"


def parse_framework(text: str) -> str:
    """``none``, ``all``, or one or more frameworks' names (``gpucheck.frameworks.parse``). The default and ``none``
    need no registry: a run that leaves the option alone (every run of a suite that does not use gpucheck) loads none."""
    value = text.strip().lower()
    if value in (DEFAULT_FRAMEWORK, "none"):
        return value
    from gpucheck import frameworks

    return frameworks.parse(text)


def installed_frameworks() -> str:
    """The default of --gpucheck-framework: the built-in frameworks installed here, found without importing them
    (``gpucheck.frameworks.default``); tensorflow where none is."""
    from gpucheck import frameworks

    return frameworks.default()


def parse_json_path(text: str) -> str:
    """The report's path (:func:`parse_report_path`); a yes/no word is refused: ``gpucheck_json = true`` in an
    ini file (pytest hands TOML's ``true`` over as the text "True") would otherwise make a file named True."""
    if text.strip().lower() in (*_YES, *_NO) and text.strip():
        raise ValueError(f"must be a path for the report, not a yes/no value (write ./{text.strip()} for a file of that name)")
    return parse_report_path(text)


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
    if unit != "%" and (not math.isfinite(value) or value * _UNITS[unit] > MAX_MEMORY_BYTES):
        raise ValueError("must be at most 1 PiB")
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


def parse_share(text: str) -> float:
    """A share of an expected figure: ``50%`` or ``0.5``, above 0 and at most 1."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError("must be a share like 50% or 0.5") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise ValueError("must be a share above 0 and at most 100%")
    return value


def parse_absolute_memory(text: str) -> str:
    """An absolute amount of memory (:func:`parse_memory` without the percentage: a worker's bound is given
    to TensorFlow in megabytes before it has seen a GPU)."""
    value = parse_memory(text)
    if value.endswith("%"):
        raise ValueError("must be an absolute amount of memory like 4GiB or 512MiB, not a percentage")
    return value


def parse_gpu_count(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number of GPUs") from None
    if value < 1:
        raise ValueError("must be a number of GPUs of at least 1")
    return value


#: The most tasks ``--gpucheck-cluster=local:N`` starts (each a TensorFlow process on this machine).
MAX_LOCAL_WORKERS = 8
#: ``local:N`` or ``local:N+ps``.
LOCAL_CLUSTER = re.compile(r"^local:(\d+)(\+ps)?$")


def parse_cluster(text: str) -> str | None:
    """The ``--gpucheck-cluster`` value: ``auto`` (the option alone, or yes/true/1/on: TF_CONFIG, else the
    Slurm step), ``tf_config``, ``slurm``, ``local:N`` / ``local:N+ps`` (N workers, and a chief and a ps,
    on this machine's loopback), or a TF_CONFIG JSON document; None for no/false/0/off."""
    t = text.strip()
    low = t.lower()
    if low in _NO:
        return None
    if low in (*_YES, "auto"):
        return "auto"
    if low in ("tf_config", "slurm"):
        return low
    m = LOCAL_CLUSTER.match(low)
    if m:
        if not 1 <= int(m.group(1)) <= MAX_LOCAL_WORKERS:
            raise ValueError(f"local:N must start 1 to {MAX_LOCAL_WORKERS} workers")
        return low
    if t.startswith("{"):
        return t
    raise ValueError(
        "must be auto, tf_config, slurm, local:N or local:N+ps (N workers on this machine's loopback), "
        "or a TF_CONFIG JSON document"
    )


OPTIONS: tuple[Option, ...] = (
    Option(
        "timeout",
        parse_seconds,
        "60",
        "seconds a probe child process (driver calls, TensorFlow) may take before it is killed "
        "and reported as hung (default 60)",
        "SECONDS",
    ),
    Option("json", parse_json_path, None, "write the report JSON (schema gpucheck-report/1) to PATH", "PATH"),
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
        "expect-nvlink",
        parse_switch,
        None,
        "the GPUs are meant to be linked by NVLink: a bridge-capable PCIe card (H100 NVL, A100 PCIe ...) with no "
        "active link is nvlink-degraded (NVML shows an unbridged card and a bridged one whose links did not come up "
        "alike, so without this it is not reported)",
        switch=True,
    ),
    Option(
        "framework",
        parse_framework,
        DEFAULT_FRAMEWORK,
        "the frameworks to diagnose: tensorflow, torch (or another registered framework unit), several "
        "comma-separated, all (every installed framework), or none for the GPU stack alone (hardware, kernel, "
        "driver, visibility, resources, health: a node's health without a framework); default: the frameworks "
        "installed here, found without importing them (tensorflow where none is)",
        "NAME",
        default_of=installed_frameworks,
    ),
    Option(
        "deep",
        parse_switch,
        None,
        "also try what the environment does not use and costs a TensorFlow process more "
        "(TF_GPU_ALLOCATOR=cuda_malloc_async), and without a GPU run the numerics and XLA steps on the CPU",
        switch=True,
    ),
    Option(
        "benchmarks",
        parse_switch,
        None,
        "also measure how well TensorFlow uses each device (the performance layer): matmul by dtype, matpow, "
        "copy bandwidth, cuDNN convolution, launch latency, all-reduce and multi-device scaling, as "
        "pytest-benchmark benchmarks (--benchmark-json and --benchmark-save keep them)",
        switch=True,
    ),
    Option(
        "min-share",
        parse_share,
        "50%",
        "the share of a GPU model's expected figure (TFLOP/s, GB/s) a benchmark must reach; less is "
        "gpu-underperforming (default 50%)",
        "SHARE",
    ),
    Option(
        "min-scaling",
        parse_share,
        "60%",
        "the efficiency multi-GPU training must keep (speed-up over one GPU / GPU count); less is "
        "scaling-inefficient (default 60%)",
        "SHARE",
    ),
    Option(
        "cluster",
        parse_cluster,
        None,
        "also check the multi-worker cluster this task belongs to (the cluster layer): TF_CONFIG, or the Slurm "
        "step, or SPEC (local:N[+ps]: N workers and a ps on this machine's loopback; tf_config; slurm; a "
        "TF_CONFIG JSON document; write it --gpucheck-cluster=SPEC): its configuration, its peers reached, and a "
        "real all-reduce over gRPC (or the ps/worker smoke test). A set TF_CONFIG is validated on every run",
        "SPEC",
        const="auto",
    ),
    Option(
        "require",
        parse_switch,
        None,
        "fail, instead of skipping, a test marked @pytest.mark.gpu that this machine cannot run (a GPU runner "
        "sets it once: its suite must not go green on the CPU)",
        switch=True,
        pytest_only=True,
    ),
    Option(
        "gpus-per-worker",
        parse_gpu_count,
        None,
        "give each pytest-xdist worker N GPUs of its own, through CUDA_VISIBLE_DEVICES in its environment "
        "before it starts (workers share them round-robin when there are too few)",
        "N",
        pytest_only=True,
    ),
    Option(
        "worker-memory",
        parse_absolute_memory,
        None,
        "the GPU memory a framework may take on each GPU in each test process (each xdist worker), given when a test "
        "first asks for its fixture: TensorFlow's memory_limit (a logical device, before it sets up its GPUs) at "
        "tf_gpu_device, PyTorch's set_per_process_memory_fraction at torch_device",
        "AMOUNT",
        pytest_only=True,
    ),
    Option(
        "cluster-timeout",
        parse_seconds,
        "60",
        "seconds every peer of the cluster has to come up (each node starts its check when it starts) and the "
        "collective to finish; a task that answers but never joins is stopped 30 s after it, TensorFlow's "
        "import and set-up (default 60)",
        "SECONDS",
    ),
)


def default(name: str) -> Any:
    """The default of the option ``name``, parsed: the one place a default is written is ``OPTIONS``."""
    opt = next(o for o in OPTIONS if o.name == name)
    return opt.parse(opt.default) if opt.default is not None else (False if opt.switch else None)


def _default(name: str) -> Any:
    return field(default=default(name))


@dataclass(frozen=True)
class Settings:
    timeout: float = _default("timeout")
    json: str | None = _default("json")
    #: As given (``2GiB``, ``10%``); memory_bytes() says how many bytes that is on a GPU.
    min_free_memory: str = _default("min-free-memory")
    expect_gpus: int | None = _default("expect-gpus")
    #: --gpucheck-expect-nvlink: bridge-capable cards must have their bridged links active.
    expect_nvlink: bool = _default("expect-nvlink")
    #: --gpucheck-framework as parsed: "tensorflow", several comma-separated, or "none" for the GPU stack alone (no
    #: framework probes: a node's health without a framework). ``frameworks`` lists them.
    framework: str = _default("framework")
    #: --gpucheck-deep: the slower, deeper probes too.
    deep: bool = _default("deep")
    #: --gpucheck-benchmarks: the performance layer's benchmarks too.
    benchmarks: bool = _default("benchmarks")
    #: The share of an expected figure a GPU must reach, and the multi-GPU scaling efficiency it must keep.
    min_share: float = _default("min-share")
    min_scaling: float = _default("min-scaling")
    #: --gpucheck-cluster (``parse_cluster``): None when not asked.
    cluster: str | None = _default("cluster")
    cluster_timeout: float = _default("cluster-timeout")
    #: --gpucheck-require: a gpu-marked test this machine cannot run fails instead of being skipped.
    require: bool = _default("require")
    #: --gpucheck-gpus-per-worker: the GPUs each xdist worker gets (None: every worker sees them all).
    gpus_per_worker: int | None = _default("gpus-per-worker")
    #: --gpucheck-worker-memory: TensorFlow's per-GPU bound in each test process (absolute, as given).
    worker_memory: str | None = _default("worker-memory")
    #: Whether TF_CONFIG is set in the environment: its configuration is validated even without --gpucheck-cluster.
    cluster_env_set: bool = False
    #: Where each value came from ("--gpucheck-timeout", "GPUCHECK_TIMEOUT", "ini gpucheck_timeout", "default").
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks this run diagnoses, by name (none with --gpucheck-framework=none)."""
        from gpucheck import frameworks

        return frameworks.asked(self.framework)


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
            sources.append((opt.name, "default"))  # the Settings field's own default
            continue
        try:
            values[opt.dest[len("gpucheck_") :]] = opt.parse(raw)
        except ValueError as exc:
            raise SettingError(f"{opt.flag} {exc} (got {raw!r} from {origin})") from None
        sources.append((opt.name, origin))
    return Settings(**values, cluster_env_set="TF_CONFIG" in env, sources=tuple(sources))


def conflicts(settings: Settings) -> list[str]:
    """Settings that cancel each other, each a sentence: the run goes on, without what cannot be done."""
    notes = []
    if settings.benchmarks and not settings.frameworks:
        notes.append(
            "--gpucheck-benchmarks is ignored with --gpucheck-framework=none: the benchmarks run in TensorFlow, "
            "and this run starts none (the performance layer reads 'not checked')"
        )
    return notes


def _raw(cli: Lookup, ini: Lookup, opt: Option, env: Mapping[str, str], ini_origin: str) -> tuple[str | None, str]:
    value = cli(opt.dest)
    if value is not None:
        return str(value), opt.flag
    if opt.env in env:
        return str(env[opt.env]), f"environment variable {opt.env}"
    value = ini(opt.ini)
    if isinstance(value, list) and value:
        # A TOML array, or several lines in an ini file: one value is expected.
        raise SettingError(f"{opt.flag} takes one value, not a list (got {value!r} from ini key {opt.ini} in {ini_origin})")
    if value not in (None, "", []):
        return str(value), f"ini key {opt.ini} in {ini_origin}"
    if opt.default_of is not None:
        return opt.default_of(), "default"
    if opt.default is not None:
        return opt.default, "default"
    return None, "default"
