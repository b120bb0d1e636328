"""The house (docs/ARCHITECTURE.md), read from the code with ``ast``: imports run downwards only, no two
modules import each other (no cycle at all), nothing imports a unit's internals but the unit itself and the
registry, session and report import no unit, checks import no rules, rules never read the environment,
pytest is imported only by the plugin-facing modules; and the registry agrees with the catalog and the
check files on disk."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from gpucheck import layers, registry
from gpucheck.blocking import layers_needed
from gpucheck.model import catalog

PACKAGE = Path(__file__).resolve().parent.parent / "gpucheck"

#: Every module of the package on its floor: a module may import from its own floor or below, never above.
#: A new module must be placed here (the test fails until it is).
FLOORS: dict[str, int] = {
    # 0: the shared floors: findings and the catalog, facts (the codec and the root), settings, the report
    # file, the child protocol, data, the layers as data
    "gpucheck": 0,
    "gpucheck.protocol": 0,
    "gpucheck.reportfile": 0,
    "gpucheck.settings": 0,
    "gpucheck.model": 0,
    "gpucheck.facts": 0,
    "gpucheck.pci": 0,
    "gpucheck.knowledge": 0,
    "gpucheck.jsonfile": 0,
    "gpucheck.inputfile": 0,
    "gpucheck.layers": 0,
    # 1: blocking over the needs graph (pure), the vocabulary of units, the child-process runner, the log
    # classifier
    "gpucheck.blocking": 1,
    "gpucheck.unit": 1,
    "gpucheck.isolation": 1,
    "gpucheck.logs": 1,
    # 2: the lower stack's probes and rules
    "gpucheck.probes": 2,
    "gpucheck.rules": 2,
    # 3: the units: the lower stack's (data), and a package each above it
    "gpucheck.stack": 3,
    "gpucheck.performance": 3,
    "gpucheck.cluster": 3,
    "gpucheck.records": 3,
    # the frameworks: their names on floor 0 (the settings check --gpucheck-framework against them); a unit each, a
    # package: its facts on 0, its probes, steps, rules and view on 2, the unit itself on 3, its checks on 8
    "gpucheck.frameworks": 0,
    "gpucheck.frameworks.tensorflow": 3,
    "gpucheck.frameworks.tensorflow.units": 3,
    "gpucheck.frameworks.tensorflow.facts": 0,
    "gpucheck.frameworks.tensorflow.view": 2,
    "gpucheck.frameworks.tensorflow.process": 2,
    "gpucheck.frameworks.tensorflow.imports": 2,
    "gpucheck.frameworks.tensorflow.collective": 3,
    "gpucheck.frameworks.tensorflow.child": 2,
    "gpucheck.frameworks.tensorflow.setup": 2,
    "gpucheck.frameworks.tensorflow.common": 2,
    "gpucheck.frameworks.tensorflow.framework": 2,
    "gpucheck.frameworks.tensorflow.placement": 2,
    "gpucheck.frameworks.tensorflow.training": 2,
    "gpucheck.frameworks.tensorflow.numerics": 2,
    "gpucheck.frameworks.tensorflow.xla": 2,
    "gpucheck.frameworks.tensorflow.multidevice": 2,
    "gpucheck.frameworks.tensorflow.memory": 2,
    "gpucheck.frameworks.tensorflow.libraries": 2,
    "gpucheck.frameworks.tensorflow.benchmarks": 3,
    "gpucheck.frameworks.tensorflow.rules": 2,
    "gpucheck.frameworks.tensorflow.checks_placement": 8,
    "gpucheck.frameworks.tensorflow.checks_memory": 8,
    "gpucheck.frameworks.tensorflow.checks_framework": 8,
    "gpucheck.frameworks.tensorflow.checks_libraries": 8,
    "gpucheck.frameworks.torch": 3,
    "gpucheck.frameworks.torch.units": 3,
    "gpucheck.frameworks.torch.facts": 0,
    "gpucheck.frameworks.torch.view": 2,
    "gpucheck.frameworks.torch.child": 2,
    "gpucheck.frameworks.torch.placement": 2,
    "gpucheck.frameworks.torch.fraction": 2,
    "gpucheck.frameworks.torch.process": 2,
    "gpucheck.frameworks.torch.rules": 2,
    "gpucheck.frameworks.torch.benchmarks": 3,
    "gpucheck.frameworks.torch.checks_torch": 8,
    "gpucheck.frameworks.torch.checks_torch_resources": 8,
    "gpucheck.frameworks.torch.checks_torch_placement": 8,
    "gpucheck.frameworks.torch.memory": 2,
    # 4: the registry of units
    "gpucheck.registry": 4,
    # 5: the diagnosis (probes run, rules applied); 6: its rendering and the commands' own modules
    "gpucheck.diagnosis": 5,
    "gpucheck.report": 6,
    "gpucheck.compare": 6,
    # gpucheck compare, a package by what it does: reading the files, the statistics, the verdicts, the
    # machines, the text/Markdown/JSON output, the plot; its __init__ is the command
    "gpucheck.compare.files": 6,
    "gpucheck.compare.stats": 6,
    "gpucheck.compare.verdicts": 6,
    "gpucheck.compare.machines": 6,
    "gpucheck.compare.render": 6,
    "gpucheck.compare.chart": 6,
    "gpucheck.merge": 6,
    "gpucheck.doctor": 6,
    "gpucheck.causepage": 6,
    # what a marked test needs and gets (pure), and the one diagnosis of an xdist run (its shared folder)
    "gpucheck.marker": 6,
    "gpucheck.shared": 6,
    # 7: pytest-facing: the session, the options; 8: the checks, the units' pytest sides, the entry points
    "gpucheck.session": 7,
    "gpucheck.options": 7,
    "gpucheck.checks": 8,
    "gpucheck.performance.plugin": 8,
    "gpucheck.performance.checks_performance": 8,
    "gpucheck.cluster.checks_cluster": 8,
    "gpucheck.records.checks_records": 8,
    "gpucheck.plugin": 8,
    "gpucheck.htmlreport": 8,
    # the suite side: the gpu marker, the fixtures, xdist's workers (registered on every run)
    "gpucheck.suite": 8,
    "gpucheck.cli": 8,
}
#: The units that are packages: nothing imports their modules but themselves and the registry.
#: The framework units: every package under ``gpucheck/frameworks/`` (found on disk, so a new one is one at once):
#: none imports another, and nothing outside one imports its modules.
FRAMEWORK_UNITS = tuple(
    f"gpucheck.frameworks.{init.parent.name}" for init in sorted(PACKAGE.glob("frameworks/*/__init__.py"))
)
UNIT_PACKAGES = ("gpucheck.performance", "gpucheck.cluster", "gpucheck.records", *FRAMEWORK_UNITS)
#: What a framework unit may import of the units it measures for: their contracts with whoever measures (the
#: facts it fills, the plan it is handed, how it times, the cluster configuration it runs), never their rules or
#: rendering.
CONTRACTS = (
    "gpucheck.performance.facts",
    "gpucheck.performance.plan",
    "gpucheck.performance.timing",
    "gpucheck.cluster.config",
    "gpucheck.cluster.facts",
    "gpucheck.cluster.collective",
)
#: Modules that may import pytest: the plugin and what it registers.
PYTEST_MODULES = (
    "gpucheck.plugin", "gpucheck.suite", "gpucheck.options", "gpucheck.session", "gpucheck.checks", "gpucheck.performance.plugin",
    "gpucheck.htmlreport", "gpucheck.performance.checks_", "gpucheck.cluster.checks_", "gpucheck.records.checks_",
    "gpucheck.frameworks.tensorflow.checks_", "gpucheck.frameworks.torch.checks_",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


PACKAGE_MODULES = set(modules())


def floor(name: str) -> int:
    best = max((k for k in FLOORS if name == k or name.startswith(k + ".")), key=len, default=None)
    assert best is not None, f"{name} has no floor in tests/test_house.py FLOORS: place it"
    return FLOORS[best]


def imports(name: str, tree: ast.Module) -> set[str]:
    """The gpucheck modules ``name`` imports (anywhere in it, function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "gpucheck"}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{name}: relative import (line {node.lineno}); the house uses absolute ones"
            base = node.module or ""
            if base.split(".")[0] != "gpucheck":
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in PACKAGE_MODULES else base)
    return {m for m in found if m != name}




def graph() -> dict[str, set[str]]:
    return {name: imports(name, tree) for name, tree in modules().items()}


def test_every_module_has_a_floor() -> None:
    for name in PACKAGE_MODULES:
        floor(name)


def test_no_import_from_a_floor_above() -> None:
    upward = [
        f"{name} (floor {floor(name)}) imports {dep} (floor {floor(dep)})"
        for name, deps in graph().items()
        for dep in deps
        if floor(dep) > floor(name)
    ]
    assert upward == []


def test_no_import_cycle() -> None:
    g = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(g.get(node, ())):
            if dep not in g:
                continue
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep] if dep in path else [*path, dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for name in sorted(g):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_checker_sees_imports_and_cycles() -> None:
    """The graph is not empty by accident: known edges are there."""
    g = graph()
    assert "gpucheck.protocol" in g["gpucheck.isolation"] and "gpucheck.protocol" in g["gpucheck.probes.child"]
    assert "gpucheck.registry" in g["gpucheck.diagnosis"] and "gpucheck.rules.common" in g["gpucheck.frameworks.tensorflow.rules.memory"]
    assert "gpucheck.performance" in g["gpucheck.registry"] and "gpucheck.cluster.config" in g["gpucheck.cluster"]
    # isolation and the probe child no longer import each other (they share gpucheck.protocol).
    assert "gpucheck.probes.child" not in g["gpucheck.isolation"]
    assert "gpucheck.isolation" not in g["gpucheck.probes.child"]


def _reads_environment(tree: ast.Module) -> list[str]:
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ("environ", "getenv", "environb", "putenv", "unsetenv"):
                hits.append(f"os.{node.attr} (line {node.lineno})")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            hits += [f"from os import {a.name}" for a in node.names if a.name in ("environ", "getenv")]
    return hits


def _is_rules(name: str) -> bool:
    return name.startswith("gpucheck.rules") or any(name == f"{u}.rules" for u in UNIT_PACKAGES)


def test_rules_never_read_the_environment() -> None:
    readers = {name: hits for name, tree in modules().items() if _is_rules(name) and (hits := _reads_environment(tree))}
    assert readers == {}
    assert _reads_environment(ast.parse("import os\nos.environ.get('X')")), "the check is looking"


def _in_unit(name: str) -> str | None:
    return next((u for u in UNIT_PACKAGES if name == u or name.startswith(u + ".")), None)


def test_nothing_imports_a_units_internals_but_the_unit_and_the_registry() -> None:
    wrong = [
        f"{name} imports {dep}"
        for name, deps in graph().items()
        for dep in deps
        if (unit := _in_unit(dep)) is not None
        and _in_unit(name) != unit
        and name != "gpucheck.registry"
        and not (_in_unit(name) in FRAMEWORK_UNITS and dep in CONTRACTS)
    ]
    assert wrong == []


def test_no_framework_unit_imports_another() -> None:
    assert "gpucheck.frameworks.tensorflow" in FRAMEWORK_UNITS
    wrong = [
        f"{name} imports {dep}"
        for name, deps in graph().items()
        for dep in deps
        if (mine := _in_unit(name)) in FRAMEWORK_UNITS and (theirs := _in_unit(dep)) in FRAMEWORK_UNITS and mine != theirs
    ]
    assert wrong == []


def test_session_and_report_import_no_unit() -> None:
    g = graph()
    units = ("gpucheck.stack", *UNIT_PACKAGES)
    for name in ("gpucheck.session", "gpucheck.report", "gpucheck.plugin", "gpucheck.diagnosis"):
        assert [d for d in g[name] if d.startswith(units)] == [], name


def test_checks_import_no_rules() -> None:
    """A check asks a question (gpucheck.blocking.asks) and asserts on the findings that answer it."""
    g = graph()
    checks = [n for n in g if n.startswith("gpucheck.checks.") or ".checks_" in n]
    assert len(checks) >= 7
    wrong = {n: sorted(d for d in g[n] if _is_rules(d) or d.startswith("gpucheck.facts")) for n in checks}
    assert {n: d for n, d in wrong.items() if d} == {}


def test_rules_import_no_probe() -> None:
    """Rules are pure functions of facts: they import facts, findings, settings, knowledge, other rules."""
    wrong = {n: sorted(d for d in deps if d.startswith("gpucheck.probes") or d == "gpucheck.isolation" or d.endswith(".probe"))
             for n, deps in graph().items() if _is_rules(n)}
    assert {n: d for n, d in wrong.items() if d} == {}


def test_pytest_only_in_the_plugin_facing_modules() -> None:
    importers = set()
    for name, tree in modules().items():
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )
            if any(n.split(".")[0] in ("pytest", "_pytest") for n in names):
                importers.add(name)
    assert {n for n in importers if not n.startswith(PYTEST_MODULES)} == set()
    assert "gpucheck.plugin" in importers  # the check is looking


def test_the_registry_is_the_catalog_order_and_a_graph_of_known_layers() -> None:
    names = [layer.name for layer in layers.LAYERS]
    assert tuple(names) == catalog().layers
    for i, layer in enumerate(layers.LAYERS):
        # needs point at layers lower in the registry: the graph has no cycle and the order is topological.
        assert all(names.index(n) < i for n in layer.needs), layer
    assert layers_needed("hardware") == frozenset()
    assert layers_needed("health") == {"visibility", "driver", "kernel", "hardware"}
    assert "framework" not in layers_needed("resources")
    # The cluster layer needs nothing below it as a whole (its configuration the environment, its peers the
    # network): on a CPU-only node the framework layer is blocked by no-nvidia-gpu, and its cluster still works.
    # Its collective needs TensorFlow itself, which its check asks for (checks_cluster.py).
    assert layers_needed("cluster") == frozenset()


def test_every_catalog_layer_and_cause_need_is_a_registered_layer() -> None:
    names = {layer.name for layer in layers.LAYERS}
    for cause in catalog().causes.values():
        assert cause.layer in names | {"run"}, cause
        assert cause.needs in names | {"run"}, cause


def test_check_files_are_the_registrys() -> None:
    on_disk = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("checks_*.py")}
    assert set(registry.check_files()) == on_disk


def test_every_unit_part_names_a_layer_and_every_layer_is_answered() -> None:
    names = {layer.name for layer in layers.LAYERS}
    answered = set().union(*(unit.layers for unit in registry.UNITS))
    assert answered <= names
    # health is answered by NVML's rules (listed at visibility) and by the records unit's kernel log.
    assert names == answered


@pytest.mark.parametrize("layer", [layer.name for layer in layers.LAYERS])
def test_blocking_follows_the_needs_graph(layer: str) -> None:
    """A broken layer blocks exactly the layers that need it, directly or through others."""
    from gpucheck.blocking import layer_states
    from gpucheck.model import Severity, finding

    cause = next(c for c in catalog().causes.values() if c.layer == layer)
    broken = finding(cause.id, Severity.BLOCKER, summary="s", cause="c", remedy="r")
    checked = frozenset(n.name for n in layers.LAYERS)
    states = {s.layer: s.state for s in layer_states((broken,), broken, checked)}
    assert states[layer] == "broken"
    for other in layers.LAYERS:
        if other.name != layer:
            blocks = layer in layers_needed(other.name) or cause.id in other.blocked_by_ids
            expected = "blocked" if blocks else "ok"
            assert states[other.name] == expected, (layer, other.name)


def test_children_run_only_named_probe_functions() -> None:
    """A child imports only ``gpucheck.probes.<module>:<function>``, never a private name or anything else."""
    from gpucheck.protocol import load_target

    assert callable(load_target("gpucheck.frameworks.tensorflow.placement:placement_step"))
    for bad in ("os:system", "gpucheck.frameworks.tensorflow.placement:__builtins__", "gpucheck.frameworks.tensorflow.placement:_err",
                "gpucheck.settings:resolve", "gpucheck.frameworks.tensorflow.placement:placement_step; rm -rf /",
                "gpucheck.frameworks.tensorflow.placement:no_such_function"):
        assert load_target(bad) is None, bad


def test_the_tensorflow_child_runs_the_steps_the_registry_lists() -> None:
    """Units register steps of the TensorFlow child (``Unit.steps``); the TensorFlow child gets them in
    registry order, and each step's facts come back as a probe outcome of its own."""
    from gpucheck.frameworks.tensorflow.units import TENSORFLOW_PROBE
    from gpucheck.settings import Settings

    steps = registry.steps(Settings())
    assert [s.key for s in steps] == [
        "tf_setup", "placement", "training_step", "numerics", "xla", "multi_device", "gpu_memory"
    ]
    probes = {p.name: p for p in registry.probes(Settings())}
    assert all(probes[s.key].within == TENSORFLOW_PROBE.name for s in steps)
    assert list(probes)[:2] == [TENSORFLOW_PROBE.name, "tf_setup"]  # the slowest start first
    assert registry.steps(Settings(framework="none")) == ()
    assert "placement" not in {p.name for p in registry.probes(Settings(framework="none"))}


def test_a_blocker_about_one_gpu_blocks_only_that_gpus_questions() -> None:
    """One lost GPU of eight: the seven others' per-GPU questions are answered; questions about no GPU in
    particular, and that GPU's own, are blocked."""
    from gpucheck.blocking import Question, decide, layer_states, root_cause
    from gpucheck.diagnosis import Result
    from gpucheck.model import Severity, finding, verdict

    lost = finding("gpu-lost", Severity.BLOCKER, summary="s", cause="c", remedy="r", subject="GPU-5")
    ecc = finding("ecc-errors", Severity.BLOCKER, summary="s", cause="c", remedy="r", subject="GPU-2")
    findings = (lost, ecc)
    rc = root_cause(findings)
    assert rc is lost
    every = frozenset(layer.name for layer in layers.LAYERS)
    result = Result(None, {}, findings, rc, verdict(findings), layer_states(findings, rc, every), True)
    health = ("ecc-errors",)
    assert decide(result, Question("health", health, subject="GPU-0")).outcome == "passed"
    assert decide(result, Question("health", health, subject="GPU-2")).outcome == "failed"
    blocked = decide(result, Question("health", health, subject="GPU-5"))
    assert blocked.outcome == "skipped" and blocked.blocked_by is lost
    assert decide(result, Question("placement", ("placement-failed",))).blocked_by is lost
    # The ECC fault on GPU 2 is not a consequence of GPU 5's loss: the report names it.
    assert result.cause_blocked_by(ecc) is None and result.cause_blocked_by(lost) is None


def test_probe_children_know_their_siblings() -> None:
    """NVML lists every process that holds a GPU, gpucheck's own TensorFlow children too: a child tells its
    siblings (same parent) from other processes, so they are never named as "other processes"."""
    import subprocess
    import sys

    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        code = f"from gpucheck.protocol import is_sibling; print(is_sibling({sibling.pid}), is_sibling({os.getpid()}), is_sibling(1))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
        assert out.stdout.split() == ["True", "False", "False"], out
    finally:
        sibling.kill()
        sibling.wait()


def test_every_probe_target_the_units_name_loads() -> None:
    """Each child probe, TensorFlow step and the cluster's per-task child names a function a child can load:
    a target left behind by a move (``gpucheck.probes.cluster`` after the cluster's code went to its
    package) crashes every local:N task."""
    from gpucheck.cluster.config import PROBE_TARGET
    from gpucheck.protocol import load_target

    targets = {PROBE_TARGET}
    for unit in registry.UNITS:
        targets |= {p.target for p in (*unit.probes, *unit.after)} | {s.target for s in unit.steps}
    assert len(targets) >= 10
    for target in sorted(targets):
        assert callable(load_target(target)), target



def test_every_benchmark_kind_has_its_method() -> None:
    """Each framework's benchmark child has a method for every kind its unit says it measures (TensorFlow: every kind
    the plan can name), and nothing else."""
    from gpucheck.frameworks.tensorflow import benchmarks as probe
    from gpucheck.frameworks.torch import benchmarks as torch_probe
    from gpucheck.performance import plan

    assert set(probe.KIND_METHODS) == set(plan.KINDS)
    torch = registry.framework_named("torch")
    assert torch is not None and torch.benchmarks is not None
    assert set(torch_probe.KIND_METHODS) == {b.split(":")[0] for b in torch.benchmarks} < set(plan.KINDS)
