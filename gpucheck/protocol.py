"""The protocol between gpucheck and its probe children, imported by both sides (the runner in
``gpucheck.isolation`` and the children in ``gpucheck.probes``): the stage lines a child announces its
steps with, the environment variables the parent hands down, the exit code of a probe stopped at its
deadline. Standard library only, no imports from gpucheck: the lowest floor.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

STAGE_PREFIX = "@@gpucheck-stage "
#: Set by a probe child for the grandchildren it starts (gpucheck.frameworks.tensorflow.placement): the pid they must
#: not outlive. They ask the kernel for SIGKILL when it dies (PR_SET_PDEATHSIG), since a killed probe
#: child cannot stop the grandchildren of its own sessions.
DIE_WITH_PARENT_ENV = "GPUCHECK_DIE_WITH_PARENT"
#: Exit code of a staged probe stopped at its deadline (GPUCHECK_TIMEOUT, less a margin) after its first
#: result was written: the parent then has that result rather than a killed child with nothing.
DEADLINE_EXIT = 124
#: Where a probe child sends TensorFlow's output while it reads it back (``gpucheck.frameworks.tensorflow.common.captured``): a file
#: named by the parent, so that when TensorFlow aborts inside such a block, its last words (the ``F…``
#: line that names what it refused) still reach the evidence. Emptied when a block ends normally.
CAPTURE_ENV = "GPUCHECK_CAPTURE_FILE"

#: The probe's timeout (seconds) as the parent resolved it, handed to the child.
TIMEOUT_ENV = "GPUCHECK_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0


def seconds_from_env(name: str, default: float) -> float:
    """A positive number of seconds the parent handed this child in ``name``, or ``default``."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def timeout_from_env() -> float:
    """The timeout the parent gave this child (GPUCHECK_TIMEOUT), or the default."""
    return seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


@dataclass(frozen=True)
class Checkpoint:
    """What a staged probe yields after each step: its facts so far (JSON data, written at once), and how
    long the next step may take (None: until the probe's own deadline). A step that overruns ends the
    child with DEADLINE_EXIT; its last stage line names the step, and the facts written before stand."""

    data: Any
    budget_s: float | None = None


#: The placement log: once on, TensorFlow logs every op it places and executes (it can only be switched
#: on before the devices are initialised, and not off again for functions). It is kept out of the
#: output the parent keeps as evidence.
_PLACEMENT_NOISE = re.compile(r"placer\.cc:\d+\]|execute\.cc:\d+\] Executing op |^[^\s:]+: \(\w+\): /job:")


def quiet(lines: list[str]) -> list[str]:
    """TensorFlow's output without the placement log."""
    return [ln for ln in lines if not _PLACEMENT_NOISE.search(ln)]


def stage(name: str) -> None:
    sys.stderr.write(f"{STAGE_PREFIX}{name}\n")
    sys.stderr.flush()


#: Probe targets a child may run: ``module:function`` in gpucheck's probes (the units of
#: ``gpucheck.registry`` name them). Nothing else is imported on a parent's word.
_TARGET = re.compile(
    r"^gpucheck\.(?:probes\.[a-z][a-z0-9_]*|[a-z][a-z0-9_]*\.probe|frameworks\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)"
    r":[a-z][a-z0-9_]*$"
)


def load_target(target: str) -> Callable[..., Any] | None:
    """The probe function ``target`` names, or None when it is not one."""
    if not _TARGET.match(target):
        return None
    module, _, function = target.partition(":")
    fn = getattr(importlib.import_module(module), function, None)
    return fn if callable(fn) else None


#: --gpucheck-deep, handed to the children (the same variable a user sets for it).
DEEP_ENV = "GPUCHECK_DEEP"

#: The steps a staged child (``gpucheck.probes.steps``) runs after its first facts and its set-up, in order, each
#: as ``key=module:function`` (comma-separated): the steps the units register for that child (``Unit.steps``) of
#: the layers this run checks (``gpucheck.registry.steps_of``).
STEPS_ENV = "GPUCHECK_STEPS"


def steps_from_env() -> list[tuple[str, str]]:
    out = []
    for item in os.environ.get(STEPS_ENV, "").split(","):
        key, sep, target = item.strip().partition("=")
        if sep and key and target:
            out.append((key, target))
    return out


def is_sibling(pid: int) -> bool:
    """Whether ``pid`` is another probe child of the same gpucheck run (it has this child's parent): NVML
    lists gpucheck's own TensorFlow processes once they hold a GPU, and they are not "other processes"."""
    if pid == os.getpid():
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return len(fields) > 1 and fields[1].isdigit() and int(fields[1]) == os.getppid()


#: The section of the TensorFlow step where TensorFlow creates its devices: its error makes every op fail.
INIT_SECTION = "initialise devices"


#: Probes a framework's child forks once its framework is imported (``gpucheck.probes.forked``), asked for by the
#: parent: a JSON list of ``{"key", "target", "env"}``.
FORKED_ENV = "GPUCHECK_FORKED"
#: The folder, in that child's working folder, of its forked probes' files (``<key>.out``, ``.json``, ``.exit``).
FORKED_FOLDER = "forked"


@dataclass(frozen=True)
class Fork:
    """A probe to fork: its key (the facts field it fills, and its files' name), ``module:function``, and the
    variables it runs with (beside the main child's environment)."""

    key: str
    target: str
    env: Mapping[str, str]


def encode_forks(forks: Sequence[Fork]) -> str:
    return json.dumps([{"key": f.key, "target": f.target, "env": dict(f.env)} for f in forks])


def decode_forks(text: str) -> list[Fork]:
    """The forks a parent asked for; nothing where the variable is not a list of them (it is ours, but read safely)."""
    try:
        items = json.loads(text) if text else []
    except ValueError:
        return []
    out: list[Fork] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        key, target, env = item.get("key"), item.get("target"), item.get("env", {})
        if (
            isinstance(key, str) and key.isidentifier() and isinstance(target, str) and isinstance(env, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            out.append(Fork(key, target, env))
    return out
