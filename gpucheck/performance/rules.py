"""Rules of the performance layer: figures the measuring framework's benchmarks measured (TensorFlow's
``gpucheck.frameworks.tensorflow.benchmarks``, PyTorch's ``gpucheck.frameworks.torch.benchmarks``) against what the
GPU model can do (``data/gpu_performance.json``), and multi-GPU scaling.

- ``gpu-underperforming``: a GPU's matmul TFLOP/s for a dtype or its device-memory copy bandwidth (against
  its memory bandwidth) below ``--gpucheck-min-share`` of the expected figure. Host↔device copies are shown
  beside their model's PCIe link, not judged: TensorFlow cannot time a bare pinned copy (PyTorch's pinned copy is
  bare, judged the same way, so that the two frameworks' figures mean the same);
- ``scaling-inefficient``: training on n ≥ 2 physical GPUs keeps less than ``--gpucheck-min-scaling`` of
  linear speed-up, where one GPU's step is long enough to be the GPU's work (not launch-bound). Logical
  CPU devices share the CPU's cores: their figures are reported, never judged;
- ``benchmark-failed``: a benchmark raised, or the benchmark process crashed or overran.

Each names the lower-layer evidence that explains it where the diagnosis found any (clocks throttled, the
PCIe link below its maximum, no peer-to-peer access, NVLinks down or not registered with the fabric, other
processes on the GPU), and otherwise the likely cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucheck.facts import Facts, FrameworkView, gpu_index
from gpucheck.model import Finding, Severity, finding
from gpucheck.performance.expected import expected_for, pcie_gbps
from gpucheck.performance.facts import BenchmarkRun, PerformanceFacts, outcome, performance
from gpucheck.rules import devicemap, nvml
from gpucheck.settings import Settings

#: Lower-layer findings that can explain a figure, by what the figure measures: work on one GPU (its
#: clocks, its memory, other processes on it), or work between GPUs and the host (links, peer access).
ON_THE_GPU = ("clocks-throttled", "ecc-errors", "gpu-memory-exhausted", "memory-growth-advised")
BETWEEN_DEVICES = ("pcie-link-degraded", "p2p-unavailable", "p2p-unavailable-note", "nvlink-degraded")
#: A one-device training step shorter than this is bound by launching kernels, not by the GPU: its
#: multi-GPU scaling measures TensorFlow's dispatch, and is reported, not judged.
MIN_JUDGED_STEP_S = 0.005


@dataclass(frozen=True)
class Expectation:
    """What a benchmark's headline figure should reach on its GPU model."""

    figure: str
    unit: str
    measured: float
    expected: float
    model: str
    basis: str
    sources: tuple[str, ...]
    #: Whether a figure below its share is a finding, or the expectation is only shown beside it.
    judged: bool = True

    @property
    def share(self) -> float:
        return self.measured / self.expected


def gpu_index_of(devices: tuple[str, ...], physical: bool = True) -> int | None:
    """The framework's GPU a single-GPU benchmark runs on (``("/GPU:1",)`` -> 1)."""
    if len(devices) != 1 or not physical:
        return None
    return gpu_index(devices[0])


def _measured_by(facts: Facts) -> FrameworkView | None:
    """The framework whose benchmarks these are: the one their facts name, else (a report written before PyTorch
    measured) the first diagnosed."""
    pf = performance(facts)
    if pf is not None and pf.framework is not None:
        return facts.frameworks.get(pf.framework)
    return next(iter(facts.frameworks.values()), None)


def _device_of(view: FrameworkView | None, index: int) -> str | None:
    """The framework's own name of its GPU number ``index`` (TensorFlow's ``GPU:1``, torch's ``cuda:1``)."""
    return view.gpus[index].device if view is not None and 0 <= index < len(view.gpus) else None


def subject_of(facts: Facts, index: int) -> str:
    """The GPU as findings name it (``GPU-<nvidia-smi index>``), joined on the PCI bus id; the framework's own
    index where NVML cannot say."""
    view = _measured_by(facts)
    device = _device_of(view, index)
    for row in devicemap.device_map(facts):
        if view is not None and device is not None and row.frameworks.get(view.name) == device and row.nvml_index is not None:
            return f"GPU-{row.nvml_index}"
    return f"GPU-{index}"


def gpu_name(facts: Facts, index: int) -> str | None:
    """The GPU's model name: NVML's, else the framework's device details."""
    view = _measured_by(facts)
    if view is None:
        return None
    device = _device_of(view, index)
    for row in devicemap.device_map(facts):
        if device is not None and row.frameworks.get(view.name) == device and row.name:
            return row.name
    return view.gpus[index].name if index < len(view.gpus) else None


def expectation(facts: Facts, run: BenchmarkRun) -> Expectation | None:
    """The expected figure for a benchmark on one GPU of a known model, or None (a CPU, an unknown model, a
    benchmark without an expectation: launch latency, conv, matpow, all-reduce)."""
    index = gpu_index_of(run.devices, run.physical)
    if index is None or run.error is not None:
        return None
    exp = expected_for(gpu_name(facts, index))
    if exp is None:
        return None
    info = run.extra_info
    dtype = str(info.get("dtype") or "")
    if run.kind == "matmul" and dtype in exp.tflops and isinstance(info.get("tflops"), float):
        return Expectation(
            "tflops",
            "TFLOP/s",
            info["tflops"],
            exp.tflops[dtype],
            exp.model,
            f"dense {dtype} peak of the {exp.model}",
            exp.sources,
        )
    direction = info.get("direction")
    link = pcie_gbps(exp.pcie_generation, exp.pcie_width)
    if (
        run.kind == "copy"
        and direction in ("h2d-pinned", "h2d-pageable", "d2h")
        and link
        and isinstance(info.get("gbps"), float)
    ):
        # Shown, not judged: TensorFlow has no way to time a bare pinned copy (its figures include a host-side
        # copy or pageable memory), so they are lower bounds of what the link can do.
        basis = f"PCIe Gen{exp.pcie_generation} x{exp.pcie_width}, one direction"
        return Expectation("gbps", "GB/s", info["gbps"], link, exp.model, basis, exp.sources, judged=False)
    if run.kind == "copy" and direction == "d2d" and exp.memory_gbps and isinstance(info.get("memory_gbps"), float):
        basis = "memory bandwidth (a copy reads and writes each byte)"
        return Expectation("memory_gbps", "GB/s", info["memory_gbps"], exp.memory_gbps, exp.model, basis, exp.sources)
    return None


def performance_rules(facts: Facts, settings: Settings) -> list[Finding]:
    pf = performance(facts)
    out: list[Finding] = []
    if outcome(facts) is not None and (pf is None or not pf.finished or pf.setup_error):
        out.append(_process_failed(facts, pf))
    if pf is None:
        return out
    below = _Below(facts, settings)
    for run in pf.benchmarks:
        if run.error is not None:
            out.append(_benchmark_failed(facts, run))
            continue
        exp = expectation(facts, run)
        if exp is not None and exp.judged and exp.share < settings.min_share:
            out.append(_underperforming(facts, run, exp, settings, below))
    out += _scaling(facts, pf, settings, below)
    return out


class _Below:
    """The lower layers' findings that may explain a figure (NVML's rules over the same facts), worked out
    only when a figure needs explaining."""

    def __init__(self, facts: Facts, settings: Settings) -> None:
        self._facts, self._settings = facts, settings
        self._findings: list[Finding] | None = None

    def findings(self) -> list[Finding]:
        if self._findings is None:
            self._findings = nvml.nvml_rules(self._facts, self._settings)
        return self._findings


def _explaining(below: _Below, subjects: set[str], ids: tuple[str, ...]) -> list[dict[str, Any]]:
    """The lower-layer findings among ``ids`` about these GPUs (or about several of them: peer access)."""
    return [
        {"id": f.id, "subject": f.subject, "summary": f.summary}
        for f in below.findings()
        if f.id in ids and (f.subject in subjects or (f.subject is None and len(subjects) > 1))
    ]


def _underperforming(
    facts: Facts, run: BenchmarkRun, exp: Expectation, settings: Settings, below: _Below
) -> Finding:
    index = gpu_index_of(run.devices, run.physical)
    subject = subject_of(facts, index if index is not None else 0)
    on_the_gpu = run.kind != "copy" or run.extra_info.get("direction") == "d2d"
    explained = _explaining(below, {subject}, ON_THE_GPU if on_the_gpu else BETWEEN_DEVICES)
    if explained:
        why = "What the diagnosis found on this GPU explains it: " + "; ".join(e["summary"] for e in explained)
        remedy = "Mend what is named above (its own finding says how), then run `pytest --gpucheck --gpucheck-benchmarks` again."
    else:
        why = (
            "Nothing the diagnosis found explains it (no throttling, no other process on the GPU). The likely "
            "causes: clocks held low by a power limit or application clocks, or another job that started "
            "after the diagnosis."
        )
        remedy = (
            "Compare `nvidia-smi -q -d CLOCK,POWER,PERFORMANCE` during the run with the GPU's maximum, look for "
            "other processes with `nvidia-smi`, and run the benchmarks again on an idle GPU."
        )
    return finding(
        "gpu-underperforming",
        Severity.DEGRADED,
        summary=(
            f"{subject} ({exp.model}) reaches {exp.measured:.3g} {exp.unit} in {run.name}, {exp.share:.0%} of the "
            f"{exp.expected:.3g} {exp.unit} it is built for (at least {settings.min_share:.0%} expected)."
        ),
        cause=f"Measured against the {exp.basis}. {why}",
        remedy=remedy,
        evidence={
            "benchmark": run.name,
            "figure": exp.figure,
            "measured": exp.measured,
            "expected": exp.expected,
            "share_of_expected": exp.share,
            "min_share": settings.min_share,
            "model": exp.model,
            "sources": list(exp.sources),
            "explained_by": explained,
        },
        subject=subject,
    )


def _scaling(facts: Facts, pf: PerformanceFacts, settings: Settings, below: _Below) -> list[Finding]:
    out = []
    for method in ("towers", "mirrored"):
        runs = [
            r
            for r in pf.benchmarks
            if r.kind == "scaling" and r.physical and r.error is None and r.extra_info.get("method") == method
        ]
        one = next((r for r in runs if len(r.devices) == 1), None)
        step = one.extra_info.get("step_s") if one is not None else None
        if not isinstance(step, float) or step < MIN_JUDGED_STEP_S:
            continue  # launch-bound on one GPU (or not measured): its scaling is not the GPUs'
        poor = [
            r
            for r in runs
            if len(r.devices) >= 2
            and isinstance(r.extra_info.get("efficiency"), float)
            and r.extra_info["efficiency"] < settings.min_scaling
        ]
        if not poor:
            continue
        worst = min(poor, key=lambda r: float(r.extra_info["efficiency"]))
        subjects = {subject_of(facts, i) for i in range(len(worst.devices))}
        explained = _explaining(below, subjects, BETWEEN_DEVICES + ON_THE_GPU)
        per_device = worst.extra_info.get("per_device_batch")
        if explained:
            why = "What the diagnosis found explains it: " + "; ".join(e["summary"] for e in explained)
        else:
            why = (
                f"Nothing the diagnosis found explains it. The likely causes: a per-device batch of {per_device} "
                "too small for the step to outweigh the gradient exchange, the input pipeline bound on the CPU, "
                "or the GPUs' work issued one after the other by one host thread."
            )
        figures = {
            r.param: {"speedup": r.extra_info.get("speedup"), "efficiency": r.extra_info.get("efficiency")}
            for r in runs
        }
        out.append(
            finding(
                "scaling-inefficient",
                Severity.DEGRADED,
                summary=(
                    f"Training on {len(worst.devices)} GPUs ({method}) runs {float(worst.extra_info['speedup']):.2f}× "
                    f"as fast as on one: {float(worst.extra_info['efficiency']):.0%} efficiency "
                    f"(at least {settings.min_scaling:.0%} expected)."
                ),
                cause=f"The same training step, the per-device batch fixed at {per_device}. {why}",
                remedy=(
                    "Mend what is named above first. Otherwise raise the per-device batch, feed the input with "
                    "tf.data prefetching on the GPUs, and check `nvidia-smi topo -m` for how the GPUs connect."
                ),
                evidence={
                    "benchmarks": [r.name for r in poor],
                    "method": method,
                    "per_device_batch": per_device,
                    "by_device_count": figures,
                    "min_scaling": settings.min_scaling,
                    "explained_by": explained,
                },
            )
        )
    return out


def _benchmark_failed(facts: Facts, run: BenchmarkRun) -> Finding:
    index = gpu_index_of(run.devices, run.physical)
    view = _measured_by(facts)
    return finding(
        "benchmark-failed",
        Severity.DEGRADED,
        summary=f"The benchmark {run.name} could not run: {(run.error or '')[:300]}",
        cause=(
            f"{view.title if view is not None else 'The framework'} raised while running it on "
            f"{', '.join(d.lstrip('/') for d in run.devices)}; the other "
            "benchmarks ran."
        ),
        remedy=(
            "Read the error: an all-reduce on GPUs needs NCCL (the nvidia-nccl wheel that tensorflow[and-cuda] and "
            "torch's CUDA wheels bring); out of memory means another process holds the GPU's memory."
        ),
        evidence={"benchmark": run.name, "devices": list(run.devices), "error": run.error},
        subject=subject_of(facts, index) if index is not None else None,
    )


def _process_failed(facts: Facts, pf: PerformanceFacts | None) -> Finding:
    found = outcome(facts)
    assert found is not None
    exit_ = found.exit
    if pf is not None and pf.setup_error:
        what = f"it could not set up its devices: {pf.setup_error}"
    elif exit_.status == "timeout" or exit_.returncode == 124:
        what = f"it was stopped at its time limit while in {exit_.last_stage or 'its first step'}"
    else:
        what = f"it ended ({exit_.status}, {exit_.signal or exit_.returncode}) while in {exit_.last_stage or 'its first step'}"
    done = len(pf.benchmarks) if pf is not None else 0
    return finding(
        "benchmark-failed",
        Severity.DEGRADED,
        summary=f"The benchmark process did not finish: {what}.",
        cause=f"{done} benchmark(s) were measured before it ended; the others were not.",
        remedy=(
            "A benchmark that hangs or crashes the framework on a GPU that passed every check below is worth a bug "
            "report with this evidence; raise --gpucheck-timeout if it was only slow."
        ),
        evidence={
            "status": exit_.status,
            "last_stage": exit_.last_stage,
            "stderr_tail": list(exit_.stderr_tail[-20:]),
            **({"benchmarks": [n for n in pf.planned if n not in {r.name for r in pf.benchmarks}]} if pf else {}),
        },
    )
