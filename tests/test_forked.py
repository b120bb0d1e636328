"""Probes forked from the framework's child once the framework is imported (``gpucheck.probes.forked``): TensorFlow's
memory growth runs in a process of its own without importing TensorFlow again, and its outcome reads as a child's of
its own would (``gpucheck.isolation._read_forked``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import GpucheckRun
from gpucheck.facts import ChildExit
from gpucheck.isolation import _read_forked
from gpucheck.protocol import FORKED_ENV, FORKED_FOLDER, STAGE_PREFIX, Fork, decode_forks, encode_forks

SCENARIOS = Path(__file__).parent / "scenarios"
H100 = json.loads((SCENARIOS / "cuda/h100-80gb-healthy.json").read_text())
NVML_HANGS = json.loads((SCENARIOS / "nvml/nvml-hangs-in-a-gpu-query.json").read_text())


def test_memory_growth_is_forked_from_the_tensorflow_child(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun], tmp_path: Path,
    monkeypatch: Any,
) -> None:
    """The healthy H100 as fakes: the fake libcuda writes a line for each cuInit, with the process's command line
    (``GPUCHECK_FAKE_CUINIT_LOG``). Memory growth is tried in a process of its own, which initialises CUDA for itself
    (it is forked before the TensorFlow child's device listing calls cuInit), and has the TensorFlow child's command
    line: two cuInits there, by two processes, and none by a process started for memory growth. Its outcome is as
    before: applied, judged in a process that ended by itself. Kills: memory growth started as a child of its own
    (a cuInit by ``probe_memory_growth``), or forked after the device listing (one cuInit: the fork's fails)."""
    fake_machine(H100)
    log = tmp_path / "cuinit.log"
    monkeypatch.setenv("GPUCHECK_FAKE_CUINIT_LOG", str(log))
    run = run_gpucheck()
    inits = log.read_text().splitlines()
    assert not [line for line in inits if "probe_memory_growth" in line], inits
    # TensorFlow calls cuInit more than once in a process: counted by process.
    tf = {line.split()[0] for line in inits if "framework_then_steps" in line}
    assert len(tf) == 2, inits
    growth = run.report["facts"]["memory_growth"]
    assert growth["exit"]["status"] == "ok" and growth["exit"]["returncode"] == 0, growth["exit"]
    assert growth["exit"]["last_stage"] == "write facts", growth["exit"]
    assert growth["facts"]["applied"] is True, growth["facts"]
    # Its own output, not the TensorFlow child's: TensorFlow's line for the device it created with memory growth.
    assert any("Created device" in line for line in growth["exit"]["stderr_tail"]), growth["exit"]["stderr_tail"]


def test_a_tensorflow_child_that_aborts_in_cuinit_leaves_memory_growth_not_judged_or_its_own_death(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The fake A100 whose cuInit aborts (as a broken user-space driver does), with every CUDA library so that
    TensorFlow gets as far as the driver. The TensorFlow child and the memory-growth process forked from it both call
    cuInit: whichever dies first, memory growth is never a finding without its cause. Either its own SIGABRT, recorded
    by the TensorFlow child that reaped it, or "not checked", naming how the TensorFlow child died, when it was killed
    with that child before it got to cuInit. Kills: reading a forked process that ended with its parent as a crash of
    its own (memory-config-failed "died" with no signal)."""
    from tests.test_placement import A100_VM_WITH_LIBRARIES

    fake_machine({**A100_VM_WITH_LIBRARIES, "cuda": {"init": "abort", "driver_version": 12040}})
    run = run_gpucheck()
    assert run.root_cause == "driver-call-crashed", run.finding_ids
    growth = run.report["facts"]["memory_growth"]["exit"]
    if growth["status"] == "crashed":
        assert growth["signal"] == "SIGABRT", growth
        assert run.finding("memory-config-failed")["evidence"]["signal"] == "SIGABRT"
    else:
        assert growth["status"] == "cancelled" and "died (SIGABRT)" in growth["error"], growth
        assert "memory-config-failed" not in run.finding_ids, run.finding("memory-config-failed")


def test_a_forked_probe_that_hangs_is_stopped_at_the_deadline_and_named(
    fake_machine: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    """A real fork of a real probe that hangs: NVML's query of a GPU never returns (the fake of
    nvml-hangs-in-a-gpu-query). The forking process stops it at the deadline given (SIGKILL), records it, and the
    parent's reading names the hung call, as for a child of its own."""
    fake_machine(NVML_HANGS)
    asked = encode_forks([Fork("nvml", "gpucheck.probes.nvml:probe_nvml", {"GPUCHECK_TIMEOUT": "30"})])
    code = (
        "import time; from gpucheck.probes import forked; forked.start_from_env(); "
        "forked.wait_all(time.monotonic() + 3.0)"
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, FORKED_ENV: asked}, timeout=60, check=False,
        capture_output=True, text=True,
    )
    assert done.returncode == 0 and time.monotonic() - began < 30, done.stderr[-2000:]
    folder = tmp_path / FORKED_FOLDER
    record = json.loads((folder / "nvml.exit").read_text())
    assert record["timed_out"] is True and record["returncode"] == -signal.SIGKILL, record
    host = ChildExit("ok", 0, None, 4.0, (), "write facts", None)
    exit_, data = _read_forked(folder, "nvml", host)
    assert exit_.status == "timeout" and exit_.signal == "SIGKILL" and data is None, exit_
    assert exit_.last_stage is not None and exit_.last_stage.startswith("nvml"), exit_


def _lay_out(folder: Path, lines: list[str], facts: dict[str, Any] | None, record: dict[str, Any] | None) -> Path:
    forked = folder / FORKED_FOLDER
    forked.mkdir(parents=True)
    (forked / "memory_growth.out").write_text("".join(f"{line}\n" for line in lines))
    if facts is not None:
        (forked / "memory_growth.json").write_text(json.dumps(facts))
    if record is not None:
        (forked / "memory_growth.exit").write_text(json.dumps(record))
    return forked


OK_HOST = ChildExit("ok", 0, None, 3.0, (), "write facts", None)
STAGES = [f"{STAGE_PREFIX}import tensorflow", f"{STAGE_PREFIX}memory-growth: initialise devices"]


def test_the_forked_outcomes_read_as_a_childs_own(tmp_path: Path) -> None:
    """Each way a forked probe can end, as its files say it: the outcome a child of its own would have had."""
    # Never forked: the TensorFlow child died in its import (a fresh process would have died there too).
    aborted = ChildExit("crashed", -6, "SIGABRT", 1.2, ("F tensorflow/core ... Check failed",), "import tensorflow", None)
    exit_, data = _read_forked(tmp_path / "none" / FORKED_FOLDER, "memory_growth", aborted)
    assert (exit_.status, exit_.signal, exit_.last_stage, data) == ("crashed", "SIGABRT", "import tensorflow", None)
    assert exit_.stderr_tail == aborted.stderr_tail and "forked" in (exit_.error or ""), exit_
    # Ended by itself with its facts.
    forked = _lay_out(tmp_path / "ok", [*STAGES, "I0000 Created device", f"{STAGE_PREFIX}write facts"],
                      {"applied": True}, {"returncode": 0, "timed_out": False, "duration_s": 0.8})
    exit_, data = _read_forked(forked, "memory_growth", OK_HOST)
    assert (exit_.status, exit_.duration_s, exit_.last_stage, data) == ("ok", 0.8, "write facts", {"applied": True})
    assert exit_.stderr_tail == ("I0000 Created device",), exit_
    # Aborted in its device creation: the signal, the step, its last words.
    forked = _lay_out(tmp_path / "abort", [*STAGES, "F0000 cuda_malloc_async unsupported"], None,
                      {"returncode": -6, "timed_out": False, "duration_s": 1.5})
    exit_, data = _read_forked(forked, "memory_growth", OK_HOST)
    assert (exit_.status, exit_.signal, exit_.last_stage, data) == ("crashed", "SIGABRT", "memory-growth: initialise devices", None)
    assert exit_.stderr_tail == ("F0000 cuda_malloc_async unsupported",) and exit_.error is None, exit_
    # Still running when the TensorFlow child timed out (killed with its process group): a timeout, its stage named.
    forked = _lay_out(tmp_path / "hung", STAGES, None, None)
    hung = ChildExit("timeout", -9, "SIGKILL", 60.0, (), "placement: initialise devices", "no answer within 60 s")
    exit_, data = _read_forked(forked, "memory_growth", hung)
    assert (exit_.status, exit_.last_stage, data) == ("timeout", "memory-growth: initialise devices", None), exit_
    # Still running when the TensorFlow child died: killed with it before it got to its answer (not judged), and why.
    forked = _lay_out(tmp_path / "orphan", STAGES[:1], None, None)
    died = ChildExit("crashed", -6, "SIGABRT", 2.0, (), "tf.config.list_physical_devices", None)
    exit_, data = _read_forked(forked, "memory_growth", died)
    assert (exit_.status, exit_.signal, data) == ("cancelled", None, None), exit_
    assert exit_.error is not None and "died (SIGABRT) in tf.config.list_physical_devices" in exit_.error, exit_
    # Stopped by the TensorFlow child at its deadline.
    forked = _lay_out(tmp_path / "deadline", STAGES, None, {"returncode": -9, "timed_out": True, "duration_s": 55.0})
    exit_, _data = _read_forked(forked, "memory_growth", OK_HOST)
    assert (exit_.status, exit_.signal, exit_.duration_s) == ("timeout", "SIGKILL", 55.0), exit_
    # Could not be forked (the forking child said why): not started.
    forked = _lay_out(tmp_path / "nofork", [], None,
                      {"returncode": None, "timed_out": False, "duration_s": 0.0, "error": "could not fork: [Errno 11]"})
    exit_, _data = _read_forked(forked, "memory_growth", OK_HOST)
    assert (exit_.status, exit_.error) == ("error", "could not fork: [Errno 11]"), exit_
    # Exited non-zero without facts (a traceback): crashed, and why.
    forked = _lay_out(tmp_path / "raised", ["Traceback (most recent call last):", "ValueError: no"], None,
                      {"returncode": 1, "timed_out": False, "duration_s": 0.1})
    exit_, _data = _read_forked(forked, "memory_growth", OK_HOST)
    assert exit_.status == "crashed" and exit_.returncode == 1 and "without writing its facts" in (exit_.error or "")


def test_what_is_asked_to_fork_is_read_safely() -> None:
    forks = [Fork("memory_growth", "gpucheck.frameworks.tensorflow.memory:probe_memory_growth", {"A": "1"})]
    assert decode_forks(encode_forks(forks)) == forks
    for text in ("", "{", "{}", "[1]", '[{"key": "../x", "target": "t"}]', '[{"key": "k", "target": "t", "env": {"A": 1}}]'):
        assert decode_forks(text) == [], text
