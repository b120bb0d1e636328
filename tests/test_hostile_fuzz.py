"""Property-based tests of the commands' inputs: whatever bytes ``gpucheck explain`` is given, whatever JSON
``gpucheck merge`` and ``gpucheck compare`` are given (of any shape, or a real file with any field replaced),
each answers with exit 0, 1 or 2 and never a traceback, within a bound that only says "it did not hang".

The seeds are real: this host's report from ``pytest --gpucheck`` and a pytest-benchmark file written by
pytest-benchmark itself, both made once for the module."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucheck.cli import main

FUZZ = settings(
    max_examples=60, deadline=timedelta(seconds=20), suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("seeds")
    (where / "test_bench.py").write_text("def test_sum(benchmark):\n    benchmark(sum, range(100))\n")
    subprocess.run(
        [sys.executable, "-m", "pytest", "--gpucheck", "--gpucheck-framework=none", "--gpucheck-json=report.json",
         "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_bench.py", "--benchmark-json=bench.json"],
        cwd=where, capture_output=True, timeout=300, check=False,
        # Under xdist this suite's worker variables would make pytest-benchmark switch itself off in the child.
        env={k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))},
    )
    return {
        "report": json.loads((where / "report.json").read_text()),
        "bench": json.loads((where / "bench.json").read_text()),
        "dir": where,
    }


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _replace(doc: Any, path: list[Any], value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def _paths(doc: Any, prefix: list[Any] | None = None, depth: int = 4) -> list[list[Any]]:
    prefix = prefix or []
    out: list[list[Any]] = []
    if depth == 0:
        return out
    items = doc.items() if isinstance(doc, dict) else enumerate(doc[:3]) if isinstance(doc, list) else []
    for key, value in items:
        out.append([*prefix, key])
        out.extend(_paths(value, [*prefix, key], depth - 1))
    return out


@FUZZ
@given(data=st.binary(max_size=4096))
def test_explain_takes_any_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("explain") / "log.txt"
    path.write_bytes(data)
    code, _, err = _run(["explain", str(path)])
    assert code in (0, 1, 2) and "Traceback" not in err, err
    if code == 2:  # only for what is not a log at all: a damaged gzip stream
        assert data[:2] == b"\x1f\x8b" and len(err.splitlines()) == 1, err


@FUZZ
@given(doc=json_values)
def test_merge_takes_json_of_any_shape(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    path = tmp_path_factory.mktemp("merge") / "report.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(["merge", str(path)])
    assert code in (0, 1, 2) and "Traceback" not in err, err


@FUZZ
@given(data=st.data())
def test_merge_takes_a_real_report_with_any_field_replaced(
    seeds: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path_in_doc = data.draw(st.sampled_from(_paths(seeds["report"])))
    doc = _replace(seeds["report"], path_in_doc, data.draw(json_values))
    path = tmp_path_factory.mktemp("merge") / "report.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(["merge", str(path)])
    assert code in (0, 1, 2) and "Traceback" not in err, (path_in_doc, err)


@settings(FUZZ, max_examples=15)  # each example is two comparisons of a real file
@given(data=st.data())
def test_compare_takes_a_real_benchmark_file_with_any_field_replaced(
    seeds: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path_in_doc = data.draw(st.sampled_from(_paths(seeds["bench"])))
    doc = _replace(seeds["bench"], path_in_doc, data.draw(json_values))
    folder = tmp_path_factory.mktemp("compare")
    (folder / "new.json").write_text(json.dumps(doc, allow_nan=True))
    (folder / "base.json").write_text(json.dumps(seeds["bench"]))
    for argv in (["compare", str(folder / "base.json"), str(folder / "new.json")],
                 ["compare", str(folder / "new.json"), str(folder / "base.json"), "--json"]):
        code, _, err = _run(argv)
        assert code in (0, 1, 2) and "Traceback" not in err, (path_in_doc, err)


@settings(FUZZ, max_examples=30)
@given(doc=json_values)
def test_compare_takes_json_of_any_shape(seeds: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    folder = tmp_path_factory.mktemp("compare")
    (folder / "odd.json").write_text(json.dumps(doc))
    (folder / "base.json").write_text(json.dumps(seeds["bench"]))
    code, _, err = _run(["compare", str(folder / "base.json"), str(folder / "odd.json")])
    assert code == 2 and "Traceback" not in err, err


@pytest.mark.parametrize("command", ["explain", "merge"])
def test_random_bytes_through_the_real_command_line(tmp_path: Path, command: str) -> None:
    """The same through the console script and standard input, for a few fixed byte strings."""
    import random

    rng = random.Random(7)
    for size in (0, 1, 17, 4096, 100_000):
        data = bytes(rng.randrange(256) for _ in range(size))
        path = tmp_path / f"input-{size}"
        path.write_bytes(data)
        args = ["-"] if command == "explain" else [str(path)]
        done = subprocess.run(
            [sys.executable, "-m", "gpucheck.cli", command, *args], input=data, capture_output=True, timeout=120, check=False
        )
        assert done.returncode in (0, 1, 2) and b"Traceback" not in done.stderr, done.stderr[-2000:]
