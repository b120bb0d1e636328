"""Issue 37, points 6 and 8: a ``gpu`` marker that no machine can meet, or that says one thing twice, is a usage error
(exit 4, one sentence naming the test), never an INTERNALERROR or a silent choice.

``parse_need`` is checked in-process; each case then goes through a real pytest run of a one-test suite."""

from __future__ import annotations

from typing import Any

import pytest

from gpucheck.marker import MarkerError, Need, default_framework, parse_need

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


#: Each refusal's whole sentence: what the marker takes, and the value given as the sentence shows it.
SENTENCES: list[tuple[tuple[Any, ...], dict[str, Any], str]] = [
    ((), {"gpus": 2, "cc": 1}, "@pytest.mark.gpu takes count, min_memory, compute_capability, framework; not cc, gpus"),
    ((1, 2), {}, "@pytest.mark.gpu takes at most one positional argument (count)"),
    ((2,), {"count": "3"}, "@pytest.mark.gpu: count given twice (2 by position, '3' by name): give it once"),
    ((0,), {}, "@pytest.mark.gpu(count=...) must be a whole number of GPUs of at least 1, not 0"),
    ((), {"count": 2.0}, "@pytest.mark.gpu(count=...) must be a whole number of GPUs of at least 1, not 2.0"),
    ((4097,), {}, "@pytest.mark.gpu(count=...) must be a whole number of GPUs of at most 4096, not 4097"),
    ((), {"min_memory": [8]}, "@pytest.mark.gpu(min_memory=...) must be an amount like '8GiB' or bytes, not [8]"),
    ((), {"min_memory": True}, "@pytest.mark.gpu(min_memory=...) must be an amount like '8GiB' or bytes, not True"),
    ((), {"min_memory": "lots"}, "@pytest.mark.gpu(min_memory=...) must be an amount of memory like 2GiB, 512MiB or a "
                                 "percentage like 10% (got 'lots')"),
    ((), {"min_memory": "50%"}, "@pytest.mark.gpu(min_memory=...) must be an absolute amount, not a share "
                                "(got '50%')"),
    ((), {"compute_capability": "sm_80"}, "@pytest.mark.gpu(compute_capability=...) must be like '8.0', not 'sm_80'"),
    ((), {"compute_capability": float("inf")}, "@pytest.mark.gpu(compute_capability=...) must be like '8.0', not inf"),
    ((), {"compute_capability": True}, "@pytest.mark.gpu(compute_capability=...) must be like '8.0', not True"),
    ((), {"framework": "pytorch"}, "@pytest.mark.gpu(framework=...) must be 'tensorflow' or 'torch' or None, not 'pytorch'"),
]


@pytest.mark.parametrize(("args", "kwargs", "sentence"), SENTENCES)
def test_each_refusal_is_one_sentence_naming_the_value(args: tuple[Any, ...], kwargs: dict[str, Any],
                                                       sentence: str) -> None:
    with pytest.raises(MarkerError) as info:
        parse_need(args, kwargs)
    assert str(info.value) == sentence


def test_a_marker_is_read_as_written() -> None:
    """The count (by position or by name, up to 4096), the memory as an amount, the capability as (major, minor) with a
    missing minor 0 (a number too: 8.6, 9), and whether the framework was named (``framework=None`` is a choice)."""
    assert parse_need((4096,), {"framework": None}) == Need(4096, None, None, None, True)
    assert parse_need((), {"count": 2, "framework": None}).count == 2
    assert parse_need((), {"compute_capability": "8", "framework": None}).compute_capability == (8, 0)
    assert parse_need((), {"compute_capability": 8.6, "framework": None}).compute_capability == (8, 6)
    assert parse_need((), {"compute_capability": 9, "framework": None}).compute_capability == (9, 0)
    assert parse_need((), {"min_memory": "16GiB", "framework": None}).min_memory == "16GiB"
    bare = parse_need((), {})
    assert bare.framework_given is False and bare.count == 1 and bare.framework == default_framework()
    assert parse_need((), {"framework": "tensorflow"}).framework_given is True


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
