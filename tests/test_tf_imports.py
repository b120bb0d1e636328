"""TensorFlow's probe children import it without matplotlib (``gpucheck/frameworks/tensorflow/imports.py``): Keras
imports ``matplotlib.pyplot`` behind a ``try/except ImportError`` whenever it is installed, about 0.45 s of each
child's import. Kept out, never at the price of a TensorFlow that needs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = (
    "import json, sys\n"
    "from gpucheck.frameworks.tensorflow.framework import probe_framework\n"
    "facts = probe_framework()\n"
    "print(json.dumps({'importable': facts.importable, 'error': facts.import_error, 'version': facts.version,\n"
    "                  'matplotlib': 'matplotlib' in sys.modules, 'finders': [type(f).__name__ for f in sys.meta_path]}))\n"
)


def run_child() -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_real_tensorflow_is_imported_without_matplotlib() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: nothing to keep out")
    got = run_child()
    assert got["importable"] is True and got["matplotlib"] is False, got
    assert "_KeepOut" not in got["finders"], got  # the child's import system is left as it was found


def test_a_tensorflow_that_needs_matplotlib_is_imported_with_it(tmp_path: Path) -> None:
    """A package named tensorflow whose import needs matplotlib unguarded (none does today; the stand-in is written
    here): the import is tried again with matplotlib let in, and the probe reads it importable."""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    pkg = tmp_path / "tensorflow"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import matplotlib\n__version__ = '0.0-stand-in'\n"
        "class config:\n    @staticmethod\n    def list_physical_devices(kind=None):\n        return []\n"
    )
    code = (
        "import sys\nfrom gpucheck.frameworks.tensorflow.imports import import_tensorflow\n"
        "tf = import_tensorflow()\nprint(tf.__version__, 'matplotlib' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0.0-stand-in", "True"], done.stdout
