"""What a test saw, written to $SAMPLE_RECORD/NAME-WORKER.json (only when the tests of gpucheck ask)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def record(name: str, **seen: Any) -> None:
    folder = os.environ.get("SAMPLE_RECORD")
    if not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    seen.update(
        worker=worker,
        pid=os.getpid(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        gpucheck_modules=sorted(m for m in sys.modules if m.startswith("gpucheck")),
    )
    (Path(folder) / f"{name}-{worker}.json").write_text(json.dumps(seen, default=str))
