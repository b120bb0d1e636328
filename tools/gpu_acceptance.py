#!/usr/bin/env python3
"""The real-GPU acceptance run (issue 38): everything gpucheck says about this machine, in one folder.

Run it as ``bash tools/gpu-acceptance.sh [OPTIONS] FOLDER`` (docs/measured.md, "The real-GPU command"). It
installs gpucheck (a fresh venv with TensorFlow's CUDA wheels; ``--wheels DIR`` offline from a folder;
``--no-install`` into the interpreter that runs it), then runs ``pytest --gpucheck`` (JSON, JUnit), the same
with ``--gpucheck-framework=none``, ``gpucheck doctor --framework=none --json --prometheus``, ``gpucheck
explain`` on the TensorFlow probe's own log, the sample project's ``gpu``-marked tests under ``-n 2``, a short
benchmark plan, and collects ``nvidia-smi -q``, ``nvidia-smi topo -m``, the kernel log's NVRM/Xid lines, the
libraries a framework process loads, the package versions and every step's time.

Every step is a child process in a process group of its own, with its own time limit (and the run's budget:
a step gets no more than what is left), killed with its group when it runs over (SIGTERM, then SIGKILL 5 s
later); a failing step never stops the next. Each step's exit status, wall time, stdout and stderr are
kept; ``summary.json`` (schema ``gpucheck-acceptance/1``) and ``steps.tsv`` are rewritten after every step,
so a run cut short still says how far it got. The folder is flat (one level, names of letters, digits,
``.``, ``_``, ``-``); ``--archive FILE.tgz`` packs it into one file.

Standard library only, Python 3.10 or newer (it runs before anything is installed). Exit status: 0 every
step ran (whatever the machine's answers), 1 a step was cut by the budget or a file is missing, 2 a usage
error or an interrupted run.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlparse

SCHEMA = "gpucheck-acceptance/1"
REPO = Path(__file__).resolve().parent.parent
#: The whole run's default budget: under 8 minutes on a GPU machine with a fresh install.
DEFAULT_BUDGET_S = 460.0
#: Kept back from the budget for the last collection steps (nvidia-smi after, the kernel log).
RESERVE_S = 15.0
#: A step's stdout or stderr beyond this keeps its head and its tail (the archive must stay small).
MAX_FILE_BYTES = 2 * 1024 * 1024
HEAD_BYTES = 512 * 1024
#: The short benchmark plan: the headline figures (matmul by dtype against the GPU model's peak; host and
#: device copies), on the CPU and every GPU (docs/benchmarks.md: selection measures only what is selected).
DEFAULT_BENCH_K = "test_matmul or test_copy"
#: Environment that would change what a nested pytest or gpucheck does: dropped from every step.
DROPPED_ENV_PREFIXES = ("GPUCHECK_", "PYTEST_")
LIBRARY_PATTERN = r"cuda|cudnn|cublas|cufft|curand|cusolver|cusparse|nccl|nvrtc|nvjitlink|nvidia|nvml|libnv|cupti"
KERNEL_PATTERN = re.compile(r"NVRM|Xid|nvidia|NVIDIA|nvlink|NVLink")


class Interrupted(Exception):
    """SIGTERM or SIGINT reached the run."""


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def seconds(text: str) -> float:
    """A positive, finite number of seconds (an option's value)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Step:
    """One child process: what ran, for how long, how it ended, where its output is."""

    name: str
    argv: list[str]
    limit_s: float
    rc: int | None = None
    wall_s: float | None = None
    timed_out: bool = False
    started: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    note: str | None = None


@dataclass
class Python:
    """The interpreter the steps run with, and how gpucheck got into it."""

    executable: str
    mode: str
    env: dict[str, str] = field(default_factory=dict)
    #: How to run the gpucheck command line.
    gpucheck: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Run:
    """The folder, the steps recorded so far, the budget."""

    def __init__(self, out: Path, scratch: Path, budget_s: float) -> None:
        self.out = out
        self.scratch = scratch
        self.began = time.monotonic()
        self.deadline = self.began + budget_s
        self.budget_s = budget_s
        self.steps: list[Step] = []
        self.summary: dict[str, Any] = {
            "schema": SCHEMA,
            "complete": False,
            "started": now_iso(),
            "budget_s": budget_s,
            "argv": sys.argv[1:],
            "files": {},
        }

    # --- children ---

    def step(
        self,
        name: str,
        argv: list[str],
        limit_s: float,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdout: Path | None = None,
        stderr: Path | None = None,
        describe: str | None = None,
        final: bool = False,
    ) -> Step:
        """Run ``argv`` as a process group of its own, stdout and stderr to files (``NAME.out``,
        ``NAME.err`` in the folder unless given), for at most ``limit_s`` and what the budget has left; in the
        scratch folder unless ``cwd`` is given (never the checkout: ``python -c`` would import its gpucheck)."""
        taken = {s.name for s in self.steps}
        if name in taken:  # one name, one pair of files
            name = next(f"{name}-{n}" for n in range(2, 100) if f"{name}-{n}" not in taken)
        left = self.deadline - time.monotonic() - (0.0 if final else RESERVE_S)
        limit = min(limit_s, left)
        out_path = stdout or self.out / f"{name}.out"
        err_path = stderr or self.out / f"{name}.err"
        step = Step(name, argv, round(limit, 1), stdout=self._rel(out_path), stderr=self._rel(err_path))
        for p in (out_path, err_path):
            p.touch()
        if describe is not None:
            self.describe(out_path.name, describe)
        if limit < 3:
            step.note = f"not run: the run's budget of {self.budget_s:.0f} s was spent"
            return self._record(step)
        step.started = now_iso()
        began = time.monotonic()
        try:
            with open(out_path, "wb") as out_f, open(err_path, "wb") as err_f:
                try:
                    proc = subprocess.Popen(
                        argv, stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f, cwd=cwd or self.scratch, env=env,
                        start_new_session=True,
                    )
                except OSError as exc:  # not found, not executable
                    step.rc = 127
                    step.note = f"could not start: {exc}"
                    err_f.write(f"{exc}\n".encode())
                    return self._record(step, began)
                try:
                    step.rc = proc.wait(timeout=limit)
                except subprocess.TimeoutExpired:
                    step.timed_out = True
                    step.note = f"ran over its {limit:.0f} s: its process group was killed"
                    step.rc = stop_group(proc)
                except BaseException:  # Interrupted (SIGTERM, Ctrl-C): the step's group goes with the run
                    step.rc = stop_group(proc)
                    step.note = "interrupted: its process group was killed"
                    self._record(step, began)
                    raise
                if not step.timed_out and _group_alive(proc.pid):
                    time.sleep(1.0)  # children on their way out (PR_SET_PDEATHSIG)
                    if _group_alive(proc.pid):
                        step.note = "processes of its group outlived it: killed"
                        stop_group(proc)
        finally:
            for p in (out_path, err_path):
                cap(p)
        return self._record(step, began)

    def _record(self, step: Step, began: float | None = None) -> Step:
        if began is not None:
            step.wall_s = round(time.monotonic() - began, 2)
        self.steps.append(step)
        self.save()
        return step

    def _rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.out))
        except ValueError:
            return f"(scratch) {path.name}"

    # --- the record ---

    def describe(self, name: str, what: str) -> None:
        self.summary["files"][name] = what

    def save(self) -> None:
        """summary.json and steps.tsv as they stand (atomically: a run killed from outside leaves the last)."""
        self.summary["steps"] = [asdict(s) for s in self.steps]
        self.summary["elapsed_s"] = round(time.monotonic() - self.began, 1)
        write_atomic(self.out / "summary.json", json.dumps(self.summary, indent=1, default=str) + "\n")
        lines = ["step\trc\twall_s\tlimit_s\ttimed_out\tstdout\tstderr\tnote"]
        for s in self.steps:
            cells = [s.name, "" if s.rc is None else str(s.rc), "" if s.wall_s is None else f"{s.wall_s:.2f}",
                     f"{s.limit_s:.0f}", "yes" if s.timed_out else "no", s.stdout or "", s.stderr or "", s.note or ""]
            lines.append("\t".join(c.replace("\t", " ").replace("\n", " ") for c in cells))
        write_atomic(self.out / "steps.tsv", "\n".join(lines) + "\n")


def stop_group(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM to the child's process group, SIGKILL 5 s later; its exit status."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM and _group_alive(proc.pid):
                continue  # the leader went, others of its group did not
            return proc.returncode
        except subprocess.TimeoutExpired:
            continue
    return proc.returncode


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def cap(path: Path) -> None:
    """Keep a huge output file's head and tail only."""
    try:
        size = path.stat().st_size
        if size <= MAX_FILE_BYTES:
            return
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
            f.seek(size - (MAX_FILE_BYTES - HEAD_BYTES))
            tail = f.read()
        note = f"\n[... {size - len(head) - len(tail)} bytes left out by gpu_acceptance ...]\n".encode()
        path.write_bytes(head + note + tail)
    except OSError:
        pass


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def answer(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """What a parser read from a step's files, or why it could not."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a summary entry, never the end of the run
        return {"unreadable": f"{type(exc).__name__}: {exc}"}


# --- the source, and getting gpucheck into an interpreter -----------------------------------------------------


def pyproject_table(header: str) -> dict[str, str]:
    """The ``key = "value"`` lines of one table of pyproject.toml (``project.scripts``,
    ``project.entry-points.pytest11``): read with a pattern, as Python 3.10 has no tomllib."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = re.search(rf"^\[{re.escape(header)}\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    return dict(re.findall(r'^([A-Za-z0-9_.-]+)\s*=\s*"([^"]*)"', section.group(1), re.M)) if section else {}


def pyproject_extras() -> set[str]:
    """The optional-dependency names of pyproject.toml ([project.optional-dependencies] keys)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = re.search(r"^\[project\.optional-dependencies\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*=", section.group(1), re.M)) if section else set()


def py_modules() -> list[str]:
    """The top-level modules the distribution installs beside its package ([tool.setuptools] py-modules)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r"^py-modules\s*=\s*\[(.*?)\]", text, re.M | re.S)
    return re.findall(r'"([A-Za-z0-9_]+)"', found.group(1)) if found else []


def stage_source(scratch: Path) -> Path:
    """A copy of what a build of gpucheck needs (pyproject.toml, README.md, the package, its top-level modules):
    pip builds it there, never in the checkout."""
    src = scratch / "src"
    src.mkdir()
    names = ["pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in", "README.md", "LICENSE"]
    for name in [*names, *(f"{m}.py" for m in py_modules())]:
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "gpucheck", src / "gpucheck", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


def source_digest() -> str:
    """sha256 over the package's files, its top-level modules and pyproject.toml (paths and contents, sorted):
    which source ran, where the copy has no .git."""
    h = hashlib.sha256()
    files = sorted(p for p in (REPO / "gpucheck").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    tops = [REPO / f"{m}.py" for m in py_modules() if (REPO / f"{m}.py").is_file()]
    for p in [REPO / "pyproject.toml", *tops, *files]:
        h.update(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def copy_install(src: Path, target: Path) -> None:
    """gpucheck installed by hand into ``target`` (for PYTHONPATH): the package, its top-level modules, and a
    dist-info with pyproject.toml's entry points, so that pytest loads the plugin as from a real install. The
    last resort, when pip cannot build here (no pip; a setuptools older than the pyproject needs, and no index
    to fetch another)."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "gpucheck", target / "gpucheck", dirs_exist_ok=True)
    for module in py_modules():
        if (src / f"{module}.py").is_file():
            shutil.copy2(src / f"{module}.py", target / f"{module}.py")
    init = (src / "gpucheck" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'__version__\s*=\s*"([^"]+)"', init)
    version = found.group(1) if found else "0"
    info = target / f"pytest_gpucheck-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pytest-gpucheck\nVersion: {version}\n")
    groups = {"console_scripts": pyproject_table("project.scripts"), "pytest11": pyproject_table("project.entry-points.pytest11")}
    (info / "entry_points.txt").write_text(
        "\n".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for g, eps in groups.items())
    )
    (info / "top_level.txt").write_text("".join(f"{m}\n" for m in ["gpucheck", *py_modules()]))
    (info / "INSTALLER").write_text("gpu_acceptance (copy)\n")


#: The ``gpucheck`` command where no console script was written (a copy install): its entry point, run by hand.
LAUNCH = (
    "import importlib, sys; module, fn = sys.argv[1].split(':'); sys.argv = ['gpucheck', *sys.argv[2:]]; "
    "sys.exit(getattr(importlib.import_module(module), fn)())"
)


def gpucheck_command(python: str, scripts: Path | None) -> list[str]:
    """How to run ``gpucheck``: the console script pip wrote, else its entry point from pyproject.toml."""
    if scripts is not None and (scripts / "gpucheck").is_file():
        return [str(scripts / "gpucheck")]
    entry = pyproject_table("project.scripts").get("gpucheck", "gpucheck.cli:main")
    return [python, "-c", LAUNCH, entry]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_ENV_PREFIXES)}
    env["COLUMNS"] = "120"
    env.update(extra or {})
    return env


PYINFO = (
    "import json, sys; print(json.dumps({'executable': sys.executable, 'version': sys.version.split()[0], "
    "'prefix': sys.prefix, 'base_prefix': sys.base_prefix, 'in_venv': sys.prefix != sys.base_prefix}))"
)


def index_reachable(run: Run, base: str) -> tuple[bool, str]:
    """Whether pip can reach its index: a TCP connection to the index host (PIP_INDEX_URL, else pypi.org)."""
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True, "a proxy is set: not checked, pip will try"
    url = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple"
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return True, f"the index is a local folder ({url})"
    host, port = parsed.hostname or "pypi.org", parsed.port or (443 if parsed.scheme == "https" else 80)
    code = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 8).close()"
    s = run.step("index-check", [base, "-c", code, host, str(port)], 20, env=child_env())
    return s.rc == 0, f"{host}:{port} {'reachable' if s.rc == 0 else 'not reachable'}"


def prepare(run: Run, args: argparse.Namespace) -> Python:
    """Install gpucheck as asked; fall back to the current interpreter when a fresh install cannot be made."""
    base = args.python or sys.executable
    src = stage_source(run.scratch)
    extras = ["tensorflow", "prometheus"]
    install: dict[str, Any] = {"asked": "wheels" if args.wheels else "no-install" if args.no_install else "venv"}
    run.summary["install"] = install
    notes: list[str] = []
    if "torch" in pyproject_extras():
        extras.append("torch")
    else:
        notes.append("no PyTorch unit in this gpucheck (no 'torch' extra): PyTorch's wheels are not installed")
    if not args.no_install:
        reachable, why = (True, f"offline from {args.wheels}") if args.wheels else index_reachable(run, base)
        notes.append(f"index: {why}")
        if reachable:
            venv = run.scratch / "venv"
            made = run.step("venv-create", [base, "-m", "venv", "--clear", str(venv)], 120, env=child_env())
            vpy = str(venv / "bin" / "python")
            if made.rc == 0:
                where = ["--no-index", "--find-links", str(args.wheels)] if args.wheels else ["--retries", "2", "--timeout", "30"]
                gpucheck_req = f"{src}[{','.join(extras)}]"
                if args.wheels:
                    built = sorted(Path(args.wheels).glob("pytest_gpucheck-*.whl"))
                    if built:
                        gpucheck_req = f"pytest-gpucheck[{','.join(extras)}]"
                        notes.append(f"gpucheck from the wheel folder: {built[-1].name}")
                pip = run.step(
                    "pip-install",
                    [vpy, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
                     *where, gpucheck_req, args.tensorflow, "pytest-xdist"],
                    args.install_timeout, env=child_env(),
                )
                if pip.rc == 0:
                    install.update(mode=install["asked"], notes=notes)
                    return Python(vpy, install["asked"], {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"},
                                  gpucheck_command(vpy, venv / "bin"), notes)
                notes.append(f"pip install failed (exit {pip.rc}): falling back to the current interpreter")
            else:
                notes.append(f"python -m venv failed (exit {made.rc}): falling back to the current interpreter")
        else:
            notes.append("no index and no --wheels: falling back to the current interpreter (--no-install)")
    py = current(run, base, src, notes)
    install.update(mode=py.mode, python=py.executable, notes=notes)
    return py


def current(run: Run, base: str, src: Path, notes: list[str]) -> Python:
    """gpucheck into the interpreter ``base`` without touching its packages: a venv with
    --system-site-packages where ``base`` is not itself in a venv, else ``pip install --target`` + PYTHONPATH,
    else a copy with a hand-made dist-info."""
    info = run.step("python-info", [base, "-c", PYINFO], 30, env=child_env())
    pyinfo = read_json(run.out / "python-info.out") or {}
    run.summary["python"] = pyinfo
    no_deps = ["--no-deps", "--no-build-isolation", "--no-index", "--disable-pip-version-check", "--no-input"]
    if info.rc == 0 and not pyinfo.get("in_venv"):
        venv = run.scratch / "sysvenv"
        made = run.step("sysvenv-create", [base, "-m", "venv", "--system-site-packages", "--clear", str(venv)], 120,
                        env=child_env())
        vpy = str(venv / "bin" / "python")
        if made.rc == 0:
            sees = run.step("sysvenv-check", [vpy, "-c", "import pytest, pytest_benchmark, pynvml"], 60, env=child_env())
            if sees.rc == 0:
                pip = run.step("pip-install-sysvenv", [vpy, "-m", "pip", "install", *no_deps, str(src)], 180, env=child_env())
                if pip.rc == 0:
                    notes.append("gpucheck installed into a venv made with --system-site-packages")
                    return Python(vpy, "system-site-venv", {}, gpucheck_command(vpy, venv / "bin"), notes)
                notes.append(f"pip install into the --system-site-packages venv failed (exit {pip.rc})")
            else:
                notes.append("the --system-site-packages venv does not see pytest, pytest-benchmark, nvidia-ml-py")
        else:
            notes.append(f"python -m venv --system-site-packages failed (exit {made.rc})")
    elif pyinfo.get("in_venv"):
        notes.append(
            f"{base} is itself in a venv ({pyinfo.get('prefix')}): a venv made from it with --system-site-packages "
            f"would see {pyinfo.get('base_prefix')}'s packages, not this venv's; pip install --target + PYTHONPATH"
        )
    target = run.scratch / "target"
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH", "")) if p)}
    pip = run.step("pip-install-target", [base, "-m", "pip", "install", "--target", str(target), *no_deps, str(src)], 180,
                   env=child_env())
    if pip.rc == 0:
        notes.append("gpucheck installed with pip install --target (no deps, no build isolation, no index)")
        return Python(base, "target", env, gpucheck_command(base, target / "bin"), notes)
    shutil.rmtree(target, ignore_errors=True)
    copy_install(src, target)
    notes.append(
        f"pip could not build gpucheck here (exit {pip.rc}; see pip-install-target.err): copied the package with a "
        "hand-made dist-info (its entry points) onto PYTHONPATH"
    )
    return Python(base, "copy", env, gpucheck_command(base, None), notes)


# --- what the steps run ---------------------------------------------------------------------------------------

IMPORTS = """
import importlib.metadata as md, importlib.util, json, sys
dists = {"gpucheck": "pytest-gpucheck", "pytest_gpucheck": "pytest-gpucheck", "pytest": "pytest", "pytest_benchmark": "pytest-benchmark",
         "xdist": "pytest-xdist", "pynvml": "nvidia-ml-py", "prometheus_client": "prometheus-client",
         "tensorflow": "tensorflow", "torch": "torch", "numpy": "numpy", "pytest_html": "pytest-html",
         "jsonschema": "jsonschema", "setuptools": "setuptools"}
out = {"python": sys.version.split()[0], "executable": sys.executable, "prefix": sys.prefix, "modules": {}}
for module, dist in dists.items():
    spec = importlib.util.find_spec(module)
    try:
        version = md.version(dist)
    except md.PackageNotFoundError:
        version = None
    origin = spec.origin if spec is not None else None
    out["modules"][module] = {"dist": dist, "version": version, "found": spec is not None, "origin": origin}
print(json.dumps(out, indent=1))
"""

MAPS = """
def loaded(pattern):
    import re
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and ".so" in parts[-1]:
                libs.add(parts[-1])
    return sorted(p for p in libs if re.search(pattern, p.rsplit("/", 1)[-1], re.I)), len(libs)
"""

TF_LIBS = MAPS + """
import json, sys, time
out = {"framework": "tensorflow"}
t0 = time.time()
try:
    import tensorflow as tf
    out["import_s"] = round(time.time() - t0, 2)
    out["version"] = tf.__version__
    out["build"] = {k: str(v) for k, v in dict(tf.sysconfig.get_build_info()).items()}
    gpus = tf.config.list_physical_devices("GPU")
    out["gpus"] = [g.name for g in gpus]
    out["gpu_details"] = [{k: str(v) for k, v in tf.config.experimental.get_device_details(g).items()} for g in gpus]
    dev = "/GPU:0" if gpus else "/CPU:0"
    with tf.device(dev):
        a = tf.random.normal((1024, 1024))
        b = tf.linalg.matmul(a, a)
        x = tf.random.normal((8, 32, 32, 16))
        c = tf.nn.conv2d(x, tf.random.normal((3, 3, 16, 16)), 1, "SAME")
    out["matmul_device"], out["conv_device"] = b.device, c.device
    out["checksum"] = float(tf.reduce_sum(b)) + float(tf.reduce_sum(c))
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
out["total_s"] = round(time.time() - t0, 2)
out["libraries"], out["all_shared_objects"] = loaded(sys.argv[1])
print(json.dumps(out, indent=1))
"""

#: PyTorch's import and device listing, as a user asks it: what gpucheck's time to verdict is measured against.
TORCH_LISTING = "import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.device_count())"

TORCH_LIBS = MAPS + """
import json, sys, time
out = {"framework": "torch"}
t0 = time.time()
try:
    import torch
    out["import_s"] = round(time.time() - t0, 2)
    out.update(version=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
               available=torch.cuda.is_available(), count=torch.cuda.device_count())
    if out["available"]:
        out["gpus"] = [torch.cuda.get_device_name(i) for i in range(out["count"])]
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        a = torch.randn(1024, 1024, device="cuda")
        b = a @ a
        c = torch.nn.functional.conv2d(torch.randn(8, 16, 32, 32, device="cuda"), torch.randn(16, 16, 3, 3, device="cuda"))
        torch.cuda.synchronize()
        out["checksum"] = float(b.sum()) + float(c.sum())
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
out["total_s"] = round(time.time() - t0, 2)
out["libraries"], out["all_shared_objects"] = loaded(sys.argv[1])
print(json.dumps(out, indent=1))
"""


def pytest_dir(scratch: Path) -> Path:
    """A folder of its own with an empty pytest.ini: no project's configuration reaches the run."""
    d = scratch / "run"
    d.mkdir(exist_ok=True)
    (d / "pytest.ini").write_text("[pytest]\n")
    return d


def report_answer(path: Path, rc: int | None) -> dict[str, Any]:
    report = read_json(path)
    if not isinstance(report, dict):
        return {"rc": rc, "report": None}
    rcause = report.get("root_cause") or {}
    return {
        "rc": rc,
        "verdict": report.get("verdict"),
        "root_cause": rcause.get("id"),
        "action": report.get("action"),
        "complete": report.get("complete"),
        "findings": [f.get("id") for f in report.get("findings", [])],
    }


def junit_answer(path: Path) -> dict[str, Any]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {"junit": None}
    cases = [
        {"name": c.get("name"), "outcome": next((t.tag for t in c if t.tag in ("failure", "error", "skipped")), "passed")}
        for c in suite.iter("testcase")
    ]
    keys = ("tests", "failures", "errors", "skipped", "time")
    return {"junit": {k: suite.get(k) for k in keys}, "cases": cases}


def tf_probe_log(report_path: Path, log: Path) -> dict[str, Any]:
    """The TensorFlow probe children's own stderr, as the JSON report keeps it (facts.*.exit.stderr_tail, the
    last 80 lines of each child), each child's once: the log ``gpucheck explain`` reads."""
    report = read_json(report_path)
    facts = report.get("facts") if isinstance(report, dict) else None
    seen: list[tuple[str, ...]] = []
    keys: list[str] = []
    skip = {"hardware", "kernel", "visibility", "cuda", "nvml", "environment", "not_run"}
    for key, value in (facts or {}).items():
        exit_ = value.get("exit") if isinstance(value, dict) else None
        tail = tuple(exit_.get("stderr_tail") or ()) if isinstance(exit_, dict) else ()
        if key in skip or not tail:
            continue
        keys.append(key)
        if tail not in seen:
            seen.append(tail)
    lines = [ln for tail in seen for ln in tail]
    log.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    out: dict[str, Any] = {"lines": len(lines), "children": len(seen), "from_facts": keys}
    if not lines:
        out["note"] = "no TensorFlow probe wrote a log in this run (no TensorFlow, or a report without facts)"
    return out


def kernel_log(run: Run) -> dict[str, Any]:
    """The kernel log's NVRM / Xid / nvidia lines: dmesg, else journalctl -k (either may be refused)."""
    raw = run.scratch / "kernel.raw"
    tried: list[dict[str, Any]] = []
    lines: list[str] = []
    source = None
    for name, argv in (("dmesg", ["dmesg", "--time-format=iso"]), ("journalctl-k", ["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"])):
        s = run.step(name, argv, 30, stdout=raw, stderr=run.out / f"{name}.err", final=True)
        text = raw.read_text(encoding="utf-8", errors="replace") if raw.exists() else ""
        tried.append({"source": name, "rc": s.rc, "lines": len(text.splitlines()), "note": s.note})
        if s.rc == 0 and text.strip():
            source = name
            lines = [ln for ln in text.splitlines() if KERNEL_PATTERN.search(ln)]
            break
    header = [f"# the kernel log's NVRM/Xid/nvidia lines, from {source or 'nowhere: every source was refused or empty'}"]
    header += [f"# {t['source']}: exit {t['rc']}, {t['lines']} lines{'; ' + t['note'] if t['note'] else ''}" for t in tried]
    (run.out / "kernel-nvrm.txt").write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    xids = sorted({m.group(1) for ln in lines if (m := re.search(r"Xid \([^)]*\): (\d+)", ln))})
    return {"source": source, "tried": tried, "lines": len(lines), "xids": xids}


def smi_answer(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8", errors="replace")
    found: dict[str, Any] = {}
    for key, label in (("driver", "Driver Version"), ("cuda", "CUDA Version"), ("gpus", "Attached GPUs")):
        m = re.search(rf"^{label}\s*:\s*(.+)$", text, re.M)
        found[key] = m.group(1).strip() if m else None
    found["products"] = re.findall(r"^\s*Product Name\s*:\s*(.+)$", text, re.M)
    return found


def benchmarks_answer(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict):
        return {"benchmarks": None}
    figures: dict[str, Any] = {}
    for b in data.get("benchmarks", []):
        extra = b.get("extra_info") or {}
        figures[b.get("name")] = {k: extra[k] for k in ("tflops", "gbps", "memory_gbps", "share_of_expected") if k in extra}
    return {"benchmarks": figures}


def doctor_answer(run: Run, rc: int | None) -> dict[str, Any]:
    out = report_answer(run.out / "doctor.json", rc)
    prom = run.out / "doctor.prom"
    if prom.exists():
        m = re.search(r"^gpucheck_usable\s+(\S+)$", prom.read_text(encoding="utf-8"), re.M)
        out["prometheus_usable"] = float(m.group(1)) if m else None
    else:
        out["prometheus_usable"] = None
    return out


def collect(run: Run, label: str, argv: list[str], what: str, limit: float = 30, *, final: bool = False) -> Step:
    return run.step(label, argv, limit, env=child_env(), describe=what, final=final)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpu-acceptance.sh",
        description="Everything gpucheck says about this machine (and what the machine itself says), in one folder.",
    )
    parser.add_argument("folder", type=Path, help="where to write (a new or empty folder)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--no-install", action="store_true",
                       help="use the interpreter's own packages; gpucheck itself is installed beside them, no deps")
    group.add_argument("--wheels", type=Path, metavar="DIR", help="install offline from this wheel folder")
    parser.add_argument("--python", metavar="PATH", help="the interpreter (default: the one running this)")
    parser.add_argument("--archive", type=Path, metavar="FILE.tgz", help="also pack the folder into this one file")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                        help=f"the whole run's time (default {DEFAULT_BUDGET_S:.0f}); each step gets at most what is left")
    parser.add_argument("--install-timeout", type=float, default=270, metavar="SECONDS",
                        help="the pip install step's limit with a fresh venv (default 270)")
    parser.add_argument("--tensorflow", default="tensorflow[and-cuda]", metavar="SPEC",
                        help="the TensorFlow a fresh venv gets (default 'tensorflow[and-cuda]': TensorFlow with its CUDA wheels)")
    parser.add_argument("--bench-k", default=DEFAULT_BENCH_K, metavar="EXPR",
                        help=f"the benchmarks to run, as pytest -k (default {DEFAULT_BENCH_K!r})")
    parser.add_argument("--bench-max-time", type=seconds, metavar="SECONDS",
                        help="each benchmark's measuring time, as pytest-benchmark's --benchmark-max-time (default: "
                             "gpucheck's own, 0.8 s, the matmuls 2 s; the test of this command here gives 0.1)")
    parser.add_argument("--keep-scratch", action="store_true", help="keep the scratch folder (venv, copies)")
    args = parser.parse_args(argv)

    out: Path = args.folder.resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        parser.exit(2, f"gpu-acceptance: {out} exists and is not an empty folder: give a new one\n")
    if args.wheels is not None and not args.wheels.is_dir():
        parser.exit(2, f"gpu-acceptance: --wheels {args.wheels} is not a folder\n")
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="gpucheck-acceptance-"))
    run = Run(out, scratch, args.budget)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        acceptance(run, args)
        run.summary["complete"] = True
    except Interrupted as exc:
        run.summary["interrupted"] = str(exc)
    except Exception:  # noqa: BLE001 - a bug of this script: recorded, the folder still gets its summary
        run.summary["error"] = traceback.format_exc()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        run.summary["ended"] = now_iso()
        run.summary["total_s"] = round(time.monotonic() - run.began, 1)
        missing = sorted(n for n in run.summary["files"] if not (out / n).exists())
        cut = [s.name for s in run.steps if s.timed_out or (s.note or "").startswith("not run")]
        run.summary["missing_files"], run.summary["cut_steps"] = missing, cut
        run.save()
        if not args.keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.archive is not None:
        pack(out, args.archive.resolve())
    print(f"gpu-acceptance: {out} in {run.summary['total_s']} s; {len(run.steps)} steps"
          + (f"; cut: {', '.join(cut)}" if cut else "") + (f"; missing: {', '.join(missing)}" if missing else ""))
    if not run.summary["complete"]:
        return 2
    return 1 if cut or missing else 0


def pack(out: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    os.replace(tmp, archive)


def acceptance(run: Run, args: argparse.Namespace) -> None:
    out, summary = run.out, run.summary
    answers: dict[str, Any] = {}
    summary["answers"] = answers
    summary["source"] = {"sha256": source_digest(), "repo": str(REPO)}
    d = run.describe
    d("summary.json", "this run: every step (argv, exit status, wall time, output files), the answers read from them, the install path taken, the times")
    d("steps.tsv", "one line per step: name, exit status, wall seconds, limit, timed out, its stdout and stderr files, note")

    # The machine as it is, before anything of ours touched the GPU.
    collect(run, "uname", ["uname", "-a"], "uname -a")
    collect(run, "os-release", ["cat", "/etc/os-release"], "/etc/os-release")
    collect(run, "nvidia-version", ["cat", "/proc/driver/nvidia/version"], "/proc/driver/nvidia/version (the loaded kernel module)")
    collect(run, "nvidia-smi", ["nvidia-smi"], "nvidia-smi, before the run")
    smi_q = collect(run, "nvidia-smi-q", ["nvidia-smi", "-q"], "nvidia-smi -q", 60)
    collect(run, "nvidia-smi-topo", ["nvidia-smi", "topo", "-m"], "nvidia-smi topo -m")
    answers["nvidia_smi"] = {"rc": smi_q.rc, **answer(lambda: smi_answer(out / "nvidia-smi-q.out"))}
    ldc = run.step("ldconfig", ["ldconfig", "-p"], 30, stdout=run.scratch / "ldconfig.raw", env=child_env())
    if ldc.rc == 127:
        ldc = run.step("ldconfig-sbin", ["/sbin/ldconfig", "-p"], 30, stdout=run.scratch / "ldconfig.raw", env=child_env())
    raw = (run.scratch / "ldconfig.raw").read_text(encoding="utf-8", errors="replace")
    libs = [ln.strip() for ln in raw.splitlines() if re.search(LIBRARY_PATTERN, ln.split("=>")[0], re.I)]
    (out / "ldconfig-cuda.txt").write_text(f"# ldconfig -p (exit {ldc.rc}), the CUDA/NVIDIA entries\n" + "\n".join(libs) + "\n")
    d("ldconfig-cuda.txt", "ldconfig -p's CUDA, cuDNN, NCCL and NVIDIA entries: what the loader finds system-wide")
    git = run.step("git-head", ["git", "-C", str(REPO), "rev-parse", "HEAD"], 15, env=child_env(), describe="git rev-parse HEAD (fails where the copy has no .git: see summary.json source.sha256)")
    summary["source"]["commit"] = ((out / "git-head.out").read_text().strip() or None) if git.rc == 0 else None

    # gpucheck into an interpreter.
    py = prepare(run, args)
    summary["install"]["gpucheck_command"] = py.gpucheck
    env = child_env(py.env)
    exe = py.executable
    run.step("imports", [exe, "-c", IMPORTS], 60, env=env, stdout=out / "imports.json")
    d("imports.json", "the interpreter the steps ran with, and where each package came from, with its version")
    mods = (read_json(out / "imports.json") or {}).get("modules", {})
    have = {m: bool(v.get("found")) for m, v in mods.items()}
    summary["install"]["gpucheck_origin"] = mods.get("gpucheck", {}).get("origin")
    collect(run, "pip-list", [exe, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"], "pip list: every package the steps could import", 60)

    work = pytest_dir(run.scratch)
    pytest = [exe, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs"]

    # The diagnosis, with the framework and without.
    s = run.step("pytest-gpucheck", [*pytest, "--gpucheck", f"--gpucheck-json={out / 'gpucheck.json'}", f"--junitxml={out / 'gpucheck-junit.xml'}"],
                 180, cwd=work, env=env, describe="pytest --gpucheck: the terminal output")
    d("gpucheck.json", "pytest --gpucheck's JSON report")
    d("gpucheck-junit.xml", "pytest --gpucheck's JUnit XML")
    answers["pytest_gpucheck"] = {"wall_s": s.wall_s, **answer(lambda: report_answer(out / "gpucheck.json", s.rc))}
    s2 = run.step("pytest-gpucheck-none", [*pytest, "--gpucheck", "--gpucheck-framework=none", f"--gpucheck-json={out / 'none.json'}", f"--junitxml={out / 'none-junit.xml'}"],
                  90, cwd=work, env=env, describe="pytest --gpucheck --gpucheck-framework=none: the terminal output")
    d("none.json", "pytest --gpucheck --gpucheck-framework=none's JSON report (the driver-level verdict)")
    d("none-junit.xml", "the same run's JUnit XML")
    answers["pytest_gpucheck_none"] = {"wall_s": s2.wall_s, **answer(lambda: report_answer(out / "none.json", s2.rc))}

    doctor = [*py.gpucheck, "doctor", "--framework=none", "--json", str(out / "doctor.json")]
    if have.get("prometheus_client", False):
        doctor += ["--prometheus", str(out / "doctor.prom")]
        d("doctor.prom", "gpucheck doctor's node_exporter textfile")
    else:
        summary["install"]["notes"].append("prometheus-client is not installed: doctor ran without --prometheus")
    s3 = run.step("doctor", doctor, 60, cwd=work, env=env, describe="gpucheck doctor --framework=none: its summary")
    d("doctor.json", "gpucheck doctor --framework=none's JSON report")
    answers["doctor"] = {"wall_s": s3.wall_s, **answer(lambda: doctor_answer(run, s3.rc))}

    # gpucheck explain on the TensorFlow probe's own log of the run above.
    tf_log = answer(lambda: tf_probe_log(out / "gpucheck.json", out / "tf-probe.log"))
    d("tf-probe.log", "the TensorFlow probe children's stderr in pytest --gpucheck's report (facts.*.exit.stderr_tail, each child's last 80 lines)")
    if not (out / "tf-probe.log").exists():
        (out / "tf-probe.log").write_text("")
    run.step("explain", [*py.gpucheck, "explain", str(out / "tf-probe.log")], 60, cwd=work, env=env, describe="gpucheck explain tf-probe.log")
    e = run.step("explain-json", [*py.gpucheck, "explain", "--json", str(out / "tf-probe.log")], 60, cwd=work, env=env,
                 stdout=out / "explain.json")
    d("explain.json", "gpucheck explain --json tf-probe.log")
    explained = read_json(out / "explain.json")
    findings = explained.get("findings", []) if isinstance(explained, dict) else None
    answers["explain"] = {"rc": e.rc, "log": tf_log, "findings": [f.get("id") for f in findings] if findings is not None else None}

    # The sample project's gpu-marked tests under two workers.
    sample = run.scratch / "sampleproject"
    shutil.copytree(REPO / "tests" / "sampleproject", sample, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    record = run.scratch / "sample-record"
    record.mkdir()
    workers = ["-n", "2"] if have.get("xdist", False) else []
    if not workers:
        summary["install"]["notes"].append("pytest-xdist is not installed: the sample project ran without -n 2")
    s4 = run.step("sample", [*pytest, *workers, "-m", "gpu", "--gpucheck-worker-memory=4GiB", f"--gpucheck-json={out / 'sample.json'}", f"--junitxml={out / 'sample-junit.xml'}"],
                  180, cwd=sample, env={**env, "SAMPLE_RECORD": str(record)}, describe="tests/sampleproject: pytest -n 2 -m gpu, the terminal output")
    records = {p.stem: read_json(p) for p in sorted(record.glob("*.json"))}
    (out / "sample-record.json").write_text(json.dumps(records, indent=1) + "\n")
    d("sample.json", "the sample project's run: gpucheck's JSON report")
    d("sample-junit.xml", "the sample project's run: JUnit XML (each marked test passed or skipped, and why)")
    d("sample-record.json", "what each marked test that ran saw ($SAMPLE_RECORD: fixtures, CUDA_VISIBLE_DEVICES, the driver's devices), by test and worker")
    answers["sample"] = {"wall_s": s4.wall_s, "records": sorted(records), **answer(lambda: report_answer(out / "sample.json", s4.rc)),
                         **answer(lambda: junit_answer(out / "sample-junit.xml"))}

    # The PyTorch sample project's gpu-marked tests under two workers (torch_device, the marker's framework), and
    # PyTorch's own import and device listing alone: the time pytest --gpucheck's verdict is measured against.
    if have.get("torch", False):
        tsample = run.scratch / "torchproject"
        shutil.copytree(REPO / "tests" / "torchproject", tsample, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        shutil.copy(REPO / "tests" / "sampleproject" / "tests" / "record.py", tsample / "tests" / "record.py")
        trecord = run.scratch / "torch-sample-record"
        trecord.mkdir()
        s5 = run.step("torch-sample", [*pytest, *workers, "-m", "gpu", "--gpucheck-worker-memory=4GiB",
                                       f"--gpucheck-json={out / 'torch-sample.json'}", f"--junitxml={out / 'torch-sample-junit.xml'}"],
                      180, cwd=tsample, env={**env, "SAMPLE_RECORD": str(trecord)},
                      describe="tests/torchproject: pytest -n 2 -m gpu, the terminal output")
        trecords = {p.stem: read_json(p) for p in sorted(trecord.glob("*.json"))}
        (out / "torch-sample-record.json").write_text(json.dumps(trecords, indent=1) + "\n")
        d("torch-sample.json", "the PyTorch sample project's run: gpucheck's JSON report")
        d("torch-sample-junit.xml", "the PyTorch sample project's run: JUnit XML")
        d("torch-sample-record.json", "what each marked PyTorch test that ran saw ($SAMPLE_RECORD), by test and worker")
        answers["torch_sample"] = {"wall_s": s5.wall_s, "records": sorted(trecords),
                                   **answer(lambda: report_answer(out / "torch-sample.json", s5.rc)),
                                   **answer(lambda: junit_answer(out / "torch-sample-junit.xml"))}
        walls = [run.step(f"torch-listing-{i}", [exe, "-c", TORCH_LISTING], 90, cwd=work, env=env,
                          describe="python -c 'import torch; torch.cuda.device_count()': the baseline of the time to verdict").wall_s
                 for i in (1, 2)]
        answers["torch_listing"] = {"wall_s": walls, "pytest_gpucheck_wall_s": s.wall_s}
    else:
        answers["torch_sample"] = {"rc": None, "note": "PyTorch is not installed"}

    # The libraries a framework process loads (its /proc/self/maps after a matmul and a convolution).
    if have.get("tensorflow", False):
        t = run.step("loaded-libs-tf", [exe, "-c", TF_LIBS, LIBRARY_PATTERN], 120, cwd=work, env=env,
                     stdout=out / "loaded-libs-tf.json", stderr=out / "tf-import.log")
        d("loaded-libs-tf.json", "TensorFlow in a process of its own: version, build, GPUs, a matmul and a conv2d's device, the CUDA/NVIDIA libraries it mapped")
        d("tf-import.log", "that process's TensorFlow log (its stderr)")
        run.step("explain-tf-import", [*py.gpucheck, "explain", str(out / "tf-import.log")], 60, cwd=work, env=env,
                 describe="gpucheck explain tf-import.log")
        answers["loaded_libs_tf"] = {"rc": t.rc, **answer(lambda: _libs(out / "loaded-libs-tf.json"))}
    else:
        answers["loaded_libs_tf"] = {"rc": None, "note": "TensorFlow is not installed"}
    if have.get("torch", False):
        t = run.step("loaded-libs-torch", [exe, "-c", TORCH_LIBS, LIBRARY_PATTERN], 90, cwd=work, env=env,
                     stdout=out / "loaded-libs-torch.json", stderr=out / "loaded-libs-torch.err")
        d("loaded-libs-torch.json", "PyTorch in a process of its own: version, CUDA, GPUs, a matmul and a conv2d, the CUDA/NVIDIA libraries it mapped")
        answers["loaded_libs_torch"] = {"rc": t.rc, **answer(lambda: _libs(out / "loaded-libs-torch.json"))}
    else:
        answers["loaded_libs_torch"] = {"rc": None, "note": "PyTorch is not installed"}

    # The benchmarks, a short plan.
    if have.get("pytest_benchmark", False):
        max_time = [] if args.bench_max_time is None else [f"--benchmark-max-time={args.bench_max_time:g}"]
        b = run.step("benchmarks", [*pytest, "-p", "no:xdist", "--gpucheck", "--gpucheck-benchmarks", "-k", args.bench_k, *max_time,
                                    f"--benchmark-json={out / 'benchmarks.json'}", f"--gpucheck-json={out / 'bench-report.json'}"],
                     240, cwd=work, env=env, describe=f"pytest --gpucheck --gpucheck-benchmarks -k {args.bench_k!r}: the terminal output")
        d("bench-report.json", "the benchmark run's gpucheck JSON report")
        answers["benchmarks"] = {"rc": b.rc, "wall_s": b.wall_s, "k": args.bench_k, "max_time": args.bench_max_time, **answer(lambda: report_answer(out / "bench-report.json", b.rc)),
                                 **answer(lambda: benchmarks_answer(out / "benchmarks.json"))}
        if (out / "benchmarks.json").exists():
            d("benchmarks.json", "pytest-benchmark's JSON of the short plan (figures in extra_info; the GPU stack in machine_info['gpucheck'])")
        else:  # pytest-benchmark writes none when nothing was measured (no TensorFlow: every benchmark is blocked)
            answers["benchmarks"]["note"] = "no benchmark was measured, so pytest-benchmark wrote no benchmarks.json: see benchmarks.out"
    else:
        answers["benchmarks"] = {"rc": None, "note": "pytest-benchmark is not installed"}

    # After the run: the GPU's state and the kernel's word on it.
    collect(run, "nvidia-smi-after", ["nvidia-smi"], "nvidia-smi after the run (nothing of ours should be left on the GPU)", final=True)
    answers["kernel_log"] = answer(lambda: kernel_log(run))
    d("kernel-nvrm.txt", "the kernel log's NVRM/Xid/nvidia lines (dmesg, else journalctl -k), with where they came from")
    summary["times"] = {s.name: s.wall_s for s in run.steps}


def _libs(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict):
        return {"libraries": None}
    keep = ("version", "gpus", "available", "cuda", "cudnn", "matmul_device", "conv_device", "import_s", "total_s", "error")
    return {**{k: data[k] for k in keep if k in data}, "libraries": len(data.get("libraries", []))}


if __name__ == "__main__":
    sys.exit(main())
