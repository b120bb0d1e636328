"""Issue 27 points 1-3: gpucheck inside a project's own test suite. The sample project (tests/sampleproject: plain
tests beside tests marked ``@pytest.mark.gpu``) run through the real ``pytest`` command line, on this host's
driverless view and on fake machines, and the pure parts (the marker's arguments, the GPUs given to each
worker, the document the workers read) in-process.

The machines, each modelled on a real one (their sources are in the scenario files):

- this repository's build host: no NVIDIA device (tests/test_plugin.py ``DRIVERLESS_HOST``);
- a healthy H100 80GB (tests/scenarios/cuda/h100-80gb-healthy.json, ../shared/machines/h100-80gb-driver-580);
- a Tesla T4 with the CUDA 12 runtime and no cuDNN (tests/scenarios/cuda/cudnn-missing.json,
  JdeRobot/BehaviorMetrics#385, tensorflow/tensorflow#45200);
- a node with two A100-SXM4-40GB whose job script sets CUDA_VISIBLE_DEVICES=1,0
  (tests/scenarios/cuda/cuda-visible-devices-reorders-registered-gpus.json).

Each command line below is also shown, as is, in docs/own-suites.md (``test_every_command_of_the_page_is_run``).
The real command-line runs are few (each starts the real TensorFlow in a probe child): the host's covers
``pytest --gpucheck -n 2`` and the marker's skip together; the two-GPU machine's xdist run diagnoses without
TensorFlow (``--gpucheck-framework=none``, its marked test asks the driver only).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from conftest import build_fake_machine
from gpucheck import marker, shared
from gpucheck.diagnosis import Result, incomplete
from gpucheck.marker import Gpu, Machine, MarkerError, Need, parse_need
from gpucheck.model import Severity, finding
from tests.pyenvs import checkout_environment

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sampleproject"
TORCH_SAMPLE = HERE / "torchproject"
SCENARIOS = HERE / "scenarios"
PAGE = HERE.parent / "docs" / "own-suites.md"

#: The command lines these tests run in the sample project, as docs/own-suites.md shows them.
COMMANDS = {
    "host": "pytest --gpucheck -n 2 --gpucheck-json=gpucheck-report.json -rs tests",
    "plain": "pytest -rs --junitxml=junit.xml",
    "memory": "pytest --gpucheck-worker-memory=2GiB -rs",
    "per-worker": "pytest -n 2 --gpucheck-gpus-per-worker=1 --gpucheck-framework=none --gpucheck-json=gpucheck-report.json -rs tests/test_worker_view.py",
    "two-gpus": "pytest -rs tests/test_model.py::test_data_parallel_step",
    "unmarked": 'pytest -m "not gpu"',
    # The PyTorch sample (tests/torchproject), in a venv with the torch CPU wheel and no TensorFlow.
    "torch-plain": "pytest -rs --gpucheck-json=gpucheck-report.json",
    "torch-require": "pytest -n 2 --gpucheck-require --gpucheck-gpus-per-worker=1 --gpucheck-worker-memory=2GiB -rs",
}
MiB = 1 << 20


def scenario(name: str, **changes: Any) -> dict[str, Any]:
    data = json.loads((SCENARIOS / name).read_text())
    assert isinstance(data, dict)
    data.update(changes)
    return data


DRIVERLESS_HOST: dict[str, Any] = {
    "_source": "this repository's build host (no GPU, no NVIDIA driver): tests/logs/README.md",
    "host": {"pci": [{"bus_id": "0000:00:02.0", "vendor": "0x1234", "device": "0x1111", "class": "0x030000"}]},
    "libraries": [],
}


@dataclass
class SampleRun:
    result: pytest.RunResult
    path: Path

    @property
    def out(self) -> str:
        return str(self.result.stdout.str())

    def records(self, name: str) -> list[dict[str, Any]]:
        """What the marked tests called ``name`` saw, one per process that ran one."""
        return [json.loads(p.read_text()) for p in sorted((self.path / "records").glob(f"{name}-*.json"))]

    def cuinit_lines(self) -> list[str]:
        log = self.path / "cuinit.log"
        return log.read_text().splitlines() if log.exists() else []

    def diagnoses(self) -> int:
        """How many diagnoses ran: each runs the CUDA driver probe in a child once, which calls cuInit once
        (the fake libcuda logs every cuInit with the process's command line)."""
        return sum("probe_cuda_driver" in line for line in self.cuinit_lines())

    def report(self) -> dict[str, Any]:
        data = json.loads((self.path / "gpucheck-report.json").read_text())
        assert isinstance(data, dict)
        return data


@pytest.fixture
def sample(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], SampleRun]]:
    """The sample project copied into pytester's folder; ``run(key)`` runs ``COMMANDS[key]`` there."""
    for item in SAMPLE.iterdir():
        target = pytester.path / item.name
        if item.is_dir():
            shutil.copytree(item, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(item, target)
    (pytester.path / "records").mkdir()
    monkeypatch.setenv("SAMPLE_RECORD", str(pytester.path / "records"))
    monkeypatch.setenv("GPUCHECK_FAKE_CUINIT_LOG", str(pytester.path / "cuinit.log"))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)

    def run(key: str) -> SampleRun:
        argv = shlex.split(COMMANDS[key])
        assert argv[0] == "pytest"
        return SampleRun(pytester.runpytest_subprocess(*argv[1:], timeout=300), pytester.path)

    yield run


# --- the command line, on machines ---------------------------------------------------------------------------


def test_host_gpucheck_under_xdist_and_require_fails_the_marked_tests(
    fake_machine: Callable[[dict[str, Any]], Path], sample: Callable[[str], SampleRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI job of docs/own-suites.md on this host: ``GPUCHECK_REQUIRE=1`` in the environment, ``pytest
    --gpucheck -n 2`` (it was refused) with the project's tests. The controller diagnoses once, the workers run
    gpucheck's checks and the project's tests, the report is written once with every check's outcome; the
    marked tests fail with the root cause and its remedy (their bodies never run), the plain tests pass."""
    fake_machine(DRIVERLESS_HOST)
    monkeypatch.setenv("GPUCHECK_REQUIRE", "1")
    run = sample("host")
    out = run.out
    assert run.result.ret == 1, out
    assert "2 workers" in out, out
    run.result.stdout.fnmatch_lines(
        ["*--gpucheck-require: this machine cannot run this test: no usable GPU — no-nvidia-gpu: No NVIDIA GPU*", "*remedy:*"]
    )
    # The FAILURES section: one title per failed test; the seven marked ones fail with the cause.
    titles = re.findall(r"^_{3,} (\S+) _{3,}$", out, flags=re.M)
    marked = ["test_matmul_on_the_gpu", "test_data_parallel_step", "test_driver_lists_the_gpu"]
    marked += [f"test_this_worker_has_a_gpu[{i}]" for i in range(4)]
    assert sorted(t for t in titles if "nvidia" not in t) == sorted(marked), titles
    assert out.count("--gpucheck-require: this machine cannot run this test") == 7
    assert run.records("matmul") == [] and run.records("worker_view") == []
    [unmarked] = run.records("unmarked")
    assert unmarked["worker"] in ("gw0", "gw1")
    report = run.report()
    assert report["root_cause"]["id"] == "no-nvidia-gpu" and report["complete"] is True
    assert report["settings"]["require"] == {"value": True, "source": "environment variable GPUCHECK_REQUIRE"}
    # Every check of gpucheck's own suite, run by the workers, is in the controller's one report.
    checks = {c["nodeid"].split("::")[-1]: c["outcome"] for c in report["checks"]}
    assert len(checks) >= 30 and checks["test_nvidia_gpu_on_pci_bus"] == "failed", checks
    assert set(checks.values()) <= {"passed", "failed", "skipped"}
    assert report["facts"]["hardware"]["readable"] is True  # the controller's facts, in full


def test_cudnn_missing_skips_the_marked_tests_with_the_cause(
    fake_machine: Callable[[dict[str, Any]], Path], sample: Callable[[str], SampleRun]
) -> None:
    """By default the marked tests this machine cannot run are skipped, the reason leading with the root cause;
    the tests that ask the driver only (framework=None) run: the driver sees the T4."""
    fake_machine(scenario("cuda/cudnn-missing.json"))
    run = sample("plain")
    out = run.out
    assert run.result.ret == 0, out
    run.result.assert_outcomes(passed=7, skipped=2)
    run.result.stdout.fnmatch_lines(
        ["*SKIPPED*test_model.py:*: no usable GPU — cudnn-missing: cuDNN (libcudnn.so.9) does not load: libcudnn.so.9 is not found.*"]
    )
    run.result.stdout.fnmatch_lines(["*tests marked gpu*", "7 marked test(s): 5 passed, 2 skipped", "root cause: cudnn-missing*", "*remedy:*"])
    assert run.records("matmul") == [] and len(run.records("driver_level")) == 1
    assert run.diagnoses() == 1
    # JUnit: the root cause and its remedy on each skipped marked test case.
    cases = {c.get("name"): c for c in ET.parse(run.path / "junit.xml").getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_matmul_on_the_gpu"].iter("property")}
    assert props["gpucheck.root_cause"] == "cudnn-missing" and "nvidia-cudnn-cu12" in (props["gpucheck.remedy"] or "")
    assert cases["test_matmul_on_the_gpu"].find("skipped") is not None


def test_healthy_h100_runs_the_marked_tests_and_bounds_the_worker_memory(
    fake_machine: Callable[[dict[str, Any]], Path], sample: Callable[[str], SampleRun]
) -> None:
    """On the healthy H100 the marked tests run on its GPU (TensorFlow places the matmul there), the one that
    asks for two GPUs is skipped saying what the machine has; --gpucheck-worker-memory reaches the worker's
    TensorFlow as the memory_limit of its GPU."""
    fake_machine(scenario("cuda/h100-80gb-healthy.json"))
    run = sample("memory")
    run.result.assert_outcomes(passed=8, skipped=1)
    run.result.stdout.fnmatch_lines(["*SKIPPED*test_model.py*needs 2 GPU(s) with at least 8GiB*this machine has 1 that fit*H100*"])
    [matmul] = run.records("matmul")
    assert matmul["device"] == "/GPU:0" and matmul["ran_on"].endswith("GPU:0"), matmul
    [gpu] = matmul["gpus"]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["compute_capability"] == "9.0" and gpu["usable"], gpu
    assert gpu["memory"] > 79 * 2**30 and gpu["bus_id"], gpu
    # TensorFlow took the bound it was given (2 GiB), not the ~78 GiB it takes unbounded.
    assert matmul["memory_limits"] == [2048 * MiB], matmul
    [driver] = run.records("driver_level")
    assert driver["verdict"] == "not-accelerated"  # the fakes run no kernel: numerics says so, in the summary
    run.result.stdout.fnmatch_lines(["*the marked tests that ran, ran on a machine whose verdict is not-accelerated*"])
    assert run.diagnoses() == 1


def test_two_gpus_one_per_worker_and_one_diagnosis(
    fake_machine: Callable[[dict[str, Any]], Path], sample: Callable[[str], SampleRun]
) -> None:
    """``-n 2 --gpucheck-gpus-per-worker=1`` on the two-GPU node: each worker is started with one GPU of its
    own, a different one (the driver in each lists only it), the diagnosis runs once for the run (counted by
    the fake driver's cuInit log: one CUDA driver probe child), with every GPU of the run in view."""
    fake_machine(scenario("cuda/cuda-visible-devices-reorders-registered-gpus.json"))
    run = sample("per-worker")
    out = run.out
    assert run.result.ret == 0, out
    run.result.assert_outcomes(passed=4)
    views = run.records("worker_view")
    assert {v["worker"] for v in views} == {"gw0", "gw1"}, views
    by_worker = {v["worker"]: v for v in views}
    # The node's CUDA_VISIBLE_DEVICES=1,0 shared out in its order: gw0 the first entry, gw1 the second.
    assert by_worker["gw0"]["cuda_visible_devices"] == "1" and by_worker["gw1"]["cuda_visible_devices"] == "0"
    seen = {w: v["driver"] for w, v in by_worker.items()}
    assert all(len(ids) == 1 for ids in seen.values()) and seen["gw0"] != seen["gw1"], seen
    # The gpus fixture agrees with the driver of each worker.
    for v in views:
        [gpu] = v["gpus"]
        assert gpu["device"] == "/GPU:0" and gpu["bus_id"].lower() == v["driver"][0].lower(), v
    assert run.diagnoses() == 1, run.cuinit_lines()
    [probe] = [line for line in run.cuinit_lines() if "probe_cuda_driver" in line]
    assert probe.split()[1] == "1,0", probe  # the diagnosis saw the node's own CUDA_VISIBLE_DEVICES
    report = run.report()
    assert report["facts"]["cuda"]["facts"]["device_count"] == 2
    run.result.stdout.fnmatch_lines(["*gpus per worker: gw0: CUDA_VISIBLE_DEVICES=1*", "*gw1: CUDA_VISIBLE_DEVICES=0*"])


def test_two_gpus_run_the_test_that_asks_for_two(
    fake_machine: Callable[[dict[str, Any]], Path], sample: Callable[[str], SampleRun]
) -> None:
    """The test that asks for two GPUs with 8 GiB each runs on the node's two A100 40GB, in TensorFlow's order."""
    fake_machine(scenario("cuda/cuda-visible-devices-reorders-registered-gpus.json"))
    run = sample("two-gpus")
    run.result.assert_outcomes(passed=1)
    [two] = run.records("two_gpus")
    assert [g["device"] for g in two["gpus"]] == ["/GPU:0", "/GPU:1"]
    assert {g["name"] for g in two["gpus"]} == {"NVIDIA A100-SXM4-40GB"}
    # TensorFlow's GPU:0 is the node's CUDA ordinal 0, which CUDA_VISIBLE_DEVICES=1,0 makes nvidia-smi's GPU 1.
    assert two["gpus"][0]["bus_id"].upper().endswith("D8:00.0"), two


def test_unmarked_suite_starts_nothing(fake_machine: Callable[[dict[str, Any]], Path], sample: Callable[[str], SampleRun]) -> None:
    """With the marked tests deselected, no diagnosis starts and nothing of gpucheck but its plugin is loaded."""
    fake_machine(scenario("cuda/h100-80gb-healthy.json"))
    run = sample("unmarked")
    run.result.assert_outcomes(passed=2, deselected=7)
    [unmarked] = run.records("unmarked")
    assert set(unmarked["gpucheck_modules"]) <= {
        "gpucheck", "gpucheck.plugin", "gpucheck.suite", "gpucheck.options", "gpucheck.settings", "gpucheck.reportfile"
    }, unmarked
    assert run.cuinit_lines() == [] and "tests marked gpu" not in run.out


def test_every_command_of_the_page_is_run() -> None:
    """docs/own-suites.md shows only command lines these tests run: its ```console blocks (lines after "$ ") and
    the pytest lines of its CI jobs (```yaml blocks)."""
    text = PAGE.read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.S)
    shown = [line[2:].strip() for block in blocks for line in block.splitlines() if line.startswith("$ ")]
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            m = re.match(r"^\s*(?:-\s+)?(?:run:\s+)?(pytest\b.*)$", line)
            if m:
                shown.append(m.group(1).strip())
    assert shown, "the page shows no command"
    assert set(shown) <= set(COMMANDS.values()), set(shown) - set(COMMANDS.values())
    # And every one of them is run by a test above.
    source = Path(__file__).read_text()
    for key, command in COMMANDS.items():
        if command in shown:
            assert f'sample("{key}")' in source, key


#: Put first on PYTHONPATH, a ``sitecustomize`` that appends each Python process's command line to
#: $SAMPLE_PROCESS_LOG, one JSON list a line: the PyTorch probe children a run starts are its diagnoses (on this host no
#: fake libcuda logs a cuInit to count them by).
PROCESS_LOG = """
import json, os, sys
if os.environ.get("SAMPLE_PROCESS_LOG"):
    with open(os.environ["SAMPLE_PROCESS_LOG"], "a") as log:
        log.write(json.dumps(sys.argv) + "\\n")
"""
TORCH_PROBE = "gpucheck.frameworks.torch.child:torch_then_steps"


def test_the_pytorch_sample_skips_then_fails_under_require_with_xdist(
    torch_python: Path, tmp_path: Path, fake_lib_cache: Path
) -> None:
    """The PyTorch sample project (tests/torchproject) in a venv with the torch CPU wheel and no TensorFlow. On this
    host (no GPU, no driver) its marked tests (``gpu(framework="torch")``, a bare ``gpu``, two GPUs, and
    ``gpu(framework=None)`` with ``torch_device``) are skipped with the root cause no-nvidia-gpu; with ``-n 2
    --gpucheck-require`` they fail with it instead, their bodies never run, and the run still diagnoses once. On the
    fake healthy H100 the driver sees the GPU, and the real torch CPU wheel is what keeps every one of them from it:
    framework-cpu-only, the test marked for the driver's GPUs included, since its ``torch_device`` asks PyTorch for
    them. The plain test passes everywhere."""
    project = tmp_path / "project"
    shutil.copytree(TORCH_SAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(SAMPLE / "tests" / "record.py", project / "tests" / "record.py")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(PROCESS_LOG)
    env = checkout_environment(tmp_path / "site", hooks)

    def torch_sample(
        key: str, machine: dict[str, str] | None = None
    ) -> tuple[subprocess.CompletedProcess[str], list[list[str]], dict[str, dict[str, Any]]]:
        records, log = tmp_path / f"records-{key}", tmp_path / f"processes-{key}.log"
        records.mkdir(exist_ok=True)
        log.unlink(missing_ok=True)
        argv = shlex.split(COMMANDS[key])
        done = subprocess.run(
            [str(torch_python), "-m", *argv], cwd=project, capture_output=True, text=True, timeout=300, check=False,
            env={**env, **(machine or {}), "SAMPLE_RECORD": str(records), "SAMPLE_PROCESS_LOG": str(log)},
        )
        processes = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        seen = {p.stem: json.loads(p.read_text()) for p in records.glob("*.json")}
        return done, processes, seen

    marked = ("test_matmul_on_the_gpu", "test_training_step", "test_data_parallel_step",
              "test_the_driver_lists_a_gpu_for_torch")
    cause = "no usable GPU — no-nvidia-gpu: No NVIDIA GPU on this machine's PCI bus."
    # Plain: skipped with the cause, the plain test run; one diagnosis, which asked PyTorch alone.
    done, processes, seen = torch_sample("torch-plain")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "1 passed, 4 skipped" in out, out[-3000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 4 and all(line.endswith(cause) for line in skipped), skipped
    assert "4 marked test(s): 4 skipped" in out and "root cause: no-nvidia-gpu (hardware)" in out, out[-3000:]
    assert set(seen) == {"torch_unmarked-main"}, seen
    assert sum(TORCH_PROBE in p for p in processes) == 1, processes
    report = json.loads((project / "gpucheck-report.json").read_text())
    assert list(report["frameworks"]) == ["torch"] and report["settings"]["framework"]["value"] == "torch"
    assert report["frameworks"]["torch"]["version"] == "2.13.0+cpu" and report["root_cause"]["id"] == "no-nvidia-gpu"
    # -n 2 --gpucheck-require: each marked test fails with the cause and its remedy, none ran; still one diagnosis.
    done, processes, seen = torch_sample("torch-require")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    assert "2 workers [5 items]" in out and "4 failed, 1 passed" in out, out[-4000:]
    titles = re.findall(r"^_{3,} (\S+) _{3,}$", out, flags=re.M)
    assert sorted(titles) == sorted(marked), titles
    assert out.count(f"--gpucheck-require: this machine cannot run this test: {cause}") == 4, out[-4000:]
    # Four failures and the summary's root cause, whose remedy names the framework diagnosed.
    assert out.count("remedy: Run on a machine with an NVIDIA GPU") == 5 and "PyTorch will run on the CPU here" in out
    assert "4 marked test(s): 4 failed" in out, out[-3000:]
    assert [k.split("-")[0] for k in seen] == ["torch_unmarked"] and seen[next(iter(seen))]["worker"] in ("gw0", "gw1")
    assert sum(TORCH_PROBE in p for p in processes) == 1, processes  # the run's one diagnosis, by one worker
    assert "gpus per worker: no GPU to share out: the workers see what this process sees" in out, out[-3000:]
    # The fake healthy H100 (tests/scenarios/cuda/h100-80gb-healthy.json): the CPU wheel is the cause, with the wheel
    # for the driver's CUDA 13.0; one diagnosis (the fake driver logs each cuInit).
    cuinit = tmp_path / "cuinit.log"
    h100 = build_fake_machine(scenario("cuda/h100-80gb-healthy.json"), tmp_path / "h100", fake_lib_cache)
    done, processes, seen = torch_sample("torch-plain", {**h100, "GPUCHECK_FAKE_CUINIT_LOG": str(cuinit)})
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "1 passed, 4 skipped" in out, out[-4000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    cpu_only = "no usable GPU — framework-cpu-only: PyTorch 2.13.0+cpu is a CPU-only build: it cannot use a GPU."
    assert len(skipped) == 4 and all(line.endswith(cpu_only) for line in skipped), skipped
    assert "--index-url https://download.pytorch.org/whl/cu130`" in out, out[-3000:]
    assert set(seen) == {"torch_unmarked-main"}, seen
    assert sum("probe_cuda_driver" in line for line in cuinit.read_text().splitlines()) == 1


# --- in-process: the pure parts ----------------------------------------------------------------------------


def test_marker_arguments() -> None:
    assert parse_need((), {}) == Need()
    assert parse_need((2,), {"min_memory": "8GiB", "compute_capability": "8.0"}) == Need(2, "8GiB", (8, 0))
    assert parse_need((), {"framework": None, "min_memory": 8 * 2**30}).min_memory == str(8 * 2**30)
    assert parse_need((), {"framework": "torch"}) == Need(framework="torch")
    for args, kwargs, words in [
        ((0,), {}, "at least 1"),
        ((True,), {}, "whole number"),
        ((), {"min_memory": "10%"}, "absolute amount"),
        ((), {"min_memory": "lots"}, "amount of memory"),
        ((), {"compute_capability": "sm_80"}, "like '8.0'"),
        ((), {"framework": "pytorch"}, "'tensorflow' or 'torch' or None"),
        ((), {"gpus": 2}, "not gpus"),
        ((1, 2), {}, "at most one positional"),
    ]:
        with pytest.raises(MarkerError, match=re.escape(words)):
            parse_need(args, kwargs)


def _machine(gpus: tuple[Gpu, ...], findings: tuple[Any, ...] = ()) -> Machine:
    rc = next((f for f in findings if f.severity is Severity.BLOCKER), None)
    result = Result(None, {}, findings, rc, "not-accelerated" if rc else "accelerated", (), True)
    return Machine(result, {"tensorflow": gpus, "none": gpus})


A100 = Gpu(0, "/GPU:0", "NVIDIA A100-SXM4-40GB", 40 * 2**30, "8.0", "00000000:D8:00.0", 0, "GPU-1")
T4 = Gpu(1, "/GPU:1", "Tesla T4", 15 * 2**30, "7.5", "00000000:3B:00.0", 1, "GPU-0")


def test_marker_judges_count_memory_and_capability() -> None:
    machine = _machine((A100, T4))
    assert marker.answer(machine, Need(2)).runs
    assert not marker.answer(machine, Need(2, "16GiB")).runs
    only = marker.answer(machine, Need(1, "16GiB"))
    assert only.runs and only.gpus == (A100,)
    cc = marker.answer(machine, Need(2, None, (8, 0)))
    assert not cc.runs and "compute capability 8.0" in cc.reason and "GPU:1 Tesla T4, 15 GiB, cc 7.5 (too small)" in cc.reason
    # A worker given the T4 alone (CUDA ordinal 1) sees it as its GPU:0.
    worker = marker.answer(machine, Need(1), ordinals=(1,), per_worker=1)
    assert worker.runs and worker.gpus[0].device == "/GPU:0" and worker.gpus[0].name == "Tesla T4"
    assert "this xdist worker has 1" in marker.answer(machine, Need(2), ordinals=(1,), per_worker=1).reason


def test_a_machine_wide_blocker_leads_the_reason() -> None:
    lost = finding("cudnn-missing", Severity.BLOCKER, summary="cuDNN 9 not found.", cause="c", remedy="r")
    no = marker.answer(_machine((), (lost,)), Need())
    assert not no.runs and no.cause is lost and no.reason == "no usable GPU — cudnn-missing: cuDNN 9 not found."
    none = marker.answer(_machine(()), Need())
    assert none.reason == "no usable GPU — TensorFlow registered no GPU"
    # --gpucheck-framework=none: TensorFlow not asked, and the reason says so rather than "no GPU".
    driver_only = Machine(_machine((A100,)).result, {"none": (A100,)})
    assert marker.answer(driver_only, Need(framework=None)).runs
    assert "TensorFlow was not diagnosed (--gpucheck-framework=none)" in marker.answer(driver_only, Need()).reason


@pytest.mark.parametrize(
    ("installed", "diagnosed", "chosen"),
    [
        (("tensorflow",), ("tensorflow",), "tensorflow"),  # TensorFlow's users: as before
        (("tensorflow", "torch"), ("tensorflow", "torch"), "tensorflow"),  # both installed and asked: TensorFlow first
        (("torch",), ("torch",), "torch"),  # PyTorch alone installed: the bare marker is PyTorch's
        (("tensorflow", "torch"), ("torch",), "torch"),  # --gpucheck-framework=torch where both are installed
        ((), ("tensorflow",), None),  # nothing installed (TensorFlow diagnosed as missing): the driver
        (("tensorflow", "torch"), (), None),  # --gpucheck-framework=none: the driver
    ],
)
def test_a_bare_marker_asks_the_first_framework_installed_and_diagnosed(
    installed: tuple[str, ...], diagnosed: tuple[str, ...], chosen: str | None
) -> None:
    assert marker.bare_framework(installed, diagnosed) == chosen


def _torch_h100() -> Machine:
    """The healthy H100 with torch 2.14.1+cu130 as PyTorch's child reads it (tests/test_torch_rules.py), diagnosed with
    PyTorch alone."""
    from tests.test_torch_rules import cuda_build
    from tests.test_torch_rules import machine as torch_machine

    facts = torch_machine(cuda_build())
    return Machine.of(Result(facts, {}, (), None, "accelerated", (), True))


def test_pytorch_gpus_are_named_as_torch_device_takes_them() -> None:
    """A test marked for PyTorch gets its GPUs as ``cuda:N`` (what ``torch.device`` takes), numbered in the worker's
    own view; a bare marker is PyTorch's where the run diagnosed PyTorch alone and only it is installed."""
    h100 = _torch_h100()
    assert set(h100.gpus) == {"none", "torch"}
    found = marker.answer(h100, Need(framework="torch"))
    assert found.runs and [(g.device, g.name, g.compute_capability) for g in found.gpus] == [
        ("cuda:0", "NVIDIA H100 80GB HBM3", "9.0")
    ]
    assert marker.answer(h100, Need(framework="torch"), ordinals=(0,), per_worker=1).gpus[0].device == "cuda:0"
    assert marker.answer(h100, Need(framework=None)).gpus[0].device == "/GPU:0"  # the driver's, as before
    # A worker given the second of two GPUs numbers it 0, in its framework's own form.
    second = Gpu(1, "cuda:1", "NVIDIA H100 80GB HBM3", 80 * 2**30, "9.0", "00000000:05:00.0", 1, "GPU-1")
    assert [g.device for g in marker.for_worker((found.gpus[0], second), (1,))] == ["cuda:0"]
    assert [g.device for g in marker.for_worker((A100, T4), (1,))] == ["/GPU:0"]
    # TensorFlow is not asked in this run: a marker that names it says so.
    assert "TensorFlow was not diagnosed (--gpucheck-framework=torch)" in marker.answer(h100, Need()).reason


def test_the_early_cuda_reading_and_its_decision() -> None:
    """Whether a framework had initialised CUDA before gpucheck's plugin loaded, read from this process's real
    ``sys.modules`` (where torch is not imported: no framework has), and the decision on it: an error only in an xdist
    worker given GPUs of its own, naming the framework and the worker's CUDA_VISIBLE_DEVICES. (torch's CPU wheel never
    initialises CUDA, so the reading True is only seen on a GPU machine: the decision is fed it here.)"""
    from gpucheck import frameworks

    reading = frameworks.cuda_initialised(sys.modules)
    assert reading == () and "torch.cuda" not in sys.modules
    worker = {"CUDA_VISIBLE_DEVICES": "1", shared.WORKER_GPUS_ENV: "1", shared.PARENT_VISIBLE_ENV: shared.UNSET}
    assert shared.cuda_too_early(reading, worker) is None
    assert shared.cuda_too_early(("torch",), {"CUDA_VISIBLE_DEVICES": "1"}) is None  # gpucheck set nothing here
    why = shared.cuda_too_early(("torch",), worker)
    assert why is not None and why.startswith("PyTorch had initialised CUDA in this xdist worker before gpucheck's")
    assert "the CUDA_VISIBLE_DEVICES=1 that --gpucheck-gpus-per-worker gave this worker" in why
    # The reading asks the framework's own function, and only a True answer counts.
    for answer, expected in [(True, ("torch",)), (False, ()), (1, ())]:
        module = type(sys)("torch.cuda")
        module.is_initialized = lambda answer=answer: answer  # type: ignore[attr-defined]
        assert frameworks.cuda_initialised({"torch.cuda": module}) == expected
    assert frameworks.cuda_initialised({"torch.cuda": type(sys)("torch.cuda")}) == ()  # no such function: no


def test_a_pytorch_bound_is_a_share_of_each_gpu() -> None:
    from gpucheck.frameworks.torch.process import fraction

    h100 = 85_520_809_984  # an H100 80GB HBM3's total memory in bytes, as CUDA reports it
    assert fraction(2048, h100) == pytest.approx(2048 * MiB / h100) and 2048 * MiB <= fraction(2048, h100) * h100 + 1
    assert fraction(200_000, h100) == 1.0 and fraction(2048, 0) == 1.0


def test_the_suite_side_names_the_workers_variable() -> None:
    from gpucheck import suite

    assert suite.WORKER_GPUS_ENV == shared.WORKER_GPUS_ENV


def _diagnosed(findings: tuple[Any, ...] = (), complete: bool = True) -> Result:
    """A diagnosis of two A100s that NVML numbers the other way round from CUDA (NVML's GPU-0 is CUDA's 1), with
    TensorFlow registering three: GPU:0 of an ordinal it cannot tell (taken for CUDA's 0), GPU:1 CUDA's 1 (it says),
    GPU:2 of no ordinal CUDA has; CUDA's third device is on no bus NVML lists, and says no compute capability."""
    from gpucheck.facts import CudaDevice, CudaDriverFacts, FrameworkGpu, FrameworkView, LibraryLoad, ProbeOutcome
    from tests.test_kernel_log import OK_EXIT, hand_facts
    from tests.test_nvml_rules import gpu as nvml_gpu

    facts = hand_facts([], [nvml_gpu(0, pci_bus_id="00000000:11:00.0"), nvml_gpu(1, pci_bus_id="00000000:10:00.0")])
    cuda = CudaDriverFacts(LibraryLoad("libcuda.so.1", True, "/usr/lib/libcuda.so.1", None), None, 12040, 2, devices=(
        CudaDevice(0, "NVIDIA A100 80GB PCIe", 8, 0, 80 * 2**30, "00000000:10:00.0", None, None),
        CudaDevice(1, "NVIDIA A100 80GB PCIe", 8, 6, 40 * 2**30, "00000000:11:00.0", None, None),
        CudaDevice(2, None, None, 0, None, "00000000:99:00.0", None, None),
    ))
    view = FrameworkView("tensorflow", "TensorFlow", "TensorFlow 2.16.1 sees 2 GPU(s)", True, "2.16.1", (
        FrameworkGpu("GPU:0", None), FrameworkGpu("GPU:1", 1, "TF's name", (9, 0)), FrameworkGpu("GPU:3", 0),
        FrameworkGpu("GPU:4", None)))
    facts = replace(facts, cuda=ProbeOutcome("cuda", OK_EXIT, cuda), frameworks={"tensorflow": view})
    rc = next((f for f in findings if f.severity is Severity.BLOCKER), None)
    return Result(facts, {}, findings, rc, "not-accelerated" if rc else "accelerated", (), complete)


def test_the_gpus_a_marked_test_sees_are_the_frameworks_with_the_drivers_facts() -> None:
    """``machine_gpus``: the framework's GPUs in its order (the driver's for framework=None), each with the CUDA
    driver's name, memory, capability and bus id where the framework does not say, NVML's number as its subject,
    and what blocks it: a fault of its own GPU, or of a layer the test needs machine-wide; not another GPU's (where
    its NVML number is known)."""
    ecc = finding("ecc-errors", Severity.BLOCKER, summary="GPU-1 has memory errors.", cause="c", remedy="r",
                  subject="GPU-1")
    tf, none = marker.machine_gpus(_diagnosed((ecc,)), "tensorflow"), marker.machine_gpus(_diagnosed((ecc,)), None)
    assert tf == (
        Gpu(0, "/GPU:0", "NVIDIA A100 80GB PCIe", 80 * 2**30, "8.0", "00000000:10:00.0", 0, "GPU-1",
            "ecc-errors: GPU-1 has memory errors."),
        Gpu(1, "/GPU:1", "TF's name", 40 * 2**30, "9.0", "00000000:11:00.0", 1, "GPU-0", None),
        Gpu(2, "/GPU:2", "NVIDIA A100 80GB PCIe", 80 * 2**30, "8.0", "00000000:10:00.0", 0, "GPU-1",
            "ecc-errors: GPU-1 has memory errors."),
        # A GPU NVML's numbers cannot be told for is not known to be free of any GPU's fault.
        Gpu(3, "/GPU:3", None, None, None, None, None, None, "ecc-errors: GPU-1 has memory errors."),
    )
    assert none == (
        Gpu(0, "/GPU:0", "NVIDIA A100 80GB PCIe", 80 * 2**30, "8.0", "00000000:10:00.0", 0, "GPU-1",
            "ecc-errors: GPU-1 has memory errors."),
        Gpu(1, "/GPU:1", "NVIDIA A100 80GB PCIe", 40 * 2**30, "8.6", "00000000:11:00.0", 1, "GPU-0", None),
        Gpu(2, "/GPU:2", None, None, None, "00000000:99:00.0", 2, None, "ecc-errors: GPU-1 has memory errors."),
    )
    assert [g.usable for g in none] == [False, True, False]
    lost = finding("cudnn-missing", Severity.BLOCKER, summary="cuDNN 9 not found.", cause="c", remedy="r")
    # cuDNN is TensorFlow's: it blocks every GPU of a TensorFlow test, none of a driver-level one.
    assert {g.blocked_by for g in marker.machine_gpus(_diagnosed((lost,)), "tensorflow")} == {
        "cudnn-missing: cuDNN 9 not found."}
    assert {g.blocked_by for g in marker.machine_gpus(_diagnosed((lost,)), None)} == {None}
    # Another framework's blocker blocks none of TensorFlow's GPUs, nor a TensorFlow test machine-wide.
    jax = replace(lost, framework="jax")
    assert {g.blocked_by for g in marker.machine_gpus(_diagnosed((jax,)), "tensorflow")} == {None}
    assert marker.machine_blocker(_diagnosed((jax,)), "tensorflow") is None
    assert marker.machine_blocker(_diagnosed((lost,)), "tensorflow") is lost
    no_cuda = _diagnosed()
    no_cuda = Result(replace(no_cuda.facts, cuda=replace(no_cuda.facts.cuda, facts=None)), {}, (), None, "accelerated",
                     (), True)
    assert marker.machine_gpus(no_cuda, None) == ()
    assert marker.machine_gpus(_diagnosed(), "jax") == () and marker.machine_gpus(Result(
        None, {}, (), None, "accelerated", (), True), None) == ()
    machine = Machine.of(_diagnosed((ecc,)))
    assert set(machine.gpus) == {"none", "tensorflow"} and machine.gpus_for(None) == none
    assert machine.gpus_for("tensorflow") == tf and machine.gpus_for("jax") == ()
    assert marker.layers_for("tensorflow") == marker.FRAMEWORK_LAYERS and marker.layers_for(None) == marker.DRIVER_LAYERS
    assert "framework" in marker.FRAMEWORK_LAYERS and "framework" not in marker.DRIVER_LAYERS


def test_a_worker_sees_its_own_gpus_numbered_from_0() -> None:
    """``for_worker``: the GPUs of the ordinals a worker was given, in the order given, as GPU:0, GPU:1 ...; an
    ordinal no GPU has is left out; all of them when it was given none."""
    both = (A100, T4)
    assert marker.for_worker(both, None) == both
    assert marker.for_worker(both, (1, 0, 7)) == (
        Gpu(0, "/GPU:0", T4.name, T4.memory, T4.compute_capability, T4.bus_id, 1, T4.subject, None),
        Gpu(1, "/GPU:1", A100.name, A100.memory, A100.compute_capability, A100.bus_id, 0, A100.subject, None),
    )
    blocked = Gpu(**{**T4.__dict__, "blocked_by": "x: y", "cuda_ordinal": None})
    assert marker.for_worker((A100, blocked), (0,)) == (A100,) and marker.for_worker((blocked,), (1,)) == ()
    faulty = Gpu(**{**T4.__dict__, "blocked_by": "x: y"})
    assert marker.for_worker((A100, faulty), (1,))[0].blocked_by == "x: y"
    assert marker.for_worker(both, ()) == ()


def test_a_gpu_fits_by_memory_and_compute_capability() -> None:
    """``min_memory`` is at least the GPU's total memory (a GPU that does not say has none); ``compute_capability``
    is met by the same or a newer (major, minor), never by the major alone."""
    cc = Gpu(0, "/GPU:0", "x", 16 * 2**30, "8.6", None)
    assert marker._fits(cc, Need(1, "16GiB")) and not marker._fits(cc, Need(1, str(16 * 2**30 + 1)))
    assert marker._fits(cc, Need(1, None, (8, 6))) and marker._fits(cc, Need(1, None, (8, 0)))
    assert marker._fits(cc, Need(1, None, (7, 9))) and not marker._fits(cc, Need(1, None, (8, 7)))
    assert not marker._fits(cc, Need(1, None, (9, 0)))
    assert marker._fits(Gpu(0, "/GPU:0", "x", 1, "10", None), Need(1, None, (9, 9)))
    assert not marker._fits(Gpu(0, "/GPU:0", "x", None, None, None), Need(1, "1"))
    assert not marker._fits(Gpu(0, "/GPU:0", "x", 1, None, None), Need(1, None, (1, 0)))
    assert not marker._fits(Gpu(0, "/GPU:0", "x", 1, "9", None), Need(1, None, (9, 1)))  # "9" is 9.0
    assert marker._fits(Gpu(0, "/GPU:0", "x", None, None, None), Need(1))


def test_the_reason_a_marked_test_does_not_run() -> None:
    """``answer``: the test runs on the first ``count`` usable GPUs that fit; otherwise the reason names what it
    needs, what this machine (or this worker) has, which GPUs are too small and which are blocked by what."""
    blocked = Gpu(**{**T4.__dict__, "blocked_by": "ecc-errors: T4 has memory errors."})
    machine = _machine((A100, blocked))
    two = marker.answer(machine, Need(2))
    assert not two.runs and two.cause is None and two.gpus == ()
    assert two.reason == ("needs 2 GPU(s) that TensorFlow can use; this machine has 1 that fit: GPU:0 NVIDIA A100-SXM4-40GB, 40 GiB, cc 8.0; "
                          "blocked: GPU:1 by ecc-errors: T4 has memory errors.")
    assert marker.answer(machine, Need(1)).gpus == (A100,)
    only_blocked = marker.answer(_machine((blocked,)), Need(1))
    assert only_blocked.reason == "no usable GPU — ecc-errors: T4 has memory errors." and only_blocked.cause is None
    worker = marker.answer(_machine((A100, T4)), Need(1, None, (9, 0)), ordinals=(0, 1), per_worker=2)
    assert worker.reason == ("needs 1 GPU(s) with compute capability 9.0 or newer that TensorFlow can use; this xdist worker has 2 "
                             "(--gpucheck-gpus-per-worker 2): GPU:0 NVIDIA A100-SXM4-40GB, 40 GiB, cc 8.0 (too small); "
                             "GPU:1 Tesla T4, 15 GiB, cc 7.5 (too small)")
    given_none = marker.answer(_machine((A100, T4)), Need(1), ordinals=(5,), per_worker=1)
    assert given_none.reason == ("no usable GPU — this xdist worker was given none of the 2 GPU(s) "
                                 "(--gpucheck-gpus-per-worker)")
    driver = Machine(_machine(()).result, {"none": ()})
    assert marker.answer(driver, Need(framework=None)).reason == "no usable GPU — the CUDA driver lists no GPU"
    assert marker.answer(driver, Need(framework=None), ordinals=(0,)).reason == (
        "no usable GPU — the CUDA driver lists no GPU")
    # A bare marker (framework not given) where TensorFlow was not diagnosed asks the driver instead.
    bare = marker.answer(Machine(_machine((A100,)).result, {"none": (A100,)}), Need(framework_given=False))
    assert bare.runs and bare.gpus == (A100,)
    asked = marker.answer(Machine(_machine((A100,)).result, {"none": (A100,)}), Need(framework_given=True))
    assert asked.reason == ("TensorFlow was not diagnosed (--gpucheck-framework=none): only tests marked "
                            "gpu(framework=None) can be answered in this run") and asked.gpus == ()
    # An incomplete diagnosis: its root cause keeps every GPU from the test.
    broken = finding("diagnosis-incomplete", Severity.BLOCKER, summary="The run stopped.", cause="c", remedy="r")
    cut = Machine(Result(None, {}, (broken,), broken, "not-accelerated", (), False), {"none": ()})
    assert marker.machine_blocker(cut.result, None) is broken
    cut_answer = marker.answer(cut, Need(framework_given=True))
    assert cut_answer.cause is broken and cut_answer.reason == "no usable GPU — diagnosis-incomplete: The run stopped."
    lost = finding("gpu-lost", Severity.BLOCKER, summary="GPU 0 fell off the bus.", cause="c", remedy="r")
    assert marker.machine_blocker(_machine((), (lost,)).result, None) is lost
    assert marker.machine_blocker(_machine((), (lost,)).result, "tensorflow") is lost
    cudnn = finding("cudnn-missing", Severity.BLOCKER, summary="cuDNN 9 not found.", cause="c", remedy="r")
    assert marker.machine_blocker(_machine((), (cudnn,)).result, None) is None
    # What the answer says besides its reason: whether the test runs, on which GPUs, and the finding behind a "no".
    runs = marker.answer(machine, Need(1))
    assert (runs.runs, runs.reason, runs.cause) == (True, "", None)
    for no in (two, only_blocked, worker, given_none, asked, cut_answer, marker.answer(driver, Need(framework=None))):
        assert no.runs is False and no.gpus == ()
    assert asked.cause is None and marker.answer(_machine((), (lost,)), Need()).runs is False
    two_blocked = marker.answer(_machine((A100, blocked, Gpu(**{**blocked.__dict__, "index": 2}))), Need(2))
    assert two_blocked.reason.endswith("; blocked: GPU:1 by ecc-errors: T4 has memory errors.; GPU:2 by ecc-errors: "
                                       "T4 has memory errors.")
    # A TensorFlow test gets TensorFlow's GPUs, a driver-level one the driver's.
    split = Machine(_machine(()).result, {"none": (A100,), "tensorflow": (T4,)})
    assert marker.answer(split, Need(1)).gpus == (T4,)
    assert marker.answer(split, Need(1, framework=None)).gpus == (A100,)
    # Frameworks other than TensorFlow diagnosed: named, and the markers that can be answered.
    others = Machine(_machine(()).result, {"none": (), "jax": (), "torch": ()})
    assert marker.answer(others, Need(framework_given=True)).reason == (
        "TensorFlow was not diagnosed (--gpucheck-framework=jax,torch): only tests marked gpu(framework=None) or "
        "gpu(framework='jax,torch') can be answered in this run")
    # A bare marker answered by the driver keeps the worker's GPUs and its share.
    bare_worker = marker.answer(Machine(_machine(()).result, {"none": (A100, T4)}), Need(2, framework_given=False),
                                ordinals=(1,), per_worker=1)
    assert bare_worker.reason == ("needs 2 GPU(s) the CUDA driver lists; this xdist worker has 1 (--gpucheck-gpus-per-worker "
                                  "1): GPU:0 Tesla T4, 15 GiB, cc 7.5")


def test_the_document_the_workers_read_round_trips(tmp_path: Path) -> None:
    """What one process diagnosed, read back by another: the same decisions, the root cause the same finding."""
    lost = finding("gpu-lost", Severity.BLOCKER, summary="GPU 0 fell off the bus.", cause="c", remedy="r", subject="GPU-1")
    note = finding("device-order-differs", Severity.INFO, summary="s", cause="c", remedy="r")
    machine = _machine((Gpu(**{**A100.__dict__, "blocked_by": "gpu-lost: GPU 0 fell off the bus."}), T4), (note, lost))
    run = shared.SharedRun(tmp_path)
    run.publish(machine, "gw0")
    back = run.read()
    assert back is not None and run.producer() == "gw0"
    assert back.result.root_cause is back.result.findings[1] and back.result.root_cause.id == "gpu-lost"
    assert back.gpus == machine.gpus
    need = Need(1, "16GiB")
    assert marker.answer(back, need) == marker.answer(machine, need)
    (tmp_path / "facts.json").write_text(json.dumps({"schema": "gpucheck-shared/1", "findings": 3}))
    with pytest.raises(shared.SharedError, match="cannot be read"):
        run.read()


def test_every_part_of_the_diagnosis_a_worker_reads_is_the_controllers() -> None:
    """``document`` and ``machine_of``: a worker decides on the controller's diagnosis read back whole, through JSON:
    every finding with all its fields (its subject, action, framework, evidence), the root cause the same finding
    among them, the layers with their blockers, completeness, what was not checked, the GPUs, each framework's own
    verdict, root cause and layers, and the marker's GPUs of each framework; the facts as JSON for the report."""
    from dataclasses import replace as replaced

    from gpucheck.blocking import LayerState
    from gpucheck.diagnosis import FrameworkState

    cudnn = replaced(finding("cudnn-missing", Severity.BLOCKER, summary="cuDNN 9 not found.", cause="c", remedy="r",
                             evidence={"searched": ["/usr/lib"], "n": 2}), framework="tensorflow")
    note = finding("xid-recorded", Severity.INFO, summary="s", cause="c", remedy="r", subject="GPU-1")
    lost = finding("gpu-lost", Severity.BLOCKER, summary="GPU 0 fell off the bus.", cause="c", remedy="r",
                   subject="GPU-0", evidence={"recovery_action": "0x2 (Node Reboot Required)"})
    layers = (LayerState("visibility", "broken", ("gpu-lost",)), LayerState("framework", "blocked", (), "gpu-lost"))
    result = Result(
        None, {"nvml": {"facts": {"driver_version": "550.54.15"}}}, (note, cudnn, lost), lost, "not-accelerated",
        layers, False, {"xid-recorded": "the records probe did not run"}, ("GPU-0", "GPU-1"),
        (FrameworkState("tensorflow", "not-accelerated", cudnn, layers[1:]), FrameworkState("jax", "accelerated", None,
                                                                                           ())),
    )
    blocked = Gpu(**{**A100.__dict__, "blocked_by": "gpu-lost: GPU 0 fell off the bus."})
    machine = Machine(result, {"none": (blocked, T4), "tensorflow": (T4,)})
    doc = json.loads(json.dumps(shared.document(machine, "gw3")))
    assert (doc["schema"], doc["by"], doc["root_cause"]) == (shared.SCHEMA, "gw3", 2)
    assert doc["facts_json"] == {"nvml": {"facts": {"driver_version": "550.54.15"}}}
    back = shared.machine_of(doc)
    assert back == machine
    assert back.result.root_cause is back.result.findings[2]
    assert back.result.frameworks[0].root_cause is back.result.findings[1]
    assert lost.action == "reboot" and back.result.findings[2].action == "reboot"
    # A finding of an older document (no action, no framework, no evidence) reads with none of them.
    old = {**doc, "findings": [{k: v for k, v in f.items() if k not in ("action", "framework", "evidence", "subject")}
                               for f in doc["findings"]], "frameworks": None, "unchecked": None, "facts_json": None}
    older = shared.machine_of(old).result
    assert [(f.action, f.framework, f.evidence, f.subject) for f in older.findings] == [("none", None, {}, None)] * 3
    assert (older.frameworks, older.unchecked, older.partial_facts) == ((), {}, {})
    assert shared.machine_of({**doc, "root_cause": None, "complete": 1}).result.root_cause is None
    assert shared.machine_of({**doc, "complete": True}).result.complete is True
    odd = {**doc, "findings": [{**doc["findings"][0], "framework": 5}, *doc["findings"][1:]]}
    assert shared.machine_of(odd).result.findings[0].framework is None
    healthy = Machine(Result(None, {}, (note,), None, "accelerated", (), True), {"none": (T4,)})
    assert shared.document(healthy, "gw0")["root_cause"] is None
    assert shared.machine_of(json.loads(json.dumps(shared.document(healthy, "gw0")))) == healthy
    assert shared.machine_of({**doc, "complete": 0}).result.complete is False
    assert shared.machine_of({**doc, "frameworks": [{**doc["frameworks"][0], "root_cause": None}]}).result.frameworks[
        0].root_cause is None
    for bad in ({**doc, "schema": "gpucheck-shared/2"}, {k: v for k, v in doc.items() if k != "schema"}):
        with pytest.raises(shared.SharedError, match="is not gpucheck-shared/1"):
            shared.machine_of(bad)
    for broken in ({**doc, "findings": [{"id": "x"}]}, {**doc, "root_cause": 7}, {**doc, "layers": [{}]},
                   {**doc, "marker_gpus": {"none": [{"bogus": 1}]}}, {**doc, "findings": [{**doc["findings"][0],
                                                                                           "severity": "fatal"}]},
                   {k: v for k, v in doc.items() if k != "gpus"}):
        with pytest.raises(shared.SharedError, match="cannot be read"):
            shared.machine_of(broken)
    with pytest.raises(shared.SharedError, match=r"cannot be read \(KeyError: 'gpus'\)"):
        shared.machine_of({k: v for k, v in doc.items() if k != "gpus"})


def test_one_process_diagnoses_under_the_lock(tmp_path: Path) -> None:
    calls: list[str] = []

    def diagnose() -> Result:
        calls.append("ran")
        return incomplete(["cuda"], ["tensorflow"], {})

    run = shared.SharedRun(tmp_path)
    first = run.once(diagnose, "gw0", timeout=5)
    second = run.once(diagnose, "gw1", timeout=5)
    assert calls == ["ran"] and run.producer() == "gw0"
    assert first.result.root_cause is not None and second.result.root_cause is not None
    assert second.result.root_cause.id == "diagnosis-incomplete" and second.result.complete is False


def test_gpus_shared_out_to_workers() -> None:
    plan = shared.assign_gpus(None, 4, 2, 2)
    assert plan.visible == ("0,1", "2,3") and plan.ordinals == ((0, 1), (2, 3)) and not plan.shared
    reorder = shared.assign_gpus(["1", "0"], 2, 2, 1)
    assert reorder.visible == ("1", "0") and reorder.ordinals == ((0,), (1,))
    few = shared.assign_gpus(None, 1, 3, 1)
    assert few.visible == ("0", "0", "0") and few.shared
    assert shared.assign_gpus(None, 0, 2, 1).available == 0
    assert shared.visible_entries({"CUDA_VISIBLE_DEVICES": "2,,3"}) == ["2"]
    assert shared.visible_entries({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert shared.visible_entries({}) is None
    env = {
        "CUDA_VISIBLE_DEVICES": "0", shared.WORKER_GPUS_ENV: "1", shared.PARENT_VISIBLE_ENV: shared.UNSET,
        "HOME": "/h",
    }
    assert shared.parent_environment(env) == {"HOME": "/h"}
    assert shared.parent_environment({**env, shared.PARENT_VISIBLE_ENV: "3,1"})["CUDA_VISIBLE_DEVICES"] == "3,1"
    assert shared.worker_ordinals(env) == (1,) and shared.worker_ordinals({}) is None


def test_each_worker_gets_its_share_of_the_gpus_and_diagnoses_the_whole_run() -> None:
    """``assign_gpus``: no GPU to share gives each worker an empty CUDA_VISIBLE_DEVICES and no ordinal, shared by
    nobody; workers share only when they ask for more than there are. ``worker_ordinals`` reads the list it was
    handed (comma-separated; anything else is none). ``parent_environment`` is the worker's environment with the
    controller's CUDA_VISIBLE_DEVICES back, with or without the variables gpucheck adds."""
    none = shared.assign_gpus(None, 0, 3, 2)
    assert none == shared.Assignment(("", "", ""), ((), (), ()), 0, False)
    assert shared.assign_gpus(["0", "1", "2", "3"], 9, 2, 2) == shared.Assignment(("0,1", "2,3"), ((0, 1), (2, 3)), 4,
                                                                                   False)
    assert shared.assign_gpus(None, 4, 3, 2).shared and not shared.assign_gpus(None, 6, 3, 2).shared
    assert shared.assign_gpus(None, 2, 1, 3) == shared.Assignment(("0,1",), ((0, 1),), 2, True)
    assert shared.worker_ordinals({shared.WORKER_GPUS_ENV: "3, 1,,"}) == (3, 1)
    assert shared.worker_ordinals({shared.WORKER_GPUS_ENV: "3 1"}) is None
    assert shared.worker_ordinals({shared.WORKER_GPUS_ENV: ""}) == ()
    assert shared.parent_environment({"HOME": "/h"}) == {"HOME": "/h"}
    assert shared.parent_environment({shared.PARENT_VISIBLE_ENV: shared.UNSET}) == {}
    assert shared.parent_environment({"CUDA_VISIBLE_DEVICES": "1", shared.WORKER_GPUS_ENV: "1"}) == {
        "CUDA_VISIBLE_DEVICES": "1"}


def test_the_suite_side_names_what_shared_reads() -> None:
    from gpucheck import suite

    assert (suite.WORKERINPUT_KEY, suite.PRODUCER_KEY) == (shared.WORKERINPUT_KEY, shared.PRODUCER_KEY)
    assert shared.SharedRun(Path("/x")).facts_file.name == "facts.json"


def test_marker_is_registered_without_gpucheck(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["@pytest.mark.gpu(count=1, min_memory=None, compute_capability=None, framework=...): gpucheck's marker*"])
    assert sum(line.startswith("@pytest.mark.gpu") for line in result.stdout.lines) == 1


def test_a_wrong_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="import pytest\n\n@pytest.mark.gpu(count=0)\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_x.py::test_x: @pytest.mark.gpu(count=...) must be a whole number of GPUs of at least 1, not 0*"])
