"""The contract helpers (tests/contracts.py) and the one promise no fake machine can reach through the full
path: a diagnosis that could not run blocks every question but its own.

A probe child that cannot be started is ``diagnosis-incomplete`` (``rules.common.probe_failure``), the run's
pseudo layer below every real one: each check reads "blocked by diagnosis-incomplete" (nothing was looked
at), and only ``test_diagnosis_completed`` fails. Here the process limit stops the fork, as on a login node
whose user is at ``ulimit -u`` (fork(2): EAGAIN, "The RLIMIT_NPROC soft resource limit ... was reached";
Python raises BlockingIOError, an OSError, which the child runner turns into an exit of status "error").
Root ignores that limit, and the tests run as root, so the child runner's answer is written as facts.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucheck.blocking import QUESTION_ATTRIBUTE, LayerState, Question, decide, layer_states, root_cause
from gpucheck.facts import ChildExit
from gpucheck.layers import checked
from gpucheck.model import RUN_LAYER, Finding
from gpucheck.rules.common import probe_failure
from gpucheck.settings import Settings
from tests.contracts import _check_modules, assert_one_red_line, needs_tensorflow, question_of


@dataclass(frozen=True)
class Diagnosis:
    """What ``decide`` reads of a diagnosis (``blocking.Diagnosed``), from real findings."""

    findings: tuple[Finding, ...]
    layers: tuple[LayerState, ...]
    unchecked: Mapping[str, str] = field(default_factory=dict)


def every_question() -> dict[str, Question]:
    """Each check of the package (its function's name) and the question it asks."""
    out = {}
    for module_name in _check_modules().values():
        module = importlib.import_module(module_name)
        for name, fn in vars(module).items():
            question = getattr(fn, QUESTION_ATTRIBUTE, None)
            if name.startswith("test_") and isinstance(question, Question):
                out[name] = question
    return out


def test_a_probe_that_could_not_start_blocks_every_other_question() -> None:
    could_not_start = ChildExit(
        status="error", returncode=None, signal=None, duration_s=0.0, stderr_tail=(), last_stage=None,
        error="could not start /usr/bin/python3: [Errno 11] Resource temporarily unavailable",
    )
    incomplete = probe_failure("CUDA driver", "libcuda.so.1", could_not_start, 60.0)
    assert incomplete is not None and incomplete.id == "diagnosis-incomplete" and incomplete.layer == RUN_LAYER
    findings = (incomplete,)
    rc = root_cause(findings)
    assert rc is incomplete
    states = layer_states(findings, rc, checked(Settings()))
    assert {s.state for s in states} == {"not checked"}
    diagnosis = Diagnosis(findings, states)
    decisions = {name: decide(diagnosis, q) for name, q in every_question().items()}
    assert len(decisions) >= 30, sorted(decisions)
    assert decisions.pop("test_diagnosis_completed").outcome == "failed"
    # The hardware questions too: nothing was looked at, so nothing passes or fails but the run's own check.
    assert "test_nvidia_gpu_on_pci_bus" in decisions
    for name, d in decisions.items():
        assert (d.outcome, d.reason) == ("skipped", "blocked by diagnosis-incomplete"), (name, d)


def test_needs_tensorflow_reads_the_questions() -> None:
    assert needs_tensorflow(question_of("checks_framework.py::test_tensorflow_registers_gpus"))
    assert needs_tensorflow(question_of("checks_libraries.py::test_cudnn_loads"))
    assert needs_tensorflow(question_of("checks_memory.py::test_memory_settings_apply"))  # a resource needing TF
    assert not needs_tensorflow(question_of("checks_host.py::test_nvidia_gpu_on_pci_bus"))
    assert not needs_tensorflow(question_of("checks_nvml.py::test_memory_headroom[GPU-0]"))


def _report(findings: list[dict[str, Any]], checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"root_cause": findings[0], "findings": findings, "checks": checks}


def test_one_red_line_refuses_a_consequence_and_takes_an_independent_fault() -> None:
    rc = {"id": "framework-cpu-only", "layer": "framework", "severity": "blocker", "independent_of_root_cause": False}
    consequence = {"id": "placement-failed", "layer": "placement", "severity": "blocker", "independent_of_root_cause": False}
    # NVML's health reading does not need TensorFlow: independent of a framework root cause.
    independent = {"id": "ecc-errors", "layer": "health", "severity": "degraded", "independent_of_root_cause": True}
    own = {"nodeid": "checks_framework.py::test_tensorflow_is_cuda_build", "outcome": "failed", "finding_ids": ["framework-cpu-only"]}
    second = {"nodeid": "checks_placement.py::test_ops_run_on_gpu", "outcome": "failed", "finding_ids": ["placement-failed"]}
    health = {"nodeid": "checks_nvml.py::test_memory_healthy[GPU-0]", "outcome": "failed", "finding_ids": ["ecc-errors"]}
    assert_one_red_line(_report([rc, consequence, independent], [own, health]))
    try:
        assert_one_red_line(_report([rc, consequence, independent], [own, second]))
    except AssertionError as exc:
        assert "test_ops_run_on_gpu" in str(exc)
    else:
        raise AssertionError("a second red line for a consequence of the root cause passed")
