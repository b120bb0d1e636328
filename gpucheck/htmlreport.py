"""gpucheck in pytest-html's report (``--html``, pytest-html 4): a Cause and a Remedy column for every check,
and the diagnosis (the layers, the root cause, the verdict) in the report's summary section.

Optional: the plugin registers this object only when pytest-html is installed and ``--html`` is given, and
nothing here imports pytest-html (its hooks are declared optional). pytest-html 4 hands the cells over as
HTML strings that its page inserts as HTML: every text here comes from the machine (a path, a log line, an
environment variable) and is escaped before it goes into one.
"""

from __future__ import annotations

from collections.abc import Generator
from html import escape
from importlib import metadata
from typing import Any

import pytest

from gpucheck import report
from gpucheck.blocking import Decision
from gpucheck.diagnosis import Result
from gpucheck.model import Finding
from gpucheck.reportfile import one_line
from gpucheck.session import DECISION, GpucheckSession

#: The first pytest-html whose hooks take HTML strings (3.x took py.xml elements).
FIRST_MAJOR = 4
#: Where the two columns go among pytest-html's (Result, Test, Duration, Links): after the test's name.
COLUMN = 2
#: The report attribute that carries a check's two cells (HTML) from where it ran to where the page is written.
CELLS_ATTR = "gpucheck_html_cells"
#: The terminal's colours (``report.summary_lines`` markup) on a white page.
_COLOURS = {"red": "#c62828", "green": "#2e7d32", "yellow": "#a66300"}
_VERDICT_COLOURS = {"accelerated": "green", "degraded": "yellow"}


def _text(value: str) -> str:
    """One printable line (``one_line``), escaped for HTML."""
    return escape(one_line(value))


def _subject(f: Finding) -> str:
    return f" ({_text(f.subject)})" if f.subject is not None else ""


def cause_and_remedy(decision: Decision | None) -> tuple[str, str]:
    """The Cause and Remedy cells' contents (HTML) for a check decided ``decision``: a failed check's faults,
    each with its id, cause, remedy and action; a blocked check's blocker, whose remedy unblocks it; a check
    not checked, why. Nothing for a passed check or a test that is not a gpucheck check (``None``)."""
    if decision is None or decision.outcome == "passed":
        return "", ""
    if decision.outcome == "failed":
        causes = "".join(
            f'<div class="gpucheck-fault"><b>{_text(f.id)}</b>{_subject(f)} [{_text(f.layer)}, '
            f"{_text(f.severity.value)}]: {_text(f.cause)}</div>"
            for f in decision.faults
        )
        remedies = "".join(
            f'<div class="gpucheck-fault">{_text(f.remedy)} <i>(action: {_text(f.action)})</i></div>'
            for f in decision.faults
        )
        return causes, remedies
    blocker = decision.blocked_by
    if blocker is not None:
        cause = f"blocked by <b>{_text(blocker.id)}</b>{_subject(blocker)} [{_text(blocker.layer)}]: {_text(blocker.summary)}"
        return cause, f"fix {_text(blocker.id)} first: {_text(blocker.remedy)}"
    return _text(decision.reason), ""


def summary_html(result: Result) -> str:
    """The diagnosis as the terminal's gpucheck section shows it (``report.summary_lines``), coloured as
    there, under the verdict and the machine's header line; every line escaped."""
    rc = result.root_cause
    verdict = f"verdict: {result.verdict}" + (f" (root cause: {rc.id})" if rc is not None else "")
    colour = _COLOURS[_VERDICT_COLOURS.get(result.verdict, "red")]
    header = [line for line in report.header_lines(result) if not line.startswith("gpucheck verdict:")]
    lines = []
    for line, markup in report.summary_lines(result):
        style = ";".join(
            [f"color:{_COLOURS[c]}" for c in ("red", "green", "yellow") if markup.get(c)]
            + (["font-weight:bold"] if markup.get("bold") else [])
        )
        text = _text(line)
        lines.append(f'<span style="{style}">{text}</span>' if style else text)
    return (
        '<div class="gpucheck-summary" id="gpucheck">'
        f'<p class="gpucheck-verdict" style="font-size:1.3em;font-weight:bold;color:{colour}">gpucheck {_text(verdict)}</p>'
        + "".join(f'<p class="gpucheck-header">{_text(line)}</p>' for line in header)
        + '<pre class="gpucheck-lines" style="white-space:pre-wrap;color:#222;border:1px solid #ddd;padding:6px;'
        'background:#fafafa">' + "\n".join(lines) + "</pre></div>"
    )


class HtmlReport:
    """pytest-html's hooks for a ``--gpucheck`` run (registered by ``gpucheck.plugin`` with ``--html``)."""

    def __init__(self, session: GpucheckSession) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        # pytest-html's row hook is handed the report, not the item, and under pytest-xdist it runs in the
        # controller while the decision lives in the worker: the cells travel on the report (xdist sends a
        # report's attributes to the controller; TestReport takes unknown ones back as keyword arguments).
        rep = yield
        decision = item.stash.get(DECISION, None)
        if decision is not None:
            setattr(rep, CELLS_ATTR, list(cause_and_remedy(decision)))
        return rep

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[COLUMN:COLUMN] = ['<th class="gpucheck-cause">Cause</th>', '<th class="gpucheck-remedy">Remedy</th>']

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport | pytest.CollectReport, cells: list[str]) -> None:
        # Every row gets both cells (empty for the user's own tests), or the columns would shift.
        cause, remedy = getattr(report, CELLS_ATTR, ("", ""))
        cells[COLUMN:COLUMN] = [f'<td class="col-gpucheck-cause">{cause}</td>', f'<td class="col-gpucheck-remedy">{remedy}</td>']

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session) -> None:
        # pytest-html calls this from its own pytest_sessionfinish (trylast): gpucheck's has ended the diagnosis.
        prefix.append(summary_html(self.session.result()))


def register(config: pytest.Config, session: GpucheckSession, name: str) -> None:
    """Register the hooks for ``--html`` under ``name``; an older pytest-html gets a warning, not a broken page."""
    try:
        version = metadata.version("pytest-html")
        major = int(version.split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        version, major = "?", 0
    if major < FIRST_MAJOR:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"gpucheck: pytest-html {version} is older than {FIRST_MAJOR}: its report gets no Cause and Remedy "
                f"columns (pip install 'pytest-html>={FIRST_MAJOR}')"
            ),
            stacklevel=2,
        )
        return
    config.pluginmanager.register(HtmlReport(session), name)
