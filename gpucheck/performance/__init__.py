"""The performance unit (``--gpucheck-benchmarks``): how well a framework uses each device, as pytest-benchmark
benchmarks measured after the diagnosis in a process of the framework's own (the framework unit registers that
probe); the expected figures per GPU model, the rules, checks, rendering and the pytest side. ``UNIT`` is what the
registry lists."""

from __future__ import annotations

from gpucheck.performance import report, rules
from gpucheck.unit import CheckFile, LayerRule, Unit

UNIT = Unit(
    "performance",
    rules=(LayerRule("performance", rules.performance_rules),),
    checks=(CheckFile("performance", "performance/checks_performance.py"),),
    summary=report.performance_lines,
    figures=report.figures,
    figures_text=report.figures_text,
    pytest_plugin="gpucheck.performance.plugin:BenchmarkPlugin",
)
