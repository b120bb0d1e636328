"""Entry point of a probe child process: ``python -m gpucheck.probes.child NAME OUT``.

The child runs one probe, writes its facts as JSON to OUT (atomically) and
leaves with ``os._exit`` so that no library's exit-time crash can turn a
finished probe into a failed one. Before each step that can hang or crash it
announces the step on stderr (``STAGE_PREFIX`` lines), so the parent can name
the call a dead or hung child was in.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

STAGE_PREFIX = "@@gpucheck-stage "


def stage(name: str) -> None:
    sys.stderr.write(f"{STAGE_PREFIX}{name}\n")
    sys.stderr.flush()


def _probes() -> dict[str, Callable[[], Any]]:
    from gpucheck.probes import driver, framework

    return {
        "cuda": driver.probe_cuda_driver,
        "nvml": driver.probe_nvml_basic,
        "framework": framework.probe_framework,
    }


def _write_atomically(path: str, data: Any) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".facts-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    from gpucheck.facts import to_json

    if len(argv) != 2:
        sys.stderr.write("usage: python -m gpucheck.probes.child NAME OUT\n")
        return 2
    name, out = argv
    probes = _probes()
    if name not in probes:
        sys.stderr.write(f"unknown probe {name!r}; known: {', '.join(sorted(probes))}\n")
        return 2
    faulthandler.enable()
    result = probes[name]()
    stage("write facts")
    _write_atomically(out, to_json(result))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
