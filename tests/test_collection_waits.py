"""Collection waits for NVML's answer only, never for the whole diagnosis: on a machine where cuInit hangs
(the CUDA and TensorFlow children run to their time limit), the per-GPU checks are still collected at once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCENARIO = Path(__file__).parent / "scenarios" / "stack" / "cuinit-hangs.json"


def test_the_per_gpu_checks_are_collected_while_tensorflow_still_hangs(
    tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    scenario = json.loads(SCENARIO.read_text())
    scenario["libraries"] = [*scenario["libraries"], "libnvml"]
    fake_machine(scenario)
    # The probes may take 300 s; collection must not wait for them. The 120 s bound says only that it did not.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--gpucheck", "--gpucheck-timeout=300", "--collect-only", "-q",
         "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    per_gpu = [line for line in done.stdout.splitlines() if "[GPU-0]" in line]
    assert per_gpu, done.stdout + done.stderr
