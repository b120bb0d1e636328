"""Probe children start so that nothing in the user's working directory shadows gpucheck or TensorFlow: a
user's script named ``gpucheck.py`` (or ``tensorflow.py``) beside their tests was imported by every probe child
(``python -m`` puts the working directory first) and turned every probe into a crash. And they leave nothing
in the temporary folder: TensorFlow's AutoGraph writes a generated source there for each function it converts
and removes it only at a normal interpreter exit, which a probe child (``os._exit``) never has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTEST = Path(sys.executable).with_name("pytest")

SHADOW = 'raise SystemExit("the user\'s own {name}.py was imported by gpucheck")\n'


@pytest.mark.parametrize("framework", ["none", "tensorflow"])
def test_scripts_named_like_packages_in_the_working_directory_are_not_imported(tmp_path: Path, framework: str) -> None:
    for name in ("gpucheck", "tensorflow", "pynvml"):
        (tmp_path / f"{name}.py").write_text(SHADOW.format(name=name))
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = subprocess.run(
        [str(PYTEST), "--gpucheck", f"--gpucheck-framework={framework}", "--gpucheck-json=report.json",
         "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "TMPDIR": str(temporary)},
    )
    report = json.loads((tmp_path / "report.json").read_text())
    ids = [f["id"] for f in report["findings"]]
    assert not {"driver-call-crashed", "framework-crashed"} & set(ids), ids
    facts = report["facts"]
    for probe in ("cuda", "nvml", *(("framework", "libraries") if framework == "tensorflow" else ())):
        assert facts[probe]["exit"]["status"] == "ok", (probe, facts[probe]["exit"])
        assert "was imported by gpucheck" not in "\n".join(facts[probe]["exit"]["stderr_tail"])
    if framework == "tensorflow":
        import tensorflow as tf

        assert facts["framework"]["facts"]["version"] == tf.__version__
    assert "was imported by gpucheck" not in done.stdout + done.stderr
    assert sorted(p.name for p in temporary.iterdir()) == []
    import gpucheck

    assert report["environment"]["gpucheck_location"] == str(Path(gpucheck.__file__).resolve().parent.parent)
    assert str(tmp_path) not in report["environment"]["python_path"]
