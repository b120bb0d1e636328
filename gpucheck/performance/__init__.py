"""The performance unit (``--gpucheck-benchmarks``): how well TensorFlow uses each device, as
pytest-benchmark benchmarks measured in a TensorFlow process of their own after the diagnosis; the
expected figures per GPU model, the rules, checks, rendering and the pytest side. ``UNIT`` is what the
registry lists."""

from __future__ import annotations

from gpucheck.performance import report, rules
from gpucheck.performance.facts import FIELD, PerformanceFacts
from gpucheck.unit import CheckFile, ChildProbe, LayerRule, Unit

#: The benchmarks, in a TensorFlow process of their own, after the diagnosis.
PERFORMANCE_PROBE = ChildProbe(
    "performance", "performance", "gpucheck.performance.probe:probe_performance", PerformanceFacts, FIELD
)

UNIT = Unit(
    "performance",
    after=(PERFORMANCE_PROBE,),
    rules=(LayerRule("performance", rules.performance_rules),),
    checks=(CheckFile("performance", "performance/checks_performance.py"),),
    summary=report.performance_lines,
    figures=report.figures,
    figures_text=report.figures_text,
    pytest_plugin="gpucheck.performance.plugin:BenchmarkPlugin",
)
