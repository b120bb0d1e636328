"""The performance unit in the terminal summary and in ``gpucheck merge``'s table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucheck.facts import Facts
from gpucheck.jsonfile import as_list, dig, number
from gpucheck.performance.facts import performance
from gpucheck.performance.rules import expectation

#: The headline figure of each kind of benchmark (``extra_info`` key, unit, format).
HEADLINE = {
    "matmul": ("tflops", "TFLOP/s"),
    "matpow": ("tflops", "TFLOP/s"),
    "matpow_fallback": ("slowdown", ""),
    "copy": ("gbps", "GB/s"),
    "conv": ("tflops", "TFLOP/s"),
    "launch": ("latency_us", "us per op"),
    "allreduce": ("busbw_gbps", "GB/s bus bandwidth"),
    "scaling": ("samples_per_s", "samples/s"),
}


def performance_lines(facts: Facts) -> list[str]:
    """The benchmarks' headline figures (``--gpucheck-benchmarks``), with their GPU model's expectation."""
    pf = performance(facts)
    if pf is None or not pf.benchmarks:
        return []
    lines = ["", "performance (pytest-benchmark's extra_info has every figure):"]
    width = max(len(r.name) for r in pf.benchmarks)
    for run in pf.benchmarks:
        if run.error is not None:
            lines.append(f"  {run.name:<{width}}  not measured: {run.error[:100]}")
            continue
        key, unit = HEADLINE.get(run.kind, ("", ""))
        value = run.extra_info.get(key)
        text = f"{value:.3g} {unit}" if isinstance(value, float) else "-"
        if run.kind == "scaling" and isinstance(value, float):
            text = f"{value:,.0f} {unit}"
        if run.kind == "matpow_fallback" and isinstance(value, float):
            text = f"ran on {run.extra_info.get('device')}: {value:.2f}x the time of {run.extra_info.get('compared_with')}"
        if run.kind == "scaling" and isinstance(run.extra_info.get("efficiency"), float):
            text += f", {run.extra_info['efficiency']:.0%} efficiency"
            if not run.physical:
                text += " (logical devices: not judged)"
        exp = expectation(facts, run)
        if exp is not None:
            text += f" ({exp.share:.0%} of the {exp.model}'s {exp.expected:.3g}{'' if exp.judged else ', not judged'})"
        lines.append(f"  {run.name:<{width}}  {text}")
    return lines


def figures(facts: Any) -> dict[str, Any]:
    """The best matmul of the run (TFLOP/s, and its device), from a report's facts JSON (any shape)."""
    best: tuple[float, str] | None = None
    for b in as_list(dig(facts, "performance", "facts", "benchmarks")):
        tflops = number(dig(b, "extra_info", "tflops")) if isinstance(b, dict) and b.get("kind") == "matmul" else None
        if tflops is not None and (best is None or tflops > best[0]):
            best = (tflops, str(dig(b, "extra_info", "device") or ""))
    if best is None:
        return {}
    return {"matmul_tflops": round(best[0], 3), "matmul_device": best[1]}


def figures_text(figures: Mapping[str, Any]) -> list[str]:
    if "matmul_tflops" not in figures:
        return []
    return [f"matmul {figures['matmul_tflops']:.3g} TFLOP/s ({figures.get('matmul_device') or '?'})"]
