"""Issue 37, points 6 and 8: a ``gpu`` marker that no machine can meet, or that says one thing twice, is a usage error
(exit 4, one sentence naming the test), never an INTERNALERROR or a silent choice.

``parse_need`` is checked in-process; each case then goes through a real pytest run of a one-test suite."""

from __future__ import annotations

from typing import Any

import pytest

from gpucheck.marker import MarkerError, parse_need

#: A marker's arguments (as ``parse_need`` gets them, and as the test file writes them), and the words its sentence
#: must hold.
BAD: dict[str, tuple[tuple[Any, ...], dict[str, Any], str, str]] = {
    "cc of 5000 digits": ((), {"compute_capability": "9" * 5000}, 'compute_capability="' + "9" * 5000 + '"',
                          "compute_capability=...) must be like '8.0'"),
    "cc of unicode digits": ((), {"compute_capability": "\u0668.\u0660"}, 'compute_capability="\\u0668.\\u0660"',
                             "compute_capability=...) must be like '8.0'"),
    "cc int of 5000 digits": ((), {"compute_capability": 10**5000}, "compute_capability=10**5000",
                              "compute_capability=...) must be like '8.0'"),
    "count of 5000 digits": ((), {"count": 10**5000}, "count=10**5000", "count=...) must be a whole number of GPUs"),
    "count given twice": ((2,), {"count": 1}, "2, count=1", "count given twice"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_parse_need_refuses_it_in_a_bounded_sentence(case: str) -> None:
    args, kwargs, _source, words = BAD[case]
    with pytest.raises(MarkerError) as info:
        parse_need(args, kwargs)
    assert words in str(info.value) and len(str(info.value)) < 400, str(info.value)[:500]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_marker_no_machine_can_meet_is_a_usage_error(pytester: pytest.Pytester, case: str) -> None:
    _args, _kwargs, source, words = BAD[case]
    pytester.makepyfile(test_x=f"import pytest\n\n@pytest.mark.gpu({source})\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert any("test_x.py::test_x: @pytest.mark.gpu" in line and words in line for line in result.stderr.lines)


def test_two_gpu_marks_in_pytestmark_are_a_usage_error(pytester: pytest.Pytester) -> None:
    """``pytestmark = [pytest.mark.gpu(1), pytest.mark.gpu(2)]``: the second was ignored without a word."""
    pytester.makepyfile(test_x="import pytest\n\npytestmark = [pytest.mark.gpu(1), pytest.mark.gpu(2)]\n\n"
                               "def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert any("test_x.py::test_x:" in line and "2 gpu marks" in line for line in result.stderr.lines), result.stderr.str()
