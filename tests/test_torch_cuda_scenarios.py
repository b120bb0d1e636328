"""Issue 36, point 7: PyTorch's real CUDA build (torch 2.14.1+cu130 with its nvidia-*-cu13 wheels) against the C-ABI
fakes, through the full ``pytest --gpucheck`` path in a venv of its own (no TensorFlow: the default framework is then
torch alone).

The table is tests/scenarios/torch/*.json, each citing the machine or report it models. Only libcuda.so.1 and
libnvidia-ml.so.1 are fakes: torch loads its own libcudart.so.13, cuBLAS, cuDNN and NCCL from the wheels. The CUDA 13
runtime gets every driver entry point through the fake's cuGetProcAddress_v2 and stops at its private export tables
(docs/PITFALLS.md, "PyTorch's CUDA build on the fakes"), so what these scenarios show of torch's own code is: the
driver-version check of its runtime (torch's real "driver on your system is too old (found version 12080)"), its wheel's
real arch list and build facts, NVML's device count, and the exact error where the runtime stops.

The venv is about 5.4 GB (measured: 1 min 50 s to install here from the local package registry, docs/pytorch.md):
``torch_cuda_python`` uses ``$GPUCHECK_TORCH_CUDA_PYTHON`` (an interpreter that has torch 2.14.1 and gpucheck's
requirements), else the venv ``tests/pyenvs.py`` makes once per cache under ``$XDG_CACHE_HOME/pytest-gpucheck``: the
README's install step and ``.ci/run`` make it ahead of the test command (``python -m tests.pyenvs``), and a session
that finds it missing makes it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import build_fake_machine, validate_report
from tests import fakelibs, pyenvs
from tests.contracts import assert_one_red_line
from tests.pyenvs import checkout_environment

SCENARIOS = sorted((Path(__file__).parent / "scenarios" / "torch").glob("*.json"))
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def torch_cuda_python() -> Path:
    """An interpreter with torch's CUDA build and gpucheck's requirements, without TensorFlow (module docstring): the
    one GPUCHECK_TORCH_CUDA_PYTHON names, else a venv made once per cache (``tests/pyenvs.py``, which the README's
    install step and .ci/run make ahead of the tests: about 2 minutes and 5.4 GB)."""
    given = os.environ.get("GPUCHECK_TORCH_CUDA_PYTHON")
    return Path(given) if given else pyenvs.torch_cuda_python()


def run_on_machine(
    scenario: dict[str, Any], torch_cuda_python: Path, fake_lib_cache: Path, tmp_path: Path, exit_: int,
    extra: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """``pytest --gpucheck`` of torch's CUDA build on the fake machine of ``scenario`` (``extra``: more variables), in
    a project folder of its own: its report, checked against the schema, and its output; it must exit ``exit_``."""
    project = tmp_path / "project"
    project.mkdir()
    env = checkout_environment(tmp_path / "site")
    env.update(build_fake_machine(scenario, tmp_path / "machine", fake_lib_cache), PY_COLORS="0", **(extra or {}))
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [str(torch_cuda_python), "-m", "pytest", "--gpucheck", f"--gpucheck-json={report_path}", "-p",
         "no:cacheprovider", "-rs"],
        cwd=project, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == exit_ and report_path.exists(), out[-4000:]
    report: dict[str, Any] = json.loads(report_path.read_text())
    validate_report(report, report_path)
    return report, out


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_torch_cuda_build_on_a_fake_machine(
    path: Path, torch_cuda_python: Path, fake_lib_cache: Path, tmp_path: Path
) -> None:
    scenario = json.loads(path.read_text())
    assert scenario.get("_source"), "every scenario cites the machine or report it models"
    expect = scenario["expect"]
    report, out = run_on_machine(scenario, torch_cuda_python, fake_lib_cache, tmp_path, expect["exit"])
    findings = {f["id"]: f for f in report["findings"]}
    assert list(report["frameworks"]) == ["torch"], report["frameworks"]
    assert report["verdict"] == expect["verdict"], out[-4000:]
    assert report["root_cause"]["id"] == expect["root_cause"], (list(findings), out[-4000:])
    for fid in expect.get("absent", []):
        assert fid not in findings, findings[fid]
    for fid, severity in expect.get("severity", {}).items():
        assert findings[fid]["severity"] == severity
    for fid, fields in expect.get("evidence", {}).items():
        for key, value in fields.items():
            assert findings[fid]["evidence"].get(key) == value, (fid, key, findings[fid]["evidence"])
    # What torch's own code said, read by the PyTorch child from the real CUDA build.
    child = report["facts"]["torch"]
    assert child["exit"]["status"] == "ok", child["exit"]
    torch = child["facts"]
    for key, value in expect.get("torch", {}).items():
        assert torch[key] == (list(value) if isinstance(value, list) else value), (key, torch[key])
    assert any(lib.endswith("/libcudart.so.13") for lib in torch["libraries"]), torch["libraries"]
    assert any("/machine/lib/libcuda.so." in lib for lib in torch["libraries"]), torch["libraries"]
    for pattern in expect.get("torch_warnings", []):
        assert any(fnmatch.fnmatch(w, pattern) for w in torch["warnings"]), (pattern, torch["warnings"])
    if "root_cause_torch_warning" in expect:  # the root cause's evidence, in torch's words
        evidence = report["root_cause"]["evidence"]
        said = evidence.get("torch_warning") or evidence.get("torch_warnings") or []
        said = [said] if isinstance(said, str) else said
        assert any(fnmatch.fnmatch(w, expect["root_cause_torch_warning"]) for w in said), evidence
    lines = out.splitlines()
    for pattern in expect.get("output", []):
        assert any(fnmatch.fnmatch(line, pattern) for line in lines), (pattern, out[-4000:])
    assert_one_red_line(report)


#: The DGX H100 of tests/scenarios/nvml/h100-sxm-8gpu-node.json (driver 570.133.20, CUDA 12.8: too old for the cu130
#: wheel, as driver-570-under-cu130-build), in a container with Docker's default /dev/shm of 64 MB (NVIDIA/nccl#342:
#: 4 GPUs in Docker, "Error while creating shared memory segment ... (size 9637888)", "By default, the shm size is
#: limited to 64MB under docker") and an allocator option torch does not know.
EIGHT_GPUS = Path(__file__).parent / "scenarios" / "nvml" / "h100-sxm-8gpu-node.json"
#: A tmpfs of Docker's default size mounted on the host view's /dev/shm, in a user and mount namespace of the run's own.
MOUNT_SHM = 'mount -t tmpfs -o size=64m tmpfs "$1" && shift && exec "$@"'


def test_resources_on_an_eight_gpu_container(torch_cuda_python: Path, fake_lib_cache: Path, tmp_path: Path) -> None:
    """Issue 36 point 2's resources through torch's real CUDA build, in one run: PYTORCH_CUDA_ALLOC_CONF with an
    option torch 2.14 does not know is memory-config-failed naming it, with torch's own parser's words (it never
    reaches its first allocation on the fakes, so its own refusal is asked of its parser); /dev/shm of 64 MiB on 8 GPUs
    is nccl-shm-failed, independent of the root cause; then the child with only known options says nothing."""
    scenario = json.loads(EIGHT_GPUS.read_text())
    scenario["env"] = {**scenario.get("env", {}), "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,bogus_key:1"}
    project = tmp_path / "project"
    project.mkdir()
    env = checkout_environment(tmp_path / "site")
    env.update(build_fake_machine(scenario, tmp_path / "machine", fake_lib_cache), PY_COLORS="0")
    shm = tmp_path / "machine" / "root" / "dev" / "shm"
    shm.mkdir(parents=True)
    report_path = tmp_path / "report.json"
    command = [str(torch_cuda_python), "-m", "pytest", "--gpucheck", f"--gpucheck-json={report_path}", "-p",
               "no:cacheprovider", "-rs"]
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", MOUNT_SHM, "sh", str(shm), *command], cwd=project, env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    out = done.stdout + done.stderr
    if not report_path.exists() and ("unshare" in out or "mount" in out):
        pytest.skip(f"no user and mount namespace here for a 64 MiB tmpfs: {out.strip()[-300:]}")
    assert done.returncode == 1 and report_path.exists(), out[-4000:]
    report: dict[str, Any] = json.loads(report_path.read_text())
    validate_report(report, report_path)
    findings = {f["id"]: f for f in report["findings"]}
    assert report["root_cause"]["id"] == "driver-too-old", (list(findings), out[-4000:])
    config = findings["memory-config-failed"]
    assert config["framework"] == "torch" and config["evidence"]["unknown_keys"] == ["bogus_key"]
    assert config["evidence"]["torch_said"] == "Unrecognized key 'bogus_key' in Accelerator allocator config."
    assert any(lib.endswith("/torch/lib/libc10.so") for lib in config["evidence"]["libraries"]), config["evidence"]
    nccl = findings["nccl-shm-failed"]
    assert nccl["severity"] == "degraded" and nccl["independent_of_root_cause"], nccl
    assert (nccl["evidence"]["size_bytes"], nccl["evidence"]["gpus"]) == (64 << 20, 8), nccl["evidence"]
    checks = {c["nodeid"].rsplit("::", 1)[-1]: c for c in report["checks"]}
    assert checks["test_dev_shm_holds_nccls_segments"]["outcome"] == "failed", checks["test_dev_shm_holds_nccls_segments"]
    assert checks["test_torch_accepts_its_allocator_configuration"]["outcome"] == "skipped"  # blocked by driver-too-old
    assert_one_red_line(report)
    # The child alone with only known options: torch's real build and its parser accept them, and the rule is silent.
    known = "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6"
    said = subprocess.run(
        [str(torch_cuda_python), "-W", "ignore", "-c",
         "import json; from gpucheck.facts import to_json; from gpucheck.frameworks.torch.child import probe_torch; "
         "print(json.dumps(to_json(probe_torch().allocator)))"],
        env={**env, "PYTORCH_CUDA_ALLOC_CONF": known}, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        check=False,
    )
    [child] = json.loads(said.stdout.strip().splitlines()[-1])
    assert (child["keys"], child["unknown"], child["malformed"], child["torch_said"]) == (
        ["expandable_segments", "max_split_size_mb", "garbage_collection_threshold"], [], None, None), said.stderr[-2000:]


#: The H100 on which torch's CUDA build runs until the runtime's private tables (a healthy machine for what is checked
#: here: the load of torch's own libraries comes first).
H100 = Path(__file__).parent / "scenarios" / "torch" / "h100-80gb-cu130-stops-at-export-tables.json"


def run_on_h100(
    library: str, torch_cuda_python: Path, fake_lib_cache: Path, tmp_path: Path, **env_more: str
) -> tuple[dict[str, Any], str, Path]:
    """torch's CUDA build through ``pytest --gpucheck`` on the H100 with the fake ``library`` installed beside the
    driver's (``libcudnn@9.0.0``): its report, its output, and the fake's file."""
    scenario = json.loads(H100.read_text())
    scenario["libraries"] = [*scenario["libraries"], library]
    name, _, version = library.partition("@")
    soname = getattr(fakelibs, name.upper()).soname
    other = tmp_path / "machine" / "lib" / f"{soname.split('.so')[0]}.so.{version}"
    extra = {k: v.format(other=other) for k, v in env_more.items()}
    report, out = run_on_machine(scenario, torch_cuda_python, fake_lib_cache, tmp_path, 1, extra)
    return report, out, other


def test_a_cudnn_loaded_before_the_wheels_own_is_named(
    torch_cuda_python: Path, fake_lib_cache: Path, tmp_path: Path
) -> None:
    """Issue 36 point 2: a cuDNN found before the one of torch's nvidia-cudnn wheel, lacking a symbol torch's libraries
    need (pytorch/pytorch#119989: /usr/local/cuda/lib64's cuDNN used in place of the wheel's, "undefined symbol: ...,
    version libcudnn_cnn_infer.so.8"). Here a libcudnn.so.9 loaded before torch's libraries (LD_PRELOAD), which
    libtorch_cuda.so's RPATH cannot overrule: the loader reuses a soname already loaded. The real torch 2.14.1+cu130
    import fails with the loader's own words ("undefined symbol: cudnnPoolingForward, version libcudnn.so.9"); the root
    cause names the file the loader took (the child's /proc/self/maps: torch maps its wheel's
    copy too, retrying with its CUDA libraries preloaded) and the wheel's copy, not framework-missing, under the id
    `gpucheck explain` gives the same words: cudnn-version-mismatch."""
    report, out, other = run_on_h100("libcudnn@9.0.0", torch_cuda_python, fake_lib_cache, tmp_path, LD_PRELOAD="{other}")
    findings = {f["id"]: f for f in report["findings"]}
    assert report["root_cause"]["id"] == "cudnn-version-mismatch", (list(findings), out[-4000:])
    assert "framework-missing" not in findings
    evidence = findings["cudnn-version-mismatch"]["evidence"]
    assert evidence["library"] == "libcudnn.so.9" and "version libcudnn.so.9" in evidence["import_error"], evidence
    assert (evidence["loaded"], evidence["found_by"]) == (str(other), "LD_PRELOAD"), evidence
    assert [p.split("/site-packages/")[-1] for p in evidence["wheel_copies"]] == ["nvidia/cudnn/lib/libcudnn.so.9"]
    assert any(fnmatch.fnmatch(line, "*root cause: cudnn-version-mismatch (libraries)*") for line in out.splitlines()), out[-3000:]
    assert_one_red_line(report)


def test_an_older_nvjitlink_on_ld_library_path_no_longer_shadows_torchs(
    torch_cuda_python: Path, fake_lib_cache: Path, tmp_path: Path
) -> None:
    """infiniflow/ragflow#4466 ("libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version
    libnvJitLink.so.12": torch's CUDA 12.1 wheels, a 12.0 toolkit's libnvJitLink on LD_LIBRARY_PATH, which libcusparse's
    RUNPATH comes after) cannot happen to torch 2.14: it preloads its wheel's nvJitLink before libcusparse is loaded
    (torch/__init__.py, pytorch/pytorch#138460). With a libnvJitLink.so.13 lacking the cu13 wheels' entry points first
    on LD_LIBRARY_PATH, torch imports, the wheel's copy is the one mapped, and no library is called shadowed."""
    report, out, other = run_on_h100("libnvjitlink13@13.0.39", torch_cuda_python, fake_lib_cache, tmp_path)
    assert "cuda-library-shadowed" not in {f["id"] for f in report["findings"]}, out[-3000:]
    torch = report["facts"]["torch"]["facts"]
    assert torch["importable"] is True and torch["found_first"] is None
    mapped = [lib for lib in torch["libraries"] if "/libnvJitLink.so" in lib]
    assert mapped and all(lib.endswith("/nvidia/cu13/lib/libnvJitLink.so.13") for lib in mapped), mapped
    assert str(other) not in torch["libraries"]
