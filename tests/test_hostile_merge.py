"""``gpucheck merge`` given what a fleet's scripts and a hostile user give it: its own output among the
inputs, the same report twice, an output path that is an input, fields of other types, escape sequences in
host names, a reader that goes away. Every case through the real command line, on a real report of this host."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_merge import gpucheck_merge


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """This host's report, made by ``pytest --gpucheck --gpucheck-framework=none`` (a CPU-only host: not accelerated)."""
    where = tmp_path_factory.mktemp("host")
    (where / "test_nothing.py").write_text("")
    subprocess.run(
        [sys.executable, "-m", "pytest", "--gpucheck", "--gpucheck-framework=none", "--gpucheck-json=report.json",
         "-q", "-p", "no:cacheprovider"],
        cwd=where, capture_output=True, timeout=300, check=False,
    )
    report: dict[str, Any] = json.loads((where / "report.json").read_text())
    return report


def _write(path: Path, report: dict[str, Any], host: str) -> Path:
    report = json.loads(json.dumps(report))
    report["environment"]["host"] = host
    path.write_text(json.dumps(report))
    return path


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr, done.stderr


def test_an_input_given_as_the_output_is_refused_and_kept(real_report: dict[str, Any], tmp_path: Path) -> None:
    victim = _write(tmp_path / "victim.json", real_report, "node-01")
    before = victim.read_bytes()
    for output in (victim, tmp_path / "." / "victim.json"):
        done = gpucheck_merge(victim, "--json", output)
        assert done.returncode == 2 and "would be overwritten" in done.stderr, done.stderr
        assert victim.read_bytes() == before


def test_merging_a_folder_twice_leaves_out_its_own_fleet_json(real_report: dict[str, Any], tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    for i in (1, 2):
        _write(reports / f"node-0{i}.json", real_report, f"node-0{i}")
    fleet = reports / "fleet.json"
    first = gpucheck_merge(*sorted(reports.glob("*.json")), "--json", fleet)
    assert first.returncode == 1, first.stderr
    first_json = json.loads(fleet.read_text())
    second = gpucheck_merge(*sorted(reports.glob("*.json")), "--json", fleet)  # `reports/*.json` again
    _no_traceback(second)
    assert second.returncode == 1 and "fleet.json is a merged fleet JSON" in second.stderr, second.stderr
    again = json.loads(fleet.read_text())
    assert [h["host"] for h in again["hosts"]] == [h["host"] for h in first_json["hosts"]] == ["node-01", "node-02"]
    assert any("fleet.json" in n for n in again["notes"])
    only_fleet = gpucheck_merge(fleet)
    assert only_fleet.returncode == 2 and "no host's report" in only_fleet.stderr


def test_the_same_report_twice_is_one_host(real_report: dict[str, Any], tmp_path: Path) -> None:
    one = _write(tmp_path / "node-01.json", real_report, "node-01")
    copy = tmp_path / "copy-of-node-01.json"
    shutil.copy(one, copy)
    done = gpucheck_merge(one, one, copy, "--json", "-")
    assert done.returncode == 1, done.stderr
    merged = json.loads(done.stdout)
    assert [h["host"] for h in merged["hosts"]] == ["node-01"]
    assert len(merged["notes"]) == 2 and all("same report as" in n for n in merged["notes"])


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("findings",), 5),
        (("findings",), [5, "x", {"id": {"a": 1}, "severity": "blocker"}]),
        (("facts", "framework"), {"facts": {"version": {"major": 2}}}),
        (("facts", "nvml"), {"facts": {"gpus": "H100", "driver_version": ["550"]}}),
        (("facts", "kernel"), {"module_version": 550.54}),
        (("environment",), {"host": ["a", "b"]}),
        (("root_cause",), {"id": {"nested": True}, "summary": 7}),
        (("complete",), "yes"),
        (("facts", "cluster"), {"facts": {"tasks": 3}}),
        (("facts", "performance"), {"facts": {"results": {"x": 1}}}),
    ],
    ids=lambda v: json.dumps(v)[:40],
)
def test_fields_of_other_types_are_read_defensively(
    real_report: dict[str, Any], tmp_path: Path, where: tuple[str, ...], value: Any
) -> None:
    report = json.loads(json.dumps(real_report))
    node = report
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(report))
    done = gpucheck_merge(path)
    _no_traceback(done)
    assert done.returncode == 1 and "not-accelerated" in done.stdout, done.stdout + done.stderr


def test_escape_sequences_in_a_host_name_never_reach_the_terminal(real_report: dict[str, Any], tmp_path: Path) -> None:
    path = _write(tmp_path / "evil.json", real_report, "evil\x1b[2J\x1b]0;owned\x07\nnode")
    done = gpucheck_merge(path)
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "evil\\x1b[2J" in done.stdout
    assert not any(line.startswith("node") for line in done.stdout.splitlines())


def test_a_reader_that_goes_away_gets_no_traceback(real_report: dict[str, Any], tmp_path: Path) -> None:
    paths = [_write(tmp_path / f"node-{i:03d}.json", real_report, f"node-{i:03d}") for i in range(300)]
    for extra in ([], ["--json", "-"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpucheck.cli", "merge", *map(str, paths), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # `| head -1`
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) in (1, 2)
        assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_number_of_thousands_of_digits_is_one_sentence(real_report: dict[str, Any], tmp_path: Path) -> None:
    text = json.dumps(real_report).replace('"complete": true', '"complete": ' + "9" * 5000, 1)
    path = tmp_path / "digits.json"
    path.write_text(text)
    done = gpucheck_merge(path)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("gpucheck merge: ") and "5000 digits" in line


def test_a_fifo_no_one_writes_to_ends_in_a_sentence(real_report: dict[str, Any], tmp_path: Path) -> None:
    """`gpucheck merge FIFO` waited for ever for a writer; it now waits 10 s for data (the subprocess's 60 s
    bound in gpucheck_merge only says it did not hang)."""
    import os

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    done = gpucheck_merge(fifo)
    assert done.returncode == 2 and "nothing came from" in done.stderr and "Traceback" not in done.stderr


def test_two_different_reports_of_one_host_name_are_named_in_a_note(
    real_report: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 37, point 7: two different reports that both say node-01 (a node's report of another day beside
    today's) became two rows and a contradictory summary without a word; a note names them."""
    today = _write(tmp_path / "today.json", real_report, "node-01")
    older = json.loads(json.dumps(real_report))
    older["verdict"], older["root_cause"], older["findings"] = "accelerated", None, []
    yesterday = _write(tmp_path / "yesterday.json", older, "node-01")
    done = gpucheck_merge(today, yesterday, "--json", "-")
    _no_traceback(done)
    notes = json.loads(done.stdout)["notes"]
    assert len(notes) == 1 and "2 different reports say they are host node-01" in notes[0], notes
    assert str(today) in notes[0] and str(yesterday) in notes[0]
    assert "note: 2 different reports say they are host node-01" in done.stderr


@pytest.mark.parametrize(
    ("schema", "status", "words"),
    [("gpucheck-report/1.1", 1, None), ("gpucheck-report/1.12", 1, None),
     ("gpucheck-report/2", 2, "is a report of schema gpucheck-report/2, a version this gpucheck does not read"),
     ("gpucheck-report/x", 2, "its schema is 'gpucheck-report/x'"),
     (None, 2, "no \"schema\": \"gpucheck-report/1\"")],
)
def test_a_newer_minor_schema_is_read_and_another_major_refused_by_name(
    real_report: dict[str, Any], tmp_path: Path, schema: str | None, status: int, words: str | None
) -> None:
    """A report of ``gpucheck-report/1.1`` (a newer minor: fields added, none renamed) aborted the merge with "no
    schema"; it is read, and a major this gpucheck does not read is refused by its name."""
    report = json.loads(json.dumps(real_report))
    if schema is None:
        del report["schema"]
    else:
        report["schema"] = schema
    path = _write(tmp_path / "newer.json", report, "node-01")
    done = gpucheck_merge(path)
    _no_traceback(done)
    assert done.returncode == status, done.stdout + done.stderr
    if words is None:
        assert "not-accelerated" in done.stdout
    else:
        [line] = done.stderr.splitlines()
        assert words in line, line
