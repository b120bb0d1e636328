"""A framework unit built only for the tests (frameworks-as-units issue): "NumPy" answers the framework and placement
questions from numpy on the CPU, in the pytest process (an ``InProcess`` reading: no child of its own). It is
registered as other distributions register theirs, through the ``gpucheck.frameworks`` entry-point group
(``tests/test_framework_units.py`` writes the ``.dist-info`` that names it), so this file, the catalog's existing
ids and that one entry point are all it takes.

It says it registers every GPU the CUDA driver lists (as a GPU framework would), and checks a matmul against a
reference computed another way: on a machine whose GPUs are healthy it reads healthy, whatever TensorFlow's own
questions find there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from gpucheck.facts import Facts, FrameworkGpu, FrameworkView
from gpucheck.model import Finding, Severity, finding
from gpucheck.settings import Settings
from gpucheck.unit import Framework, InProcess, LayerRule, Unit

FIELD = "numpy_framework"
#: Set to make this unit's import fail (the test of a framework-missing that blocks only its own questions).
BREAK_ENV = "GPUCHECK_TEST_NUMPY_MISSING"


@dataclass(frozen=True)
class NumpyFacts:
    importable: bool
    version: str | None
    error: str | None
    #: Whether a 64x64 matmul agrees with the same product summed by hand.
    matmul_ok: bool | None


def read(settings: Settings, environment: Mapping[str, str | None]) -> NumpyFacts:
    try:
        if os.environ.get(BREAK_ENV):
            raise ImportError(f"No module named 'numpy' ({BREAK_ENV} is set)")
        import numpy as np
    except ImportError as exc:
        return NumpyFacts(False, None, str(exc), None)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64)), rng.standard_normal((64, 64))
    by_hand = np.array([[sum(a[i, k] * b[k, j] for k in range(64)) for j in range(64)] for i in range(64)])
    return NumpyFacts(True, str(np.__version__), None, bool(np.allclose(a @ b, by_hand)))


def _facts(facts: Facts) -> NumpyFacts | None:
    return cast("NumpyFacts | None", facts.unit(FIELD))


def framework_rules(facts: Facts, settings: Settings) -> list[Finding]:
    nf = _facts(facts)
    if nf is None or nf.importable:
        return []
    return [
        finding(
            "framework-missing",
            Severity.BLOCKER,
            summary="NumPy cannot be imported.",
            cause=f"import numpy failed: {nf.error}",
            remedy="pip install numpy",
            evidence={"error": nf.error},
        )
    ]


def placement_rules(facts: Facts, settings: Settings) -> list[Finding]:
    nf = _facts(facts)
    if nf is None or nf.matmul_ok is not False:
        return []
    return [
        finding(
            "numerical-mismatch",
            Severity.BLOCKER,
            summary="NumPy's matmul disagrees with the same product summed by hand.",
            cause="numpy's BLAS returned a wrong product.",
            remedy="Reinstall numpy.",
        )
    ]


def view(facts: Facts) -> FrameworkView | None:
    nf = _facts(facts)
    if nf is None:
        return None
    if not nf.importable:
        return FrameworkView("numpy", "NumPy", "NumPy: not importable", False, None, ())
    cf = facts.cuda.facts
    gpus = tuple(FrameworkGpu(f"GPU:{d.ordinal}", d.ordinal, d.name) for d in (cf.devices if cf is not None else ()))
    header = f"NumPy {nf.version} (answers on the CPU) sees {len(gpus)} GPU(s)"
    return FrameworkView("numpy", "NumPy", header, True, nf.version, gpus, {"numpy": nf.version})


FRAMEWORK = Framework(
    "numpy",
    "NumPy",
    "numpy",
    (
        Unit(
            "numpy",
            in_process=(InProcess(FIELD, "framework", read),),
            rules=(LayerRule("framework", framework_rules), LayerRule("placement", placement_rules)),
        ),
    ),
    view,
)
