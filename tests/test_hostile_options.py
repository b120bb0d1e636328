"""Settings given in ways that used to do something quietly surprising: a yes/no value where the report's path
belongs, a list in the ini file, a value with spaces around it, two options writing one file, options that
cancel each other. Each through a real pytest run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import RUN_OPTIONS
from gpucheck.settings import Settings, conflicts


@pytest.mark.parametrize(
    ("ini", "sentence"),
    [
        ("[pytest]\ngpucheck_json = true\n", "--gpucheck-json must be a path for the report, not a yes/no value"),
        ('[tool.pytest.ini_options]\ngpucheck_json = false\n', "not a yes/no value"),
        ('[tool.pytest.ini_options]\ngpucheck_timeout = [30, 60]\n', "--gpucheck-timeout takes one value, not a list"),
    ],
    ids=["ini-true", "toml-false", "toml-list"],
)
def test_ini_values_of_the_wrong_kind_are_usage_errors(pytester: pytest.Pytester, ini: str, sentence: str) -> None:
    name = "pyproject.toml" if ini.startswith("[tool.") else "pytest.ini"
    (pytester.path / name).write_text(ini)
    result = pytester.runpytest_subprocess("--gpucheck", *RUN_OPTIONS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert sentence in result.stderr.str()
    assert not any(p.name in ("True", "False", "true", "false") for p in pytester.path.iterdir())


def test_values_are_stripped_of_spaces_like_every_other_option(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCHECK_FRAMEWORK", " None ")
    result = pytester.runpytest_subprocess("--gpucheck", *RUN_OPTIONS)
    assert result.ret != pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    assert "not diagnosed (--gpucheck-framework=none)" in result.stdout.str()  # " None " read as none


def test_junitxml_and_the_report_on_one_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--gpucheck", "--junitxml=out/result.xml", f"--gpucheck-json={pytester.path}/out/../out/result.xml",
        *RUN_OPTIONS,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--junitxml and --gpucheck-json name the same file" in result.stderr.str()
    assert not (pytester.path / "out" / "result.xml").exists()


def test_benchmarks_without_a_framework_say_they_are_ignored(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--gpucheck", "--gpucheck-framework=none", "--gpucheck-benchmarks", "-q",
                                           *RUN_OPTIONS)
    assert "--gpucheck-benchmarks is ignored with --gpucheck-framework=none" in result.stdout.str()
    assert conflicts(Settings(benchmarks=True)) == []
    assert conflicts(Settings(benchmarks=False, framework="none")) == []


def test_a_tf_config_nested_too_deep_is_a_finding_not_an_internal_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_CONFIG", "[" * 100_000)
    result = pytester.runpytest_subprocess("--gpucheck", "--gpucheck-framework=none", *RUN_OPTIONS)
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "RecursionError" not in out
    assert "cluster-config-invalid" in out and "TF_CONFIG is nested too deep for Python's json.loads" in out
    assert "tF_CONFIG" not in out


def test_escape_sequences_from_the_environment_never_reach_the_terminal(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An escape sequence in TF_CONFIG (clear the screen, set the window title) is shown as text."""
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "x": "\x1b[2J\x1b]0;pwn\x07"}}')
    result = pytester.runpytest_subprocess("--gpucheck", "--gpucheck-framework=none", "-rs", *RUN_OPTIONS)
    out = result.stdout.str()
    assert "cluster-config-invalid" in out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out


def test_a_cluster_document_too_long_for_any_environment_is_a_config_problem(pytester: pytest.Pytester) -> None:
    """An ini file can hold a TF_CONFIG document no process can be started with (execve's E2BIG beyond Linux's
    MAX_ARG_STRLEN): it read as a failed collective ("the cluster check ended without a result")."""
    doc = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}, "pad": "x" * 200_000}
    (pytester.path / "pytest.ini").write_text("[pytest]\ngpucheck_cluster = " + json.dumps(doc) + "\n")
    report = pytester.path / "report.json"
    pytester.runpytest_subprocess("--gpucheck", f"--gpucheck-json={report}", "--gpucheck-cluster-timeout=5", *RUN_OPTIONS)
    findings = {f["id"]: f for f in json.loads(report.read_text())["findings"]}
    assert "cluster-collective-failed" not in findings
    assert "MAX_ARG_STRLEN" in findings["cluster-config-invalid"]["summary"]


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["header", "quiet"])
def test_a_user_test_that_cannot_be_collected_exits_2_with_the_whole_diagnosis(pytester: pytest.Pytester, quiet: list[str]) -> None:
    """pytest ends a run at a collection error as at an interrupt (exit 2, as the exit-status table of docs/options.md says), but the
    person is still there: the diagnosis is waited for, with or without the header that used to wait for it."""
    (pytester.path / "test_broken.py").write_text("def test_a(:\n")
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("--gpucheck", ".", f"--gpucheck-json={report}", *RUN_OPTIONS, *quiet)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    data = json.loads(report.read_text())
    assert data["complete"] is True and data["root_cause"]["id"] != "diagnosis-incomplete", data["root_cause"]
    table = (Path(__file__).parent.parent / "docs" / "options.md").read_text()
    assert "a test file beside the suite could not be collected" in table
