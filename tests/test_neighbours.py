"""Issue 33: pytest-gpucheck is loaded in every pytest run of an environment where it is installed, beside projects
that have a ``gpu`` marker of their own with other meanings. Their own test files, released and cited
(tests/neighbours/*/SOURCE.md), run through their own command line from a copy with their own rootdir and ini, twice:
as installed (gpucheck loaded through its pytest11 entry point) and with ``-p no:gpucheck``. Each test's outcome and
skip reason, and the ``-m gpu`` selection, are the same both ways; gpucheck starts no diagnosis and says once, at
the end, that it left the project's own marker alone.

- dask/distributed 2026.7.1: ``test_nvml.py`` and ``test_nanny.py`` (every test marked ``gpu``; the project skips
  the GPU ones itself, "No GPUs available", and most of test_nanny.py passes on a CPU);
- dask 2026.7.1: its ``-m gpu`` tests (a marked ``pytest.param`` whose body calls ``pytest.importorskip``);
- zarr 3.1.6: the files with its marker (a ``skipif`` of its own beside the marker, a marked test that passes
  without a GPU, a fixture that adds the marker while the test sets up);
- smg (an inference gateway) v1.9.0, modelled: a ``gpu(count)`` marker registered by a conftest plugin with
  ``config.addinivalue_line``, ``gpu(0)`` to ``gpu(4)``, a collection filter that reads the count.

The projects' own requirements (tests/neighbours/requirements.txt) go into an environment of their own beside this
one (``neighbour_python``: a venv whose site-packages come first, then this environment's), made once per
requirements and interpreter in the user's cache; this environment stays as the test extra made it (zarr's pytest11
plugin and pytest-asyncio would load in every pytest process of gpucheck's own suite, docs/PITFALLS.md).

Each run records what pytest reported through a small observer plugin (``-p``), which also lists the gpucheck modules
the run imported: no ``gpucheck.diagnosis`` (the diagnosis, which starts the probe children), no ``gpucheck.session``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import pyenvs

NEIGHBOURS = Path(__file__).resolve().parent / "neighbours"
REQUIREMENTS = NEIGHBOURS / "requirements.txt"
TIMEOUT_S = 300
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: The line gpucheck writes at the end of a run whose ``gpu`` marker is the project's own (matched loosely).
OWN_LINE = re.compile(r"^gpucheck:.*\bown\b", re.MULTILINE)
#: gpucheck's modules that only a diagnosis (or a --gpucheck session) imports.
DIAGNOSIS_MODULES = ("gpucheck.diagnosis", "gpucheck.session", "gpucheck.isolation", "gpucheck.probes")

OBSERVER_MODULE = "gpucheck_neighbours_observer"
#: Loaded with ``-p`` in both runs: what pytest collected and reported, and which gpucheck modules the run imported.
OBSERVER = '''
import json, os, sys

_collected = []
_reports = {}


def pytest_collection_finish(session):
    _collected.extend(item.nodeid for item in session.items)


def pytest_runtest_logreport(report):
    longrepr = report.longrepr
    reason = None
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = [os.path.relpath(str(longrepr[0])), longrepr[1], str(longrepr[2])]
    _reports.setdefault(report.nodeid, {})[report.when] = {
        "outcome": report.outcome,
        "xfail": getattr(report, "wasxfail", None),
        "skip": reason,
    }


def pytest_unconfigure(config):
    record = {
        "collected": _collected,
        "reports": _reports,
        "gpucheck_modules": sorted(m for m in sys.modules if m == "gpucheck" or m.startswith("gpucheck.")),
        "gpucheck_plugin": config.pluginmanager.has_plugin("gpucheck"),
    }
    with open(os.environ["NEIGHBOURS_OBSERVER_OUT"], "w") as f:
        json.dump(record, f)
'''


@dataclass(frozen=True)
class Suite:
    """A project's own tests, run from a copy of ``tests/neighbours/<folder>``."""

    id: str
    folder: str
    #: The installed distributions the copied files belong to, and their versions (SOURCE.md).
    needs: Mapping[str, str]
    #: What is run, the same in both runs (paths, node ids, -m).
    run: tuple[str, ...]
    #: The paths ``--collect-only -m gpu`` collects (None: no selection run of its own).
    select: tuple[str, ...] | None
    #: The environment both runs get (the project's own switches).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Options both runs get beyond the project's own (its ini's addopts come first).
    options: tuple[str, ...] = ()
    #: Some outcomes the project gives itself here, checked in both runs: node id -> (outcome, part of the reason).
    expect: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: How many tests the run and the selection have.
    counts: tuple[int, int] = (0, 0)


#: 16 tests of test_nanny.py (the whole file takes about 45 s here): the nine the project's conftest skips without
#: --runslow, the one its own skipif skips as root, an xfail-marked parameter and its sibling, and four quick ones.
NANNY = "distributed/tests/test_nanny.py::"
NANNY_TESTS = (
    "test_no_hang_when_scheduler_closes", "test_close_on_disconnect", "test_nanny_death_timeout",
    "test_wait_for_scheduler", "test_lifetime", "test_repeated_restarts", "test_restart_memory", "test_close_joins",
    "test_malloc_trim_threshold", "test_unwriteable_dask_worker_space", "test_no_unnecessary_imports_on_worker",
    "test_environment_variable_config", "test_throttle_outgoing_transfers",
    "test_nanny_plugin_register_during_start_failure",
)
NVML = "distributed/diagnostics/tests/test_nvml.py::"

SUITES = (
    Suite(
        "distributed",
        "distributed-2026.7.1",
        {"distributed": "2026.7.1", "dask": "2026.7.1"},
        run=(NVML.rstrip(":"), *(NANNY + name for name in NANNY_TESTS)),
        select=("distributed",),
        expect={
            NVML + "test_one_time": ("skipped", "No GPUs available"),
            NVML + "test_enable_disable_nvml": ("passed", ""),
            NVML + "test_gpu_metrics": ("skipped", "No GPUs available"),
            NANNY + "test_lifetime": ("skipped", "need --runslow option to run"),
            NANNY + "test_environment_variable_config": ("passed", ""),
            NANNY + "test_no_unnecessary_imports_on_worker[scipy]": ("passed", ""),
        },
        counts=(30, 68),
    ),
    Suite(
        "dask",
        "dask-2026.7.1",
        {"dask": "2026.7.1"},
        run=("-m", "gpu", "dask"),
        select=("dask",),
        options=("-p", "no:asyncio"),  # dask-2026.7.1/SOURCE.md: its filterwarnings=error and pytest-asyncio
        expect={
            "dask/tests/test_backends.py::test_CreationDispatch_error_informative_message[cudf]": (
                "skipped", "could not import 'cudf'",
            ),
            "dask/array/tests/test_creation.py::test_arr_like[i4-C-None-shape0-chunks0-tuple-tuple-empty_like-cupy]": (
                "skipped", "could not import 'cupy'",
            ),
        },
        counts=(290, 290),
    ),
    Suite(
        "zarr",
        "zarr-3.1.6",
        {"zarr": "3.1.6"},
        run=("tests",),
        select=("tests",),
        expect={
            "tests/test_config.py::test_config_buffer_backwards_compatibility_gpu": ("passed", ""),
            "tests/test_buffer.py::test_gpu_buffer_prototype": ("skipped", "CuPy not installed or no GPU available"),
        },
        counts=(386, 162),
    ),
    Suite(
        "smg-cpu-lane",
        "smg-gpu-count",
        {},
        run=(),
        select=None,  # the tier filter leaves the gpu(0) tests: the run's own collection
        env={"E2E_GPU_TIER": "0"},  # smg's CPU-only job (smg-gpu-count/SOURCE.md)
        expect={
            "messages/test_basic.py::TestMessagesBasic::test_non_streaming_basic[anthropic]": ("passed", ""),
            "mlx/test_mlx_backend.py::TestMlxBackend::test_marks": ("passed", ""),
        },
        counts=(6, 0),
    ),
    Suite(
        "smg-every-tier",
        "smg-gpu-count",
        {},
        run=(),
        select=(),
        env={"E2E_RUNTIME": "vllm"},
        expect={
            "responses/test_validation.py::TestResponsesInputValidation::test_unknown_content_type_rejected[input_txt-openai]": (
                "passed", "",
            ),
            "router/test_pd_mmlu.py::TestPDMMLUHttp::test_pd_mmlu_basic[pd_http]": (
                "skipped", "Skipping for vllm: vLLM does not support HTTP mode",
            ),
            "chat_completions/test_openai_server.py::TestChatCompletionGptOss120B::test_chat_completion[grpc]": (
                "skipped", "local grpc workers for openai/gpt-oss-120b are not modelled",
            ),
        },
        counts=(14, 14),
    ),
)


@dataclass
class Run:
    returncode: int
    out: str
    record: dict[str, Any]

    @property
    def collected(self) -> list[str]:
        return list(self.record["collected"])

    def outcomes(self) -> dict[str, tuple[str, str]]:
        """Each test's outcome, and its skip or xfail reason with where it was raised, as pytest reported them."""
        found: dict[str, tuple[str, str]] = {}
        for nodeid, phases in self.record["reports"].items():
            setup, call, teardown = (phases.get(when) for when in ("setup", "call", "teardown"))
            decided = setup if setup is None or setup["outcome"] != "passed" or call is None else call
            outcome, why = "not run", ""
            if decided is not None:
                outcome = decided["outcome"]
                if decided["xfail"] is not None:
                    outcome = "xfailed" if outcome == "skipped" else "xpassed"
                    why = decided["xfail"]
                elif decided["skip"] is not None:
                    why = "{}:{}: {}".format(*decided["skip"])
                if decided is setup and outcome == "failed":
                    outcome = "error"
            if teardown is not None and teardown["outcome"] == "failed":
                outcome += " + teardown error"
            found[nodeid] = (outcome, why)
        return found


def _environment(observer: Path, out: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """This environment without pytest's and gpucheck's own variables (an outer run's addopts, xdist's worker
    id, a plugin autoload switch, gpucheck's settings) and the projects' (dask's and zarr's configuration, smg's
    switches), the observer on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GPUCHECK_", "DASK_", "ZARR_", "E2E_"))}
    env.pop("SKIP_BACKEND_SETUP", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(observer), os.environ.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NEIGHBOURS_OBSERVER_OUT"] = str(out)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def neighbour_python() -> Path:
    """The interpreter of the neighbours' environment (``tests.pyenvs.neighbours_python``: made by the README's install
    step, or here where it has not been)."""
    return pyenvs.neighbours_python()


@functools.cache
def _installed(python: Path, distribution: str) -> str:
    """A distribution's version in the neighbours' environment (asked once per session)."""
    done = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return done.stdout.strip() or done.stderr.strip()[-300:]


def _pytest(
    python: Path, project: Path, suite: Suite, args: tuple[str, ...], *, gpucheck: bool, tag: str
) -> Run:
    observer = project.parent / "observer"
    observer.mkdir(exist_ok=True)
    (observer / f"{OBSERVER_MODULE}.py").write_text(OBSERVER)
    out = project.parent / f"{tag}-{'installed' if gpucheck else 'without'}.json"
    command = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-p", OBSERVER_MODULE]
    if not gpucheck:
        command += ["-p", "no:gpucheck"]
    command += [*suite.options, *args]
    done = subprocess.run(
        command, cwd=project, env=_environment(observer, out, suite.env), capture_output=True, text=True,
        timeout=TIMEOUT_S, check=False,
    )
    text = ANSI.sub("", done.stdout + done.stderr)
    assert out.exists(), f"{' '.join(command)}: no record (exit {done.returncode})\n{text[-4000:]}"
    return Run(done.returncode, text, json.loads(out.read_text()))


@pytest.fixture
def project(request: pytest.FixtureRequest, tmp_path: Path, neighbour_python: Path) -> Path:
    suite: Suite = request.param
    for distribution, version in suite.needs.items():
        installed = _installed(neighbour_python, distribution)
        assert installed == version, (
            f"{suite.folder} is {distribution} {version}'s own tests; {installed} is installed in {neighbour_python}: "
            f"{REQUIREMENTS} and SOURCE.md must name the same release"
        )
    copy = tmp_path / "project"
    shutil.copytree(NEIGHBOURS / suite.folder, copy)
    return copy


def _assert_left_alone(installed: Run, without: Run) -> None:
    """gpucheck, loaded, started no diagnosis and said once that the marker is the project's own."""
    assert installed.record["gpucheck_plugin"], "gpucheck was not loaded through its entry point"
    assert not without.record["gpucheck_plugin"] and without.record["gpucheck_modules"] == []
    started = [m for m in installed.record["gpucheck_modules"] if m.startswith(DIAGNOSIS_MODULES)]
    assert started == [], f"a run without --gpucheck and without gpucheck's marker imported {started}"
    assert "tests marked gpu" not in installed.out and "verdict:" not in installed.out
    said = [line for line in installed.out.splitlines() if line.startswith("gpucheck")]
    assert len(said) == 1 and OWN_LINE.match(said[0]), said or installed.out[-3000:]
    assert not re.search(r"^gpucheck", without.out, re.MULTILINE)


@pytest.mark.parametrize("project", SUITES, ids=[s.id for s in SUITES], indirect=True)
def test_own_outcomes_and_reasons(project: Path, neighbour_python: Path, request: pytest.FixtureRequest) -> None:
    """Issue 33: each test's outcome and skip reason are the project's own, with gpucheck installed as without it;
    nothing started, one line at the end."""
    suite: Suite = request.node.callspec.params["project"]
    without = _pytest(neighbour_python, project, suite, suite.run, gpucheck=False, tag="run")
    installed = _pytest(neighbour_python, project, suite, suite.run, gpucheck=True, tag="run")
    assert without.returncode == 0, without.out[-4000:]
    expected = without.outcomes()
    assert len(expected) == suite.counts[0], sorted(expected)
    for nodeid, (outcome, reason) in suite.expect.items():
        assert expected[nodeid][0] == outcome and reason in expected[nodeid][1], (nodeid, expected[nodeid])
    assert installed.returncode == without.returncode, installed.out[-3000:]
    got = installed.outcomes()
    differ = [f"{n}:\n  without gpucheck: {expected.get(n)}\n  with gpucheck:    {got.get(n)}"
              for n in sorted(set(expected) | set(got)) if expected.get(n) != got.get(n)]
    assert not differ, f"{len(differ)} of {len(expected)} tests differ, the first:\n" + "\n".join(differ[:3])
    _assert_left_alone(installed, without)


SELECTIONS = tuple(s for s in SUITES if s.select is not None)


@pytest.mark.parametrize("project", SELECTIONS, ids=[s.id for s in SELECTIONS], indirect=True)
def test_own_gpu_selection(project: Path, neighbour_python: Path, request: pytest.FixtureRequest) -> None:
    """Issue 33: ``pytest --collect-only -m gpu`` selects the same tests with gpucheck installed as without it."""
    suite: Suite = request.node.callspec.params["project"]
    assert suite.select is not None
    args = ("--collect-only", "-q", "-m", "gpu", *suite.select)
    without = _pytest(neighbour_python, project, suite, args, gpucheck=False, tag="select")
    installed = _pytest(neighbour_python, project, suite, args, gpucheck=True, tag="select")
    assert without.returncode == 0, without.out[-4000:]
    assert len(without.collected) == suite.counts[1]
    assert installed.collected == without.collected
    assert installed.returncode == 0, installed.out[-4000:]


def _cited_files(folder: Path) -> dict[str, str]:
    rows = re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", (folder / "SOURCE.md").read_text(), re.MULTILINE)
    return dict(rows)


@pytest.mark.parametrize("folder", sorted({s.folder for s in SUITES}))
def test_the_copied_files_are_the_cited_ones(folder: str) -> None:
    """Every file copied from a release is byte for byte the one its SOURCE.md cites (sha256); in the released
    projects' folders every file but SOURCE.md is one of them."""
    here = NEIGHBOURS / folder
    cited = _cited_files(here)
    assert cited, f"{folder}/SOURCE.md cites no file"
    for name, digest in cited.items():
        assert hashlib.sha256((here / name).read_bytes()).hexdigest() == digest, name
    if folder != "smg-gpu-count":  # the model's other files are the model's (its SOURCE.md)
        on_disk = {p.relative_to(here).as_posix() for p in here.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        assert on_disk - {"SOURCE.md"} == set(cited)
