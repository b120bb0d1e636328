"""The blocking contract (``gpucheck/blocking.py``) as pure functions of findings: each test states a promise of
docs/ARCHITECTURE.md ("Layers and units") or ../shared/DESIGN.md ("The acceleration stack", "Data flow"), and
each was written against a mutant that ``tox -e mutation`` found alive (docs/mutation.md lists them).

The findings are built with ``model.finding``, so their layers and ``needs`` are the real catalog's; the
questions are the real checks' (``@asks``) where one exists; the diagnosis is ``diagnosis.Result`` put
together as ``Diagnosis._judge`` puts it together (root cause, verdict, layer states).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gpucheck import registry
from gpucheck.blocking import (
    FRAMEWORK_BROKEN,
    QUESTION_ATTRIBUTE,
    Decision,
    LayerState,
    Question,
    asks,
    decide,
    independent_of,
    layer_states,
    layers_needed,
    layers_needed_by_cause,
    named_root_cause,
    root_cause,
    unchecked_key,
)
from gpucheck.diagnosis import Result
from gpucheck.layers import LAYERS, by_name
from gpucheck.model import RUN_LAYER, Finding, Severity, finding, verdict
from gpucheck.settings import Settings
from tests.contracts import question_of
from tests.test_torch_rules import machine

EVERY = frozenset(layer.name for layer in LAYERS)
BLOCKER, DEGRADED, INFO = Severity.BLOCKER, Severity.DEGRADED, Severity.INFO
LOWER = ("hardware", "kernel", "driver", "visibility")
STACK = (*LOWER, "compatibility", "libraries")


def make(cid: str, severity: Severity = BLOCKER, subject: str | None = None, **evidence: Any) -> Finding:
    return finding(cid, severity, summary=f"{cid} summary", cause="c", remedy="r", evidence=evidence, subject=subject)


def diagnose(*findings: Finding, checked: frozenset[str] = EVERY, unchecked: Mapping[str, str] | None = None) -> Result:
    """A diagnosis of these findings, judged as ``Diagnosis._judge`` judges one."""
    rc = root_cause(findings)
    return Result(None, {}, findings, rc, verdict(findings), layer_states(findings, rc, checked), True, unchecked or {})


def states(result: Result) -> dict[str, tuple[str, tuple[str, ...], str | None]]:
    return {s.layer: (s.state, s.finding_ids, s.blocked_by) for s in result.layers}


# --- the needs graph -----------------------------------------------------------------------------------


def test_the_needs_graph_is_the_one_architecture_draws() -> None:
    """ARCHITECTURE.md: hardware <- kernel <- driver <- visibility <- compatibility <- libraries <- framework <-
    placement; visibility <- resources, health; framework, resources, health <- performance; cluster needs nothing."""
    assert layers_needed("hardware") == frozenset()
    chain = ("hardware", "kernel", "driver", "visibility", "compatibility", "libraries", "framework", "placement")
    for i, layer in enumerate(chain):
        assert layers_needed(layer) == frozenset(chain[:i]), layer
    assert layers_needed("resources") == layers_needed("health") == frozenset(LOWER)
    assert layers_needed("performance") == frozenset((*STACK, "framework", "resources", "health"))
    assert layers_needed("cluster") == layers_needed(RUN_LAYER) == frozenset()


def test_a_cause_rests_on_what_the_catalog_says_its_evidence_needs() -> None:
    """The catalog's ``needs``: memory-config-failed is a resource that needs TensorFlow; an NVLink fault read from
    the kernel log (Xid 74) needs only the kernel; a cause of the catalog's own layer rests on what its layer needs,
    never on itself; an id this catalog lacks (a newer gpucheck's report, read by merge) on its layer's needs."""
    assert layers_needed_by_cause("memory-config-failed", "resources") == frozenset((*STACK, "framework"))
    assert layers_needed_by_cause("nvlink-degraded", "health") == frozenset({"hardware", "kernel"})
    assert layers_needed_by_cause("ecc-errors", "health") == frozenset(LOWER)
    assert layers_needed_by_cause("libcuda-missing", "driver") == frozenset({"hardware", "kernel"})
    assert layers_needed_by_cause("a-cause-of-gpucheck-9", "placement") == layers_needed("placement")


# --- the root cause -------------------------------------------------------------------------------------


def test_the_root_cause_is_the_blocker_of_the_lowest_layer() -> None:
    """DESIGN.md: the lowest broken layer is the root cause (the first in rule order on a tie); degraded faults
    and notes are none; a run that could not diagnose (the run pseudo layer) lies below every layer."""
    libcuda, mismatch = make("libcuda-missing"), make("driver-library-mismatch")
    placement, cpu_only, ecc = make("placement-failed"), make("framework-cpu-only"), make("ecc-errors", DEGRADED)
    assert root_cause([placement, ecc, libcuda, cpu_only]) is libcuda
    assert root_cause([cpu_only, mismatch, placement, libcuda]) is mismatch
    assert root_cause([placement, libcuda, mismatch]) is libcuda
    assert root_cause([ecc, make("xid-recorded", INFO)]) is None and root_cause([]) is None
    incomplete = make("diagnosis-incomplete")
    assert root_cause([libcuda, incomplete, make("driver-not-loaded")]) is incomplete


def test_a_degraded_verdict_names_its_lowest_degraded_finding_as_root_cause() -> None:
    """DESIGN.md, the report contract: root_cause is null exactly when the verdict is accelerated; for degraded it is
    the lowest degraded finding, by the same ordering as blockers (layer, then rule order); a blocker wins always."""
    nvml, pcie0, pcie1 = (make("nvml-missing", DEGRADED), make("pcie-link-degraded", DEGRADED, subject="GPU-0"),
                          make("pcie-link-degraded", DEGRADED, subject="GPU-1"))
    note, libcuda = make("xid-recorded", INFO), make("libcuda-missing")
    assert named_root_cause([pcie0, note, nvml, pcie1]) is nvml
    assert named_root_cause([pcie1, pcie0]) is pcie1
    assert named_root_cause([pcie0, libcuda]) is libcuda
    assert named_root_cause([note]) is None and named_root_cause([]) is None
    for findings in ([pcie0, note, nvml], [note], [libcuda, pcie0]):
        rc, v = named_root_cause(findings), verdict(findings)
        assert (rc is None) == (v == "accelerated")
        assert rc is None or rc.severity is (BLOCKER if v == "not-accelerated" else DEGRADED)
    # A degraded root cause blocks nothing: the question of its neighbour is its own.
    result = diagnose(pcie0, make("clocks-throttled", DEGRADED, subject="GPU-1"))
    assert result.cause_blocked_by(result.findings[1]) is None
    assert {s.state for s in result.layers if s.layer != "health"} == {"ok"}


# --- layer states -------------------------------------------------------------------------------------


def test_each_layer_is_broken_blocked_degraded_ok_or_not_checked() -> None:
    """TensorFlow is a CPU build (framework broken): placement and performance, which need it, are blocked by it;
    memory-config-failed, whose evidence needs TensorFlow, leaves resources blocked by it (not broken); NVML's
    health reading does not need TensorFlow, so ECC errors leave health degraded; a note is no fault; a layer
    this run does not check is "not checked" whatever blocks it."""
    cpu_only, memory = make("framework-cpu-only"), make("memory-config-failed")
    ecc, note = make("ecc-errors", DEGRADED, subject="GPU-0"), make("xid-recorded", INFO)
    result = diagnose(note, cpu_only, memory, ecc, make("ecc-errors", DEGRADED, subject="GPU-1"),
                      checked=EVERY - {"cluster"})
    assert result.root_cause is cpu_only
    assert states(result) == {
        **{layer: ("ok", (), None) for layer in STACK},
        "framework": ("broken", ("framework-cpu-only",), None),
        "placement": ("blocked", (), "framework-cpu-only"),
        "resources": ("blocked", ("memory-config-failed",), "framework-cpu-only"),
        "health": ("degraded", ("ecc-errors",), None),
        "performance": ("blocked", (), "framework-cpu-only"),
        "cluster": ("not checked", (), None),
    }
    assert [s.layer for s in result.layers] == [layer.name for layer in LAYERS]
    assert all(isinstance(s, LayerState) for s in result.layers)


def test_performance_is_blocked_by_what_keeps_ops_off_the_gpu_and_nothing_else_above_it() -> None:
    """ARCHITECTURE.md: performance is blocked by placement-failed and soft-placement-fallback, which it does not
    need as a whole (a GPU that computes wrong is still timed: numerical-mismatch blocks nothing above it)."""
    for cid, subject in (("placement-failed", "placement step"), ("soft-placement-fallback", "/GPU:0")):
        blocker = make(cid, subject=subject)
        got = states(diagnose(blocker))
        assert got["placement"] == ("broken", (cid,), None)
        assert got["performance"] == ("blocked", (), cid)
        assert got["resources"] == got["health"] == got["cluster"] == ("ok", (), None)
    wrong = states(diagnose(make("numerical-mismatch")))
    assert wrong["placement"] == ("broken", ("numerical-mismatch",), None) and wrong["performance"] == ("ok", (), None)
    # A degraded placement fault blocks nothing.
    slow = states(diagnose(make("placement-failed", DEGRADED, subject="placement step")))
    assert slow["placement"] == ("degraded", ("placement-failed",), None) and slow["performance"] == ("ok", (), None)


def test_a_layer_with_a_fault_is_broken_or_degraded_and_a_healthy_one_ok() -> None:
    degraded = states(diagnose(make("pcie-link-degraded", DEGRADED, subject="GPU-0")))
    assert degraded["health"] == ("degraded", ("pcie-link-degraded",), None)
    assert {v for k, v in degraded.items() if k != "health"} == {("ok", (), None)}
    assert set(states(diagnose()).values()) == {("ok", (), None)}


def test_a_run_that_could_not_diagnose_leaves_every_layer_not_checked() -> None:
    """diagnosis-incomplete (the run pseudo layer): nothing was looked at, whatever the rules found before the
    run stopped; each layer is still listed with the faults found on it."""
    libcuda, incomplete = make("libcuda-missing"), make("diagnosis-incomplete")
    result = diagnose(libcuda, incomplete)
    assert result.root_cause is incomplete
    assert states(result) == {
        layer.name: ("not checked", ("libcuda-missing",) if layer.name == "driver" else (), None) for layer in LAYERS
    }


# --- consequences and independence ------------------------------------------------------------------------


def test_a_fault_is_a_consequence_only_of_a_broken_layer_its_evidence_needs() -> None:
    """The report's ``blocked_by`` of a finding: memory-config-failed under a CPU build of TensorFlow is its
    consequence; ECC errors on GPU 2 are no consequence of GPU 5's loss, nor of a broken TensorFlow; an Xid
    in the kernel log is no consequence of a missing libcuda (it needs only the kernel)."""
    cpu_only, memory = make("framework-cpu-only"), make("memory-config-failed")
    lost, ecc = make("gpu-lost", subject="GPU-5"), make("ecc-errors", subject="GPU-2")
    libcuda, xid = make("libcuda-missing"), make("xid-application-fault")
    assert diagnose(cpu_only, memory).cause_blocked_by(memory) is cpu_only
    assert diagnose(lost, ecc).cause_blocked_by(ecc) is None
    assert diagnose(lost, ecc).cause_blocked_by(lost) is None
    throttled = make("clocks-throttled", DEGRADED, subject="GPU-5")
    assert diagnose(lost, throttled).cause_blocked_by(throttled) is lost
    assert diagnose(cpu_only, ecc).cause_blocked_by(ecc) is None
    assert diagnose(libcuda, xid).cause_blocked_by(xid) is None
    module = make("driver-not-loaded")
    assert diagnose(module, xid).cause_blocked_by(xid) is module


def test_independent_of_the_root_cause_means_above_it_and_not_resting_on_it() -> None:
    """README "Checks": a finding whose layer does not need the root cause's layer is marked
    ``independent_of_root_cause``; it lies above the root cause. Nothing is independent of a run that could
    not diagnose (nothing was looked at), and a second fault of the root cause's own layer is not either."""
    cpu_only, libcuda = make("framework-cpu-only"), make("libcuda-missing")
    memory, ecc, xid = make("memory-config-failed"), make("ecc-errors", DEGRADED), make("xid-application-fault")
    assert independent_of(ecc, cpu_only) and not independent_of(memory, cpu_only)
    assert independent_of(xid, libcuda) and not independent_of(ecc, libcuda)
    assert not independent_of(make("driver-library-mismatch"), libcuda)
    assert not independent_of(cpu_only, cpu_only)
    assert not independent_of(ecc, make("diagnosis-incomplete"))


def test_a_fault_of_another_gpu_is_independent_of_the_root_cause() -> None:
    """Issue 35, point 2: GPU 5 lost, GPU 2's ECC errors (health needs visibility, yet the loss blocks nothing for GPU
    2): independent, its own red line; the same GPU's fault is not; a GPU the driver could not take (``PCI ...``,
    not listed by NVML) is another GPU too; a fault about no GPU is not independent of a GPU's loss."""
    lost, ecc2, ecc5 = make("gpu-lost", subject="GPU-5"), make("ecc-errors", subject="GPU-2"), make("ecc-errors", subject="GPU-5")
    assert independent_of(ecc2, lost) and not independent_of(ecc5, lost)
    assert independent_of(make("compute-mode-prohibited", subject="GPU-2"), lost)
    unheld = make("gpu-init-failed", subject="PCI 0000:b3:00.0")
    assert independent_of(ecc2, unheld) and not independent_of(make("cuda-init-failed"), unheld)
    result = diagnose(lost, ecc2, ecc5)
    assert result.cause_blocked_by(ecc2) is None and result.cause_blocked_by(ecc5) is lost


# --- what a check decides ------------------------------------------------------------------------------


def test_a_question_fails_with_its_own_faults_and_passes_with_its_notes() -> None:
    """A check fails with its finding (DESIGN.md, "Checks"), with the ids of what answers it for the report; a note
    of its own (info) is no fault: it passes, naming it."""
    throttled = make("clocks-throttled", DEGRADED, subject="GPU-0")
    result = diagnose(throttled, make("ecc-errors", DEGRADED, subject="GPU-1"))
    q = question_of("checks_nvml.py::test_clocks_not_throttled")
    assert decide(result, q) == Decision("failed", faults=(throttled,), finding_ids=("clocks-throttled",))
    note = make("xid-recorded", INFO)
    kernel_log = question_of("checks_records.py::test_kernel_log_xid")
    assert decide(diagnose(note), kernel_log) == Decision("passed", finding_ids=("xid-recorded",))
    assert decide(diagnose(), kernel_log) == Decision("passed")
    assert decide(diagnose(), q) == Decision("passed", finding_ids=())


def test_a_question_is_blocked_by_a_broken_layer_it_needs_naming_it() -> None:
    """DESIGN.md: a check whose layer is blocked by a lower root cause is skipped with ``blocked by <id>`` (the
    blocker is kept for JUnit's ``gpucheck.blocked_by``), its own findings still named."""
    libcuda, soft = make("libcuda-missing"), make("soft-placement-fallback", subject="/GPU:0")
    placed = question_of("checks_placement.py::test_ops_run_where_asked")
    assert decide(diagnose(libcuda, soft), placed) == Decision(
        "skipped", "blocked by libcuda-missing", finding_ids=("soft-placement-fallback",), blocked_by=libcuda
    )
    # Its own blocker is its own red line, not a block.
    assert decide(diagnose(soft), placed) == Decision("failed", faults=(soft,), finding_ids=("soft-placement-fallback",))


def test_health_and_memory_readings_do_not_need_tensorflow() -> None:
    """DESIGN.md: NVML's memory and health readings need the driver, not TensorFlow: a broken placement or
    framework leaves them answered; memory settings (a resource that needs TensorFlow) are blocked by it."""
    cpu_only, placement = make("framework-cpu-only"), make("placement-failed", subject="placement step")
    ecc = make("ecc-errors", subject="GPU-0")
    healthy = Question("health", ("ecc-errors",), subject="GPU-0")
    assert decide(diagnose(placement, ecc), healthy) == Decision("failed", faults=(ecc,), finding_ids=("ecc-errors",))
    assert decide(diagnose(cpu_only, placement), healthy).outcome == "passed"
    headroom = replace_subject(question_of("checks_nvml.py::test_memory_headroom"), "GPU-0")
    assert decide(diagnose(cpu_only, make("placement-failed", subject="/GPU:0")), headroom).outcome == "passed"
    settings = question_of("checks_memory.py::test_memory_settings_apply")
    assert decide(diagnose(cpu_only), settings).blocked_by is cpu_only


def replace_subject(q: Question, subject: str) -> Question:
    """The question of a per-GPU check's item (the session sets its ``gpu`` parameter as the subject)."""
    from dataclasses import replace

    return replace(q, subject=subject)


def test_a_blocker_about_one_gpu_blocks_that_gpus_questions_and_those_about_no_gpu() -> None:
    """One lost GPU of eight leaves the seven others' per-GPU questions answered; the lost GPU's own and those
    about no GPU in particular are blocked; a blocker about something other than a GPU (a placement step, a
    memory setting) blocks every question that needs its layer."""
    lost, ecc = make("gpu-lost", subject="GPU-5"), make("ecc-errors", subject="GPU-0")
    result = diagnose(lost, ecc)
    memory = question_of("checks_nvml.py::test_memory_healthy")
    assert decide(result, replace_subject(memory, "GPU-0")) == Decision("failed", faults=(ecc,), finding_ids=("ecc-errors",))
    assert decide(result, replace_subject(memory, "GPU-1")) == Decision("passed")
    assert decide(result, replace_subject(memory, "GPU-5")).blocked_by is lost
    assert decide(result, memory).blocked_by is lost
    assert decide(result, question_of("checks_placement.py::test_gpu_accepts_pinned_ops")).blocked_by is lost
    hidden = make("devices-hidden-by-env", subject="CUDA_VISIBLE_DEVICES")
    assert decide(diagnose(hidden), replace_subject(memory, "GPU-0")).blocked_by is hidden
    unsubjected = make("gpu-lost")
    assert decide(diagnose(unsubjected), replace_subject(memory, "GPU-3")).blocked_by is unsubjected


def test_a_question_about_no_gpu_takes_every_gpus_fault_and_a_gpus_question_only_its_own() -> None:
    """The placement check asks about no GPU: an op pinned to /GPU:1 that fails is its fault. A per-GPU
    question takes its GPU's findings and those about no GPU, not another GPU's."""
    pinned = make("placement-failed", subject="/GPU:1")
    accepts = question_of("checks_placement.py::test_gpu_accepts_pinned_ops")
    assert decide(diagnose(pinned), accepts).faults == (pinned,)
    throttled = question_of("checks_nvml.py::test_clocks_not_throttled")
    on_1, anywhere = make("clocks-throttled", DEGRADED, subject="GPU-1"), make("clocks-throttled", DEGRADED)
    assert decide(diagnose(on_1, anywhere), replace_subject(throttled, "GPU-1")).faults == (on_1, anywhere)
    assert decide(diagnose(on_1, anywhere), replace_subject(throttled, "GPU-0")).faults == (anywhere,)


def test_a_question_blocked_by_ids_of_its_own_layer() -> None:
    """A GPU that takes no op cannot be asked whether its results are right (numerical-mismatch is blocked by
    placement-failed); a degraded placement fault, or a blocker the question does not name, blocks nothing."""
    results = question_of("checks_placement.py::test_gpu_results_match_cpu_reference")
    dead = make("placement-failed", subject="placement step")
    assert decide(diagnose(dead), results) == Decision("skipped", "blocked by placement-failed", blocked_by=dead)
    slow = make("placement-failed", DEGRADED, subject="placement step")
    assert decide(diagnose(slow), results) == Decision("passed")
    assert decide(diagnose(make("soft-placement-fallback", subject="/GPU:0")), results).outcome == "passed"
    # A fault of the question's own layer that the question does not ask about is neither its fault nor its block.
    link = make("pcie-link-degraded", DEGRADED, subject="GPU-0")
    assert decide(diagnose(link), replace_subject(question_of("checks_nvml.py::test_memory_healthy"), "GPU-0")) == (
        Decision("passed")
    )


def test_a_benchmark_is_judged_on_its_own_findings_and_blocked_by_what_keeps_ops_off_its_gpu() -> None:
    """A benchmark's question takes the findings that name it (``benchmark`` or ``benchmarks`` in the evidence)
    or name no benchmark; a GPU benchmark is blocked by placement-failed and soft-placement-fallback
    (ARCHITECTURE.md), a CPU one only by a TensorFlow that does not run."""
    name = "test_matmul[GPU:0-bfloat16]"
    gpu = Question("performance", ("gpu-underperforming", "benchmark-failed"), by_name()["performance"].blocked_by_ids,
                   subject="GPU-0", benchmark=name)
    # Another benchmark on the same GPU: not this one's.
    other = make("gpu-underperforming", DEGRADED, subject="GPU-0", benchmarks=["test_scaling[towers-GPU-x2]"])
    mine = make("gpu-underperforming", DEGRADED, subject="GPU-0", benchmarks=["test_scaling[towers-GPU-x2]", name])
    failed = make("benchmark-failed", DEGRADED, benchmark=name)
    failed_other = make("benchmark-failed", DEGRADED, benchmark="test_scaling[towers-GPU-x2]")
    unfinished = make("benchmark-failed", DEGRADED)  # the benchmark process died: no list of what it left
    assert decide(diagnose(other, failed_other), gpu) == Decision("passed")
    assert decide(diagnose(other, mine), gpu).faults == (mine,)
    assert decide(diagnose(failed_other, failed), gpu).faults == (failed,)
    assert decide(diagnose(unfinished), gpu).faults == (unfinished,)
    # A question about no benchmark in particular takes them all.
    assert decide(diagnose(other, failed_other), Question("performance", gpu.ids)).faults == (other, failed_other)
    cpu = Question("performance", gpu.ids, FRAMEWORK_BROKEN, instead=(), benchmark="test_matmul[CPU:0-float32]")
    missing = make("framework-missing")
    assert decide(diagnose(missing), cpu) == Decision("skipped", "blocked by framework-missing", blocked_by=missing)
    assert decide(diagnose(make("libcuda-missing"), make("framework-cpu-only")), cpu) == Decision("passed")
    assert decide(diagnose(make("libcuda-missing")), gpu).blocked_by is not None
    # Ops that do not reach the GPU: TensorFlow died placing them ("placement step"), or an op asked for /GPU:0 ran
    # on the CPU. Placement names TensorFlow's devices, the benchmark question NVML's GPU: the layer's blockers
    # block it unless they are about another of NVML's GPUs (found by this test: the benchmark was measured).
    dead = make("placement-failed", subject="placement step")
    assert decide(diagnose(dead), gpu) == Decision("skipped", "blocked by placement-failed", blocked_by=dead)
    fallback = make("soft-placement-fallback", subject="/GPU:0")
    assert decide(diagnose(fallback), gpu).blocked_by is fallback
    assert decide(diagnose(make("soft-placement-fallback", subject="GPU-1")), gpu) == Decision("passed")


def test_a_question_needing_other_layers_instead_of_its_own() -> None:
    """The kernel log's question (health) needs the kernel only: a missing libcuda leaves it answered, a kernel
    module that is not loaded blocks it."""
    kernel_log = question_of("checks_records.py::test_kernel_log_xid")
    xid = make("xid-application-fault", DEGRADED)
    assert decide(diagnose(make("libcuda-missing"), xid), kernel_log).faults == (xid,)
    module = make("driver-not-loaded")
    assert decide(diagnose(module, xid), kernel_log).blocked_by is module


def test_not_checked_is_a_skip_that_says_why_never_a_pass() -> None:
    """A question the diagnosis could not look at is skipped ``not checked: <why>``: the reason the diagnosis
    gives under the question's first id, the benchmark's own reason, ``--gpucheck-framework=none``, or its layer
    not being diagnosed. Faults found all the same fail it."""
    kernel_log = question_of("checks_records.py::test_kernel_log_xid")
    why = "the kernel log could not be read: /dev/kmsg: Operation not permitted"
    unread = diagnose(unchecked={kernel_log.ids[0]: why})
    assert decide(unread, kernel_log) == Decision("skipped", f"not checked: {why}")
    assert decide(diagnose(unchecked={kernel_log.ids[1]: why}), kernel_log) == Decision("passed")
    xid = make("gsp-firmware-error")
    assert decide(diagnose(xid, unchecked={kernel_log.ids[0]: why}), kernel_log).outcome == "failed"
    placed = question_of("checks_placement.py::test_ops_run_where_asked")
    no_tf = diagnose(checked=EVERY - {layer.name for layer in LAYERS if layer.framework})
    assert decide(no_tf, placed, framework_none=True) == Decision("skipped", "not checked: --gpucheck-framework=none")
    assert decide(no_tf, placed) == Decision("skipped", "not checked: the placement layer is not diagnosed")
    # Another layer not checked leaves this one answered.
    assert decide(no_tf, question_of("checks_nvml.py::test_memory_healthy")) == Decision("passed")
    # A benchmark the benchmark process did not measure, while its layer waits for the measurement.
    bench = Question("performance", ("gpu-underperforming",), unchecked="the benchmark process did not measure it")
    waiting = diagnose(checked=EVERY - {"performance"}, unchecked={"gpu-underperforming": "elsewhere"})
    assert decide(waiting, bench).reason == "not checked: the benchmark process did not measure it"
    # The performance plugin asks with no ids, only for the blocker.
    assert decide(diagnose(), Question("performance", ())) == Decision("passed")


def test_a_frameworks_reason_not_to_check_answers_only_its_own_question() -> None:
    """TensorFlow and PyTorch both ask about ``memory-config-failed``. In a run of both, TensorFlow's reason for not
    judging its memory settings ("TensorFlow registers no GPU") left PyTorch's allocator question skipped with
    TensorFlow's words, though PyTorch's was judged; each framework's reason is now kept under its framework
    (``unchecked_key``) and read by its own question first. The lower stack's reasons stay under the id."""
    tf_memory = replace(question_of("checks_memory.py::test_memory_settings_apply"), framework="tensorflow")
    torch_alloc = replace(
        question_of("checks_torch_resources.py::test_torch_accepts_its_allocator_configuration"), framework="torch"
    )
    assert tf_memory.ids[0] == torch_alloc.ids[0] == "memory-config-failed"
    why = "TensorFlow registers no GPU"
    both = diagnose(unchecked={unchecked_key("tensorflow", "memory-config-failed"): why})
    assert decide(both, tf_memory) == Decision("skipped", f"not checked: {why}")
    assert decide(both, torch_alloc) == Decision("passed")
    assert unchecked_key(None, "gsp-firmware-error") == "gsp-firmware-error"
    # Under --gpucheck-framework=none no framework's question passes: nothing looked at it (PyTorch's allocator question
    # had only TensorFlow's reason to say so).
    none = Decision("skipped", "not checked: --gpucheck-framework=none")
    assert decide(diagnose(), torch_alloc, framework_none=True) == decide(diagnose(), tf_memory, framework_none=True) == none
    # The registry keeps a framework unit's reasons so. In a run of PyTorch alone TensorFlow's unit says its memory
    # settings were not judged ("--gpucheck-framework=none"): that no longer skips PyTorch's allocator question.
    reasons = registry.not_checked(machine(None, driver=None), Settings(framework="torch"))
    assert reasons["tensorflow/memory-config-failed"] == "--gpucheck-framework=none", reasons
    assert "torch/nccl-shm-failed" in reasons and "memory-config-failed" not in reasons, reasons
    torch_only = diagnose(unchecked=reasons)
    assert decide(torch_only, torch_alloc) == Decision("passed")
    assert decide(torch_only, tf_memory) == Decision("skipped", "not checked: --gpucheck-framework=none")


def test_a_framework_that_cannot_import_blocks_its_own_cpu_benchmarks() -> None:
    """The review of stop 42: where ``import torch`` stops on a CUDA library found first, the finding is
    ``cuda-library-shadowed`` (``cudnn-version-mismatch`` for cuDNN), not ``framework-missing``, and PyTorch's CPU
    benchmarks were no longer blocked: the benchmark process ran anyway and failed a second time. A framework's
    ``broken_by`` ids block its benchmarks on the CPU too; never another framework's, nor TensorFlow's
    cudnn-version-mismatch (its CPU benchmarks need no cuDNN)."""
    from gpucheck.performance.plan import Spec
    from gpucheck.performance.plugin import benchmark_question

    torch_fw, tf_fw = registry.framework_named("torch"), registry.framework_named("tensorflow")
    assert torch_fw is not None and tf_fw is not None and tf_fw.broken_by == ()
    cpu = Spec("matmul", "CPU:0-float32", ("/CPU:0",), "float32")
    shadowed = replace(make("cuda-library-shadowed"), framework="torch")
    mismatch = replace(make("cudnn-version-mismatch"), framework="tensorflow")
    result = diagnose(shadowed)

    def asked(framework: str, res: Result) -> Decision:
        fw = registry.framework_named(framework)
        assert fw is not None
        q = benchmark_question(res, cpu, framework, FRAMEWORK_BROKEN + fw.broken_by)
        return decide(res, replace(q, ids=()))

    assert asked("torch", result).blocked_by == shadowed
    assert asked("tensorflow", result).blocked_by is None  # another framework's
    assert asked("tensorflow", diagnose(mismatch)).blocked_by is None
    assert asked("torch", diagnose(replace(make("cudnn-version-mismatch"), framework="torch"))).blocked_by is not None


def test_asks_declares_the_question_a_check_asks() -> None:
    def check() -> None: ...

    marked = asks("health", ("ecc-errors",), blocked_by_ids=("gpu-lost",), needs=("framework",), instead=("kernel",))(check)
    assert marked is check
    assert getattr(check, QUESTION_ATTRIBUTE) == Question(
        "health", ("ecc-errors",), blocked_by_ids=("gpu-lost",), needs=("framework",), instead=("kernel",)
    )
