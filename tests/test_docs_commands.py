"""Every command the README and the pages under docs/ show is run: here for real where it is cheap, else by the
test named for it, else it cannot run on this machine and the reason is given. And every relative link of those
pages points to a file that exists.

The convention the pages follow: a command is a line of a ```sh block (``#`` comments ignored) or a ``$ `` line
of any block (a ```console block shows a command and its real output); a ```shell block is a file shown whole (the
Slurm prolog), a ```yaml block a manifest: neither is a command of its own.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BENCHFILES = ROOT / "tests" / "benchfiles"
EXPLAINED = "tests/logs/history/lightweight-mmm-23-cudart64-110.log"


@dataclass(frozen=True)
class Elsewhere:
    """Run by another test: the file, the test function, and a string of the command that test's source holds."""

    test: str
    holds: str


@dataclass(frozen=True)
class Cannot:
    reason: str


@dataclass(frozen=True)
class Here:
    """Run for real by this module (``test_here_*``)."""


#: Each command shown, exactly as the page writes it, and how it is run.
COMMANDS: dict[str, Here | Elsewhere | Cannot] = {
    # README
    'python3 -m venv .venv && .venv/bin/pip install ".[tensorflow]" && .venv/bin/pytest --gpucheck --gpucheck-json=gpucheck-report.json':
        Elsewhere("tests/test_plugin.py::test_report_json_written_atomically_to_new_directory", '"--gpucheck", f"--gpucheck-json='),
    'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m tests.pyenvs && .venv/bin/pytest tests -n auto -m "not benchmark" && .venv/bin/pytest tests -m benchmark':
        Cannot("the suite itself, in a fresh venv: .ci/run runs exactly this (its install steps, then both pytest runs)"),
    # docs/ARCHITECTURE.md
    "python -m gpucheck.causepage > docs/causes.md":
        Elsewhere("tests/test_causepage.py::test_the_page_is_what_the_command_prints_today", '"gpucheck.causepage"'),
    # docs/benchmarks.md
    ".venv/bin/pytest --gpucheck --gpucheck-benchmarks --benchmark-json=benchmarks.json":
        Elsewhere("tests/test_performance.py::test_every_benchmark_runs_on_the_cpu_host", '"--gpucheck-benchmarks"'),
    ".venv/bin/gpucheck compare before.json after.json": Here(),
    ".venv/bin/gpucheck compare 0001 0002": Elsewhere("tests/test_compare.py::test_run_ids_in_a_storage_folder", "0001"),
    '.venv/bin/gpucheck compare before.json after.json --markdown >> "$GITHUB_STEP_SUMMARY"': Here(),
    ".venv/bin/gpucheck compare before.json after.json --plot changes.png":
        Elsewhere("tests/test_compare.py::test_plot_draws_a_real_png", '"--plot"'),
    # docs/cluster.md
    "srun --nodes=4 --ntasks-per-node=1 sh -c '.venv/bin/pytest --gpucheck --gpucheck-cluster --gpucheck-json=reports/$(hostname).json -q'":
        Cannot("needs a Slurm cluster; its pytest command is the cluster check the two next lines run on loopback"),
    ".venv/bin/pytest --gpucheck --gpucheck-cluster=local:2":
        Elsewhere("tests/test_cluster.py::test_local_self_test_of_the_distributed_runtime", '"--gpucheck-cluster=local:2"'),
    ".venv/bin/pytest --gpucheck --gpucheck-cluster=local:2+ps":
        Elsewhere("tests/test_cluster.py::test_local_parameter_server_smoke_test", '"--gpucheck-cluster=local:2+ps"'),
    # docs/explain.md
    f"gpucheck explain {EXPLAINED}": Here(),
    "gpucheck explain tests/logs/torch/leggedlab-26-sm120-rtx5090.log": Elsewhere(
        "tests/test_explain_torch.py::test_the_command_line_on_a_pytorch_fault_and_a_healthy_pytorch_log",
        "leggedlab-26-sm120-rtx5090.log",
    ),
    # docs/fleets.md
    "gpucheck doctor --framework=none --prometheus gpucheck.prom": Here(),
    "srun --nodes=32 --ntasks-per-node=1 sh -c '.venv/bin/pytest --gpucheck --gpucheck-json=reports/$(hostname).json -q'":
        Cannot("needs a Slurm cluster of 32 nodes; each node's command is README's `pytest --gpucheck --gpucheck-json`"),
    ".venv/bin/gpucheck merge reports/*.json --json fleet.json":
        Elsewhere("tests/test_merge.py::test_merge_of_a_fleet", '"--json"'),
    ".venv/bin/gpucheck merge /reports/*.json": Elsewhere("tests/test_merge.py::test_merge_of_a_fleet", "gpucheck_merge("),
    # docs/own-suites.md: tests/test_own_suites.py runs each (its COMMANDS, checked against the page there)
    "pytest --gpucheck -n 2 --gpucheck-json=gpucheck-report.json -rs tests":
        Elsewhere("tests/test_own_suites.py::test_host_gpucheck_under_xdist_and_require_fails_the_marked_tests", 'sample("host")'),
    "pytest -rs --junitxml=junit.xml":
        Elsewhere("tests/test_own_suites.py::test_cudnn_missing_skips_the_marked_tests_with_the_cause", 'sample("plain")'),
    "pytest --gpucheck-worker-memory=2GiB -rs":
        Elsewhere("tests/test_own_suites.py::test_healthy_h100_runs_the_marked_tests_and_bounds_the_worker_memory",
                  'sample("memory")'),
    "pytest -n 2 --gpucheck-gpus-per-worker=1 --gpucheck-framework=none --gpucheck-json=gpucheck-report.json -rs "
    "tests/test_worker_view.py":
        Elsewhere("tests/test_own_suites.py::test_two_gpus_one_per_worker_and_one_diagnosis", 'sample("per-worker")'),
    "pytest -rs --gpucheck-json=gpucheck-report.json": Elsewhere(
        "tests/test_own_suites.py::test_the_pytorch_sample_skips_then_fails_under_require_with_xdist",
        'sample("torch-plain")',
    ),
    "pytest -n 2 --gpucheck-require --gpucheck-gpus-per-worker=1 --gpucheck-worker-memory=2GiB -rs": Elsewhere(
        "tests/test_own_suites.py::test_the_pytorch_sample_skips_then_fails_under_require_with_xdist",
        'sample("torch-require")',
    ),
    # docs/measured.md
    "bash tools/gpu-acceptance.sh --no-install --archive gpu-acceptance.tgz gpu-acceptance":
        Elsewhere("tests/test_gpu_acceptance.py::acceptance", '"--no-install", "--bench-max-time", "0.1", "--archive"'),
    "bash tools/gpu-acceptance.sh gpu-acceptance":
        Cannot("a fresh venv with TensorFlow's CUDA wheels (about 3 GB from PyPI), for a GPU machine with network; "
               "tests/test_gpu_acceptance.py runs the same script with --no-install"),
    # docs/pytorch.md
    ".venv/bin/pytest --gpucheck --gpucheck-json=gpucheck-report.json":
        Elsewhere("tests/test_torch_session.py::test_pytest_gpucheck_with_only_the_torch_cpu_wheel",
                  '"--gpucheck", f"--gpucheck-json='),
    # docs/troubleshooting.md
    "pip uninstall -y gpucheck pytest-gpucheck && pip install pytest-gpucheck":
        Elsewhere("tests/test_pypi_clash.py::test_both_orders_then_the_other_uninstalled", "assert_fixed("),
}

#: Pages the README links to that other branches write (the `gpu` marker and the pytest-html hook, issue 27); once
#: one exists, this test asks for its line to go.
PENDING: set[str] = set()

_FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def commands(text: str) -> list[str]:
    found: list[str] = []
    for lang, body in _FENCE.findall(text):
        for line in body.splitlines():
            if line.startswith("$ "):
                found.append(line[2:].strip())
            elif lang == "sh" and line.strip() and not line.lstrip().startswith("#"):
                found.append(re.split(r"\s{2,}#", line)[0].strip())
    return found


def shown() -> dict[str, list[str]]:
    """Each command with the pages that show it."""
    out: dict[str, list[str]] = {}
    for page in PAGES:
        for command in commands(page.read_text(encoding="utf-8")):
            out.setdefault(command, []).append(page.relative_to(ROOT).as_posix())
    return out


def test_every_command_shown_is_accounted_for() -> None:
    commands_shown = shown()
    assert sorted(set(commands_shown) - set(COMMANDS)) == [], "a page shows a command no test runs: add it to COMMANDS"
    assert sorted(set(COMMANDS) - set(commands_shown)) == [], "COMMANDS names a command no page shows any more"
    assert all(len(how.reason) > 20 for how in COMMANDS.values() if isinstance(how, Cannot))


def test_the_tests_named_run_those_commands() -> None:
    for command, how in COMMANDS.items():
        if not isinstance(how, Elsewhere):
            continue
        path, name = how.test.split("::")
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        assert fn is not None, f"{how.test} (for {command!r}) does not exist"
        assert how.holds in (ast.get_source_segment((ROOT / path).read_text(encoding="utf-8"), fn) or ""), how


def test_every_relative_link_points_to_a_file() -> None:
    broken: list[str] = []
    for page in PAGES:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
            if rel in PENDING:
                continue
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
    arrived = sorted(p for p in PENDING if (ROOT / p).exists())
    assert arrived == [], f"{arrived} exist now: take them out of PENDING"


def _gpucheck(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "110"}
    return subprocess.run([sys.executable, "-m", "gpucheck.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def _sample(page: str, command: str) -> str:
    """The output a ```console block shows under ``$ command``."""
    for lang, body in _FENCE.findall((ROOT / page).read_text(encoding="utf-8")):
        lines = body.splitlines()
        if lang == "console" and lines and lines[0] == f"$ {command}":
            return "\n".join(lines[1:]) + "\n"
    raise AssertionError(f"{page} has no console block for {command!r}")


def test_here_explain_prints_what_the_page_shows() -> None:
    run = _gpucheck("explain", EXPLAINED)
    assert run.returncode == 1, run.stderr
    assert run.stdout == _sample("docs/explain.md", f"gpucheck explain {EXPLAINED}")


@pytest.mark.parametrize("markdown", [False, True], ids=["terminal", "markdown"])
def test_here_compare_of_two_real_files(tmp_path: Path, markdown: bool) -> None:
    """``gpucheck compare before.json after.json`` (and ``--markdown`` appended to a step summary) on two runs of a
    public project's benchmarks (tests/benchfiles/INDEX.md)."""
    before, after = BENCHFILES / "cachew_0008_sqlite3-backend.json", BENCHFILES / "cachew_0009_sqlite-multivalue.json"
    run = _gpucheck("compare", str(before), str(after), *(["--markdown"] if markdown else []))
    assert run.returncode in (0, 1) and run.stderr == "", run.stderr
    if markdown:
        summary = tmp_path / "summary.md"
        summary.write_text("earlier step\n")
        with summary.open("a") as out:
            out.write(run.stdout)
        assert summary.read_text().startswith("earlier step\n") and "| --- |" in summary.read_text().replace(":", "-")
    else:
        assert run.stdout.startswith("gpucheck compare: "), run.stdout[:200]


def test_here_doctor_prints_what_the_page_shows(tmp_path: Path) -> None:
    """The page's sample is this driverless host's (as tests/test_doctor.py::test_this_driverless_host has it): the
    summary and the textfile, less its comments and the two lines that change at every run, are what it shows."""
    run = _gpucheck("doctor", "--framework=none", "--prometheus", "gpucheck.prom", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stdout == _sample("docs/fleets.md", "gpucheck doctor --framework=none --prometheus gpucheck.prom")
    text = (ROOT / "docs" / "fleets.md").read_text(encoding="utf-8")
    shown = next(b for lang, b in _FENCE.findall(text) if b.startswith('gpucheck_verdict{verdict="accelerated"}'))
    per_run = ("gpucheck_last_run_timestamp_seconds ", "gpucheck_run_duration_seconds ")
    written = [ln for ln in (tmp_path / "gpucheck.prom").read_text().splitlines() if not ln.startswith("#")]
    assert [ln for ln in written if not ln.startswith(per_run)] == [
        ln for ln in shown.splitlines() if not ln.startswith(per_run)
    ]
    assert [ln.split()[0] for ln in written if ln.startswith(per_run)] == [p.strip() for p in per_run]

