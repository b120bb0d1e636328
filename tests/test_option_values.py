"""No Python traceback for any bad value of any option : every setting of the
option table (``gpucheck.settings.OPTIONS``), given as the command-line value, the environment variable
or the ini key, is either accepted or refused with one line that names the option and where the value
came from (exit code 4).

Hundreds of random values go through ``gpucheck.settings.resolve`` (what the plugin calls at start); a
handful go through the real command line. The table is read, not copied: a new option is covered the day
it is added.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import iniconfig
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import RUN_OPTIONS
from gpucheck.settings import OPTIONS, Option, SettingError, Settings, resolve

SOURCES = ("cli", "env", "ini")
FAST = ("--gpucheck", "--gpucheck-framework=none", *RUN_OPTIONS)


def origin_of(opt: Option, source: str) -> str:
    return {"cli": opt.flag, "env": f"environment variable {opt.env}", "ini": f"ini key {opt.ini}"}[source]


def lookups(opt: Option, source: str, value: str) -> tuple[Callable[[str], Any], Callable[[str], Any], dict[str, str]]:
    """cli and ini lookups and an environment in which ``opt`` has ``value`` from ``source`` only."""

    def cli(dest: str) -> Any:
        return value if source == "cli" and dest == opt.dest else None

    def ini(key: str) -> Any:
        return value if source == "ini" and key == opt.ini else None

    return cli, ini, ({opt.env: value} if source == "env" else {})


def contained(opt: Option, text: str) -> str:
    """A report path is tried for real (a probe file is created and removed in its directory): keep the
    random ones inside this test's directory."""
    if opt.name == "json" and (os.path.isabs(text) or ".." in text.split("/") or text.startswith("~")):
        return "x/" + text.lstrip("/")
    return text


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(opt=st.sampled_from(OPTIONS), source=st.sampled_from(SOURCES), text=st.text(max_size=40))
@example(opt=next(o for o in OPTIONS if o.name == "timeout"), source="env", text="1e9")
@example(opt=next(o for o in OPTIONS if o.name == "timeout"), source="cli", text="3e6")
@example(opt=next(o for o in OPTIONS if o.name == "timeout"), source="ini", text="nan")
@example(opt=next(o for o in OPTIONS if o.name == "json"), source="cli", text="/proc/version")
@example(opt=next(o for o in OPTIONS if o.name == "json"), source="env", text="a\nb\udcff/r.json")
def test_any_value_is_accepted_or_one_sentence_naming_the_option(
    in_tmp: Path, opt: Option, source: str, text: str
) -> None:
    value = contained(opt, text)
    cli, ini, env = lookups(opt, source, value)
    try:
        got = resolve(cli, ini, env, "tox.ini")
    except SettingError as exc:
        message = str(exc)
        assert message.startswith(f"{opt.flag} "), message
        assert f"from {origin_of(opt, source)}" in message, message
        assert message.isprintable(), message  # one line: newlines and undecodable bytes escaped
        return
    assert isinstance(got, Settings)
    sources = dict(got.sources)
    # Accepted, and the report will say where it came from (an empty ini value counts as unset).
    assert sources[opt.name] in (origin_of(opt, source) + (" in tox.ini" if source == "ini" else ""), "default")


# --- the real command line ---------------------------------------------------------------------------


def bad_value(opt: Option) -> str:
    """A value the option refuses, found by asking its parser (a new option needs no entry here)."""
    for candidate in ("soon", "-3", "/proc/version", "0%", "maybe"):
        try:
            opt.parse(candidate)
        except ValueError:
            return candidate
    raise AssertionError(f"no bad value found for {opt.flag}")


def cases() -> list[Any]:
    out = []
    for opt in OPTIONS:
        for source in SOURCES:
            if source == "cli" and getattr(opt, "switch", False):
                continue  # a switch takes no value on the command line
            out.append(pytest.param(opt, source, id=f"{opt.name}-{source}"))
    return out


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, opt: Option, source: str, value: str) -> pytest.RunResult:
    for other in OPTIONS:
        monkeypatch.delenv(other.env, raising=False)
    (pytester.path / "pytest.ini").unlink(missing_ok=True)  # hypothesis reuses the directory
    args = list(FAST)
    if opt.name == "framework" and source != "cli":
        args.remove("--gpucheck-framework=none")  # it would win over the value under test
    if source == "cli":
        args = [a for a in args if not a.startswith(opt.flag + "=")] + [f"{opt.flag}={value}"]
    elif source == "env":
        monkeypatch.setenv(opt.env, value)
    else:
        pytester.makefile(".ini", pytest=f"[pytest]\n{opt.ini} = {value}\n")
    return pytester.runpytest_subprocess(*args, "--co", "-q", timeout=120)


def assert_usage_error(result: pytest.RunResult, opt: Option, source: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ERROR: {opt.flag} ") and origin_of(opt, source) in lines[0], lines[0]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("opt", "source"), cases())
def test_bad_value_through_the_command_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, opt: Option, source: str
) -> None:
    assert_usage_error(run(pytester, monkeypatch, opt, source, bad_value(opt)), opt, source)


#: What argv, the environment and an ini line can carry: no NUL, no lone surrogates, no line breaks.
PRINTABLE = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="#;"), min_size=1, max_size=20
).filter(lambda t: t.strip() == t and t != "")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_values_through_the_command_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    """A few random values, end to end: refused with one line (exit 4), or a normal start."""
    opt = data.draw(st.sampled_from([o for o in OPTIONS if o.name != "framework"]), label="option")
    sources = [s for s in SOURCES if not (s == "cli" and getattr(opt, "switch", False))]
    source = data.draw(st.sampled_from(sources), label="source")
    value = contained(opt, data.draw(PRINTABLE, label="value"))
    with monkeypatch.context() as m:
        result = run(pytester, m, opt, source, value)
    if source == "ini":
        # What pytest itself reads back from the ini line (iniconfig, as pytest does).
        read = iniconfig.IniConfig(str(pytester.path / "pytest.ini"))["pytest"][opt.ini]
        value = read
    try:
        opt.parse(value) if value else None
    except ValueError:
        assert_usage_error(result, opt, source)
    else:
        # A normal start: the suite is collected (what exit code the verdict then gives is not the question).
        out = result.stdout.str() + result.stderr.str()
        assert result.ret not in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR), out
        assert "Traceback" not in out and "test_nvidia_gpu_on_pci_bus" in out, out
