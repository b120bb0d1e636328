"""Issue 15: ``gpucheck explain`` on the logs people really paste, from TensorFlow 1.x to 2.21, Linux and
Windows. Every log in tests/logs/history/ is lines copied from a public report; its INDEX-*.json entry names
the report, the TensorFlow version and OS the reporter gave, and the causes the thread established (root
cause first; none for a log of a working setup). Entries marked ``holdout`` were kept aside while the
patterns were written and tried only at the end (the closing note says how many held).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpucheck import knowledge, logs
from gpucheck.cli import main
from gpucheck.model import Severity

HISTORY = Path(__file__).parent / "logs" / "history"


def entries() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index in sorted(HISTORY.glob("INDEX-*.json")):
        out += json.loads(index.read_text())
    return out


ENTRIES = entries()


def test_the_history_is_large_and_varied() -> None:
    assert len(ENTRIES) >= 40
    assert all(e["source"].startswith("https://") for e in ENTRIES)
    assert all((HISTORY / e["file"]).is_file() for e in ENTRIES)
    assert sum(e["os"] == "windows" for e in ENTRIES) >= 5
    eras = {_major_minor(e["tensorflow"]) for e in ENTRIES}
    assert any(v is not None and v < (2, 0) for v in eras) and any(v is not None and v >= (2, 11) for v in eras)


def _major_minor(text: str) -> tuple[int, int] | None:
    v = knowledge.parse_version(text if text != "unknown" else None)
    return (v[0], v[1]) if v and len(v) >= 2 else None


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_each_log_gets_its_cause(entry: dict[str, Any]) -> None:
    lines = (HISTORY / entry["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
    findings, _classification, rc = logs.explain(lines)
    faults = [f for f in findings if f.severity is not Severity.INFO]
    expected = entry["expected"]
    if not expected:
        assert not [f for f in findings if f.severity is Severity.BLOCKER], [f.id for f in findings]
        return
    ids = [f.id for f in faults]
    assert expected[0] in ids, (ids, entry["note"])
    # The root cause is named first: the cause the thread found, not one of its consequences.
    blockers = [f for f in findings if f.severity is Severity.BLOCKER]
    if blockers:
        assert rc is not None and rc.id == expected[0], (rc.id if rc else None, ids, entry["note"])


#: Words of a remedy that name an era: pip's CUDA wheels, CUDA and cuDNN versions, TensorFlow versions.
_CUDA = re.compile(r"\bCUDA (?:toolkit )?(\d+)(?:\.(\d+))?")
_CUDNN = re.compile(r"\bcuDNN (\d+)(?:\.(\d+))?")


#: The logs whose reports say which TensorFlow they ran.
STATED = [e for e in ENTRIES if _major_minor(e["tensorflow"]) is not None]


@pytest.mark.parametrize("entry", STATED, ids=[e["file"] for e in STATED])
def test_no_remedy_names_another_era(entry: dict[str, Any]) -> None:
    """A log of TensorFlow 2.3 is not told to `pip install tensorflow[and-cuda]` (2.14 and later), nor to
    install CUDA 12 or cuDNN 9: every version a remedy names fits the log's own TensorFlow."""
    version = _major_minor(entry["tensorflow"])
    assert version is not None
    build = knowledge.tested_build(f"{version[0]}.{version[1]}")
    lines = (HISTORY / entry["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
    for f in logs.findings_from_log(lines):
        text = f.remedy
        if version < logs.AND_CUDA_SINCE:
            assert "and-cuda" not in text and "-cu12" not in text, (f.id, text)
        if build is None:
            continue
        for m in _CUDA.finditer(text):
            assert m.group(1) == build["cuda"].split(".")[0], (f.id, build, text)
        for m in _CUDNN.finditer(text):
            assert m.group(1) == build["cudnn"].split(".")[0], (f.id, build, text)


def test_a_benign_log_exits_0(tmp_path: Path) -> None:
    benign = [e for e in ENTRIES if not e["expected"]]
    assert benign
    for e in benign:
        assert main(["explain", str(HISTORY / e["file"])]) == 0, e["file"]


def test_era_from_library_names() -> None:
    era = logs.era(["Could not load dynamic library 'libcudart.so.10.1'; dlerror: libcudart.so.10.1: cannot open"])
    assert era is not None and era.cuda == "10.1" and set(era.tensorflow) == {"2.1", "2.2", "2.3"}
    windows = logs.era(["Could not load dynamic library 'cudart64_110.dll'; dlerror: cudart64_110.dll not found"])
    assert windows is not None and windows.cuda == "11" and "2.4" in windows.tensorflow and "2.15" not in windows.tensorflow
    old = logs.era(["ImportError: libcublas.so.9.0: cannot open shared object file: No such file or directory"])
    assert old is not None and old.cuda == "9.0" and "1.12" in old.tensorflow and "2.0" not in old.tensorflow
    assert logs.era(["oneDNN custom operations are on"]) is None


def test_windows_library_names() -> None:
    """TensorFlow's own message for a DLL that does not load (the format of the cudart64_110.dll logs above),
    for cuDNN and the driver's nvcuda.dll, which the collected logs do not show."""
    line = "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library '{0}'; dlerror: {0} not found"
    (cudnn,) = logs.findings_from_log([line.format("cudnn64_8.dll")])
    assert cudnn.id == "cudnn-missing" and "and-cuda" not in cudnn.remedy and "cuDNN 8" in cudnn.remedy
    (driver,) = logs.findings_from_log([line.format("nvcuda.dll")])
    assert driver.id == "libcuda-missing"
