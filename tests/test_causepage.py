"""docs/causes.md, the page of every cause, is what ``python -m gpucheck.causepage`` makes of the catalog, the
code and the log patterns today: regenerate it with that command when an id, a check, a rule's remedy or a log
pattern changes (docs/ARCHITECTURE.md, "Docs")."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucheck import causepage, knowledge, registry
from gpucheck.blocking import QUESTION_ATTRIBUTE
from gpucheck.model import catalog

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "causes.md"
REGENERATE = "python -m gpucheck.causepage > docs/causes.md"


@pytest.fixture(scope="module")
def causes() -> dict[str, causepage.Cause]:
    return causepage.gather()


def test_the_page_is_what_the_command_prints_today() -> None:
    """The command as docs/ARCHITECTURE.md gives it, run for real."""
    out = subprocess.run([sys.executable, "-m", "gpucheck.causepage"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout == PAGE.read_text(encoding="utf-8"), f"docs/causes.md is stale: run `{REGENERATE}`"


def test_every_catalog_id_has_a_section_and_every_section_an_id() -> None:
    sections = re.findall(r"^## `([^`]+)`$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert len(sections) == len(set(sections))
    assert set(sections) == set(catalog().causes), f"run `{REGENERATE}`"
    assert sections == list(catalog().causes)


def test_the_checks_it_names_are_those_the_check_modules_declare(causes: dict[str, causepage.Cause]) -> None:
    """The page reads ``@asks`` with ``ast``; the modules imported say the same (the benchmarks, whose question
    is built per benchmark, apart)."""
    declared: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "gpucheck").rglob("checks_*.py")):
        rel = path.relative_to(ROOT).as_posix()
        module = importlib.import_module(rel.removesuffix(".py").replace("/", "."))
        for name, fn in vars(module).items():
            question = getattr(fn, QUESTION_ATTRIBUTE, None)
            if question is not None and name.startswith("test_"):
                declared |= {(cid, f"{rel}::{name}") for cid in question.ids}
    read = {
        (cid, check.name)
        for cid, cause in causes.items()
        for check in cause.checks
        if check.layer != "performance"
    }
    assert read == declared
    assert len(declared) > 40


def test_every_log_pattern_and_cuinit_code_is_on_the_page(causes: dict[str, causepage.Cause]) -> None:
    """TensorFlow's patterns and every other framework unit's (``Framework.log_patterns``, PyTorch's)."""
    patterns = knowledge.data("log_patterns.json")
    on_page = {p["id"] for c in causes.values() for p in c.patterns}
    tables = registry.log_tables()
    assert {t.framework for t in tables} >= {"tensorflow", "torch"}
    assert on_page == {p.id for t in tables for p in t.patterns if p.finding}
    codes = {code for c in causes.values() for code, _ in c.cuinit}
    assert codes == {k for k, v in patterns["cuinit_codes"].items() if isinstance(v, dict)}


def test_a_rule_raising_an_id_from_its_table_is_found(causes: dict[str, causepage.Cause]) -> None:
    """An id a rule takes from a module table (the kernel log's Xid causes, nvmlInit's error codes) is found
    with the table's remedy, not lost: gsp-firmware-error is raised only that way."""
    raises = causes["gsp-firmware-error"].raises
    assert [r.where for r in raises] == ["gpucheck/records/rules.py:_cause"]
    assert raises[0].remedy is not None and "NVreg_EnableGpuFirmware=0" in raises[0].remedy
    lost = {r.where for r in causes["gpu-lost"].raises}
    assert "gpucheck/rules/driver.py:_nvml_init_error" in lost
