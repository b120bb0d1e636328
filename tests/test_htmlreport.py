"""gpucheck in pytest-html's report (issue 27, point 4): the Cause and Remedy columns and the diagnosis in the
summary section, seen as a person sees them: pytest-html 4 builds its table in the browser from JSON embedded
in the page, so the page is opened in a real headless Chromium and its DOM read after the scripts ran. And the
plugin without pytest-html, and every machine-given text escaped."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.blocking import Decision
from gpucheck.htmlreport import cause_and_remedy
from gpucheck.model import Severity, finding
from tests.test_plugin import DRIVERLESS_HOST

#: Debian's package is ``chromium`` (.ci/run installs it); others name it otherwise.
CHROMIUM = next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)
#: What a headless Chromium needs here: no sandbox (CI runs as root), no GPU, nothing fetched from outside, and
#: /tmp rather than /dev/shm (a container's is 64 MiB; Debian's wrapper means to add this flag then, but its
#: test fails when /dev/shm shows in two mounts: docs/PITFALLS.md).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
)
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


class Node:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.children: list[Node | str] = []

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str, cls: str | None = None) -> list[Node]:
        """The elements on the page (not in a ``<template>``, whose content the page only copies from)."""
        found = []
        for c in self.children:
            if isinstance(c, Node) and c.tag != "template":
                if c.tag == tag and (cls is None or cls in c.classes):
                    found.append(c)
                found.extend(c.find_all(tag, cls))
        return found


class Dom(HTMLParser):
    """The DOM Chromium dumped, as a tree (the standard library's parser; Chromium's serialisation is well formed)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.root = Node("#document", {})
        self._open = [self.root]
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self._open[-1].children.append(node)
        if tag not in VOID:
            self._open.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, 0, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                return

    def handle_data(self, data: str) -> None:
        self._open[-1].children.append(data)


def chromium(*args: str, profile: Path, timeout: float = 60) -> str:
    """Run headless Chromium (its own process group, killed whole on timeout); its standard output."""
    assert CHROMIUM is not None
    proc = subprocess.Popen(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, f"chromium exited {proc.returncode}"
    return out


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
def test_the_report_in_a_real_browser(
    pytester: pytest.Pytester, run_gpucheck: Callable[..., GpucheckRun], fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """Acceptance: ``pytest --gpucheck --html`` on this driverless host (its view, DRIVERLESS_HOST), opened in
    Chromium: the failed check's Cause and Remedy cells hold the root cause's id, cause, remedy and action as the
    JSON report of the same run gives them; every blocked check names its blocker and the remedy that unblocks
    it; the summary section holds the verdict and every layer's line."""
    pytest.importorskip("pytest_html", reason="pytest-html is not installed (the html extra)")
    fake_machine(DRIVERLESS_HOST)
    page = pytester.path / "report.html"
    run = run_gpucheck("--gpucheck-framework=none", f"--html={page}", "--self-contained-html")
    assert run.result.ret == 1, run.result.stdout.str()
    rc = run.report["root_cause"]
    assert rc["id"] == "no-nvidia-gpu"

    dom = Dom(chromium("--dump-dom", page.as_uri(), profile=pytester.path / "chromium-profile")).root
    heads = [_clean(th.text()) for th in dom.find_all("thead")[0].find_all("th")]
    assert heads == ["Result", "Test", "Cause", "Remedy", "Duration", "Links"]
    rows: dict[str, list[str]] = {}
    for body in dom.find_all("tbody", "results-table-row"):
        tds = body.find_all("tr", "collapsible")[0].find_all("td")
        assert len(tds) == len(heads), [td.text() for td in tds]  # no column shifted
        rows[_clean(tds[1].text())] = [_clean(td.text()) for td in tds]
    checks = {c["nodeid"]: c["outcome"] for c in run.report["checks"]}
    assert len(rows) == len(checks) >= 30, "the table is built by pytest-html's script: did it run?"

    failed = [cells for test, cells in rows.items() if cells[0] == "Failed"]
    assert len(failed) == 1 and failed[0][1].endswith("::test_nvidia_gpu_on_pci_bus")
    cause, remedy = failed[0][2:4]
    assert cause == _clean(f"{rc['id']} [{rc['layer']}, {rc['severity']}]: {rc['cause']}")
    assert remedy == _clean(f"{rc['remedy']} (action: {rc['action']})")

    skipped = {test: cells for test, cells in rows.items() if cells[0] == "Skipped"}
    assert len(skipped) == sum(outcome == "skipped" for outcome in checks.values()) >= 20
    for test, cells in skipped.items():
        assert cells[2] == _clean(f"blocked by {rc['id']} [{rc['layer']}]: {rc['summary']}"), test
        assert cells[3] == _clean(f"fix {rc['id']} first: {rc['remedy']}"), test

    summary = dom.find_all("div", "summary")[0]
    verdict = summary.find_all("p", "gpucheck-verdict")
    assert [_clean(p.text()) for p in verdict] == [f"gpucheck verdict: {run.report['verdict']} (root cause: {rc['id']})"]
    lines = summary.find_all("pre", "gpucheck-lines")[0].text().splitlines()
    for layer in run.report["layers"]:
        detail = f"by {rc['id']}" if layer["state"] == "blocked" else ", ".join(layer["finding_ids"])
        assert _clean(f"{layer['layer']} {layer['state']} {detail}") in map(_clean, lines), layer
    assert f"verdict: {run.report['verdict']}" in lines and f"recommended action: {run.report['action']}" in lines


def _rows_in_the_page(page: Path) -> dict[str, list[str]]:
    """pytest-html 4's rows as its page's script receives them (the JSON in ``data-jsonblob``), each cell's text:
    test id to [Result, Test, Cause, Remedy, Duration, Links]."""
    blob = re.search(r'data-jsonblob="([^"]*)"', page.read_text())
    assert blob is not None, "no data-jsonblob: is this pytest-html 4?"
    rows: dict[str, list[str]] = {}
    for reports in json.loads(html.unescape(blob.group(1)))["tests"].values():
        for entry in reports:
            cells = [_clean(html.unescape(re.sub(r"<[^>]+>", " ", cell))) for cell in entry["resultsTableRow"]]
            rows[cells[1]] = cells
    return rows


def test_the_cells_reach_the_page_under_xdist(
    pytester: pytest.Pytester, run_gpucheck: Callable[..., GpucheckRun], fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """Under pytest-xdist a check runs (and is decided) in a worker while pytest-html writes its rows in the
    controller: the Cause and Remedy cells travel on the test's report. They were empty under ``-n 2`` when they
    were looked up by node id in the controller, which never decides a check."""
    pytest.importorskip("pytest_html", reason="pytest-html is not installed (the html extra)")
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra)")
    fake_machine(DRIVERLESS_HOST)
    page = pytester.path / "report.html"
    run = run_gpucheck("--gpucheck-framework=none", "-n", "2", f"--html={page}", "--self-contained-html")
    assert run.result.ret == 1, run.result.stdout.str()
    rc = run.report["root_cause"]
    rows = _rows_in_the_page(page)
    checks = {c["nodeid"]: c["outcome"] for c in run.report["checks"]}
    assert len(checks) >= 30
    failed = [cells for cells in rows.values() if cells[0] == "Failed"]
    assert len(failed) == 1 and failed[0][1].endswith("::test_nvidia_gpu_on_pci_bus"), failed
    assert failed[0][2] == _clean(f"{rc['id']} [{rc['layer']}, {rc['severity']}]: {rc['cause']}")
    assert failed[0][3] == _clean(f"{rc['remedy']} (action: {rc['action']})")
    skipped = [cells for cells in rows.values() if cells[0] == "Skipped"]
    assert len(skipped) == sum(outcome == "skipped" for outcome in checks.values()) >= 20
    for cells in skipped:
        assert cells[2] == _clean(f"blocked by {rc['id']} [{rc['layer']}]: {rc['summary']}"), cells
        assert cells[3] == _clean(f"fix {rc['id']} first: {rc['remedy']}"), cells


def test_without_pytest_html_gpucheck_runs_and_loads_nothing_of_it(
    pytester: pytest.Pytester, run_gpucheck: Callable[..., GpucheckRun], fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """pytest-html is optional: with it switched off (as if not installed) the run ends as usual, and the
    module with its hooks is never imported."""
    fake_machine(DRIVERLESS_HOST)
    pytester.makeconftest(
        """
        import sys

        def pytest_terminal_summary(terminalreporter, config):
            loaded = "gpucheck.htmlreport" in sys.modules or config.pluginmanager.get_plugin("gpucheck-html") is not None
            terminalreporter.write_line(f"html hooks loaded: {loaded}")
        """
    )
    run = run_gpucheck("--gpucheck-framework=none", "-p", "no:html")
    assert run.result.ret == 1 and run.report["root_cause"]["id"] == "no-nvidia-gpu"
    run.result.stdout.fnmatch_lines(["html hooks loaded: False"])


HOSTILE = '<script>alert(1)</script> & "quoted" <img src=x onerror=alert(2)>'


def _hostile_finding(cause_id: str, severity: Severity) -> Any:
    return finding(cause_id, severity, summary=HOSTILE, cause=HOSTILE, remedy=HOSTILE, subject=f"GPU-0{HOSTILE}")


@pytest.mark.parametrize(
    "decision",
    [
        Decision("failed", faults=(_hostile_finding("no-nvidia-gpu", Severity.BLOCKER),), finding_ids=("no-nvidia-gpu",)),
        Decision("skipped", f"blocked by {HOSTILE}", blocked_by=_hostile_finding("no-nvidia-gpu", Severity.BLOCKER)),
        Decision("skipped", f"not checked: {HOSTILE}\x1b[2J"),
    ],
    ids=["failed", "blocked", "not-checked"],
)
def test_machine_given_text_never_becomes_markup(decision: Decision) -> None:
    """A cause, remedy or reason comes from the machine (a path, a log line, TF_CONFIG): it reaches the page as
    text. The only tags in a cell are the ones gpucheck writes."""
    cells = "".join(cause_and_remedy(decision))
    assert "<script" not in cells and "<img" not in cells and "\x1b" not in cells
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;" in cells
    assert set(re.findall(r"</?([a-z]+)", cells)) <= {"b", "i", "div"}


def test_a_passed_check_and_a_test_that_is_not_a_check_have_empty_cells() -> None:
    assert cause_and_remedy(Decision("passed", finding_ids=("x",))) == ("", "")
    assert cause_and_remedy(None) == ("", "")


def test_an_older_pytest_html_gets_a_warning_not_a_broken_page(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-html 3 hands its hooks py.xml elements, not HTML strings: gpucheck's cells would not fit. It says so
    and leaves the report as pytest-html makes it."""
    from gpucheck import htmlreport

    class Recorder:
        """pytest hands a configuration-time warning to this hook (not to ``warnings``)."""

        def __init__(self) -> None:
            self.messages: list[str] = []

        def pytest_warning_recorded(self, warning_message: Any) -> None:
            self.messages.append(str(warning_message.message))

    config = pytester.parseconfig()
    recorder = Recorder()
    config.pluginmanager.register(recorder)
    monkeypatch.setattr(htmlreport.metadata, "version", lambda name: "3.2.0")
    htmlreport.register(config, None, "gpucheck-html-test")  # type: ignore[arg-type]
    assert config.pluginmanager.get_plugin("gpucheck-html-test") is None
    # Only gpucheck's own words (pytest may add its assertion-rewriting notes about modules already imported).
    assert [m for m in recorder.messages if m.startswith("gpucheck:")] == [
        "gpucheck: pytest-html 3.2.0 is older than 4: its report gets no Cause and Remedy columns "
        "(pip install 'pytest-html>=4')"
    ]
    monkeypatch.setattr(htmlreport.metadata, "version", lambda name: "4.2.0")
    htmlreport.register(config, None, "gpucheck-html-test")  # type: ignore[arg-type]
    assert isinstance(config.pluginmanager.get_plugin("gpucheck-html-test"), htmlreport.HtmlReport)
    config.pluginmanager.unregister(name="gpucheck-html-test")


def test_the_summary_is_the_terminals_coloured_as_there_every_line_escaped() -> None:
    """The summary section: the verdict (its colour: green accelerated, amber degraded, red otherwise), the header
    line, then each line of the terminal's gpucheck section, coloured by its markup (a broken layer red and bold, an
    ok one green); machine text (a finding's id, summary, a layer's blocker) as text. The only tags are gpucheck's."""
    from gpucheck.blocking import LayerState
    from gpucheck.diagnosis import Result
    from gpucheck.htmlreport import summary_html

    rc = _hostile_finding("no-nvidia-gpu", Severity.BLOCKER)
    layers = (LayerState("hardware", "broken", ("no-nvidia-gpu",)), LayerState("kernel", "blocked", (), HOSTILE),
              LayerState("driver", "ok", ()), LayerState("framework", "not checked", ()))
    page = summary_html(Result(None, {}, (rc,), rc, "not-accelerated", layers, True))
    assert "<script" not in page and "<img" not in page
    assert set(re.findall(r"</?([a-z]+)", page)) == {"div", "p", "pre", "span"}
    assert page.startswith('<div class="gpucheck-summary" id="gpucheck"><p class="gpucheck-verdict" '
                           'style="font-size:1.3em;font-weight:bold;color:#c62828">gpucheck verdict: not-accelerated '
                           '(root cause: no-nvidia-gpu)</p><p class="gpucheck-header">gpucheck: diagnosis incomplete</p>')
    assert '<span style="color:#c62828;font-weight:bold">hardware   broken      no-nvidia-gpu</span>' in page
    assert '<span style="color:#2e7d32">driver     ok</span>' in page
    assert f'<span style="color:#a66300">kernel     blocked     by {html.escape(HOSTILE)}</span>' in page
    assert "\nframework  not checked\n" in page  # no markup: no span
    assert f"{html.escape(HOSTILE)}</span>" in page  # the root cause's summary, escaped, red and bold
    green = summary_html(Result(None, {}, (), None, "accelerated", (), True))
    assert 'color:#2e7d32">gpucheck verdict: accelerated</p>' in green
    degraded = _hostile_finding("pcie-link-degraded", Severity.DEGRADED)
    amber = summary_html(Result(None, {}, (degraded,), degraded, "degraded", (), True))
    assert 'color:#a66300">gpucheck verdict: degraded (root cause: pcie-link-degraded)</p>' in amber
    assert '<span style="color:#a66300;font-weight:bold">' in amber


def test_the_cells_of_a_failed_a_blocked_and_a_not_checked_check() -> None:
    """A failed check's cells: each fault, its id (and GPU), layer and severity, cause; and its remedy with its
    action, one block each. A blocked check: the blocker and the remedy that unblocks it. Not checked: why, and no
    remedy."""
    ecc = finding("ecc-errors", Severity.DEGRADED, summary="s", cause="Memory errors.", remedy="Reset it.",
                  subject="GPU-1")
    lost = finding("no-nvidia-gpu", Severity.BLOCKER, summary="No GPU.", cause="None on the bus.", remedy="Add one.")
    cause, remedy = cause_and_remedy(Decision("failed", faults=(ecc, lost), finding_ids=("ecc-errors", "no-nvidia-gpu")))
    assert cause == ('<div class="gpucheck-fault"><b>ecc-errors</b> (GPU-1) [health, degraded]: Memory errors.</div>'
                     '<div class="gpucheck-fault"><b>no-nvidia-gpu</b> [hardware, blocker]: None on the bus.</div>')
    assert remedy == ('<div class="gpucheck-fault">Reset it. <i>(action: reset-gpu)</i></div>'
                      f'<div class="gpucheck-fault">Add one. <i>(action: {lost.action})</i></div>')
    assert cause_and_remedy(Decision("skipped", "blocked by no-nvidia-gpu", blocked_by=lost)) == (
        "blocked by <b>no-nvidia-gpu</b> [hardware]: No GPU.", "fix no-nvidia-gpu first: Add one.")
    assert cause_and_remedy(Decision("skipped", "blocked by ecc-errors", blocked_by=ecc))[0] == (
        "blocked by <b>ecc-errors</b> (GPU-1) [health]: s")
    assert cause_and_remedy(Decision("skipped", "not checked: no kernel log")) == ("not checked: no kernel log", "")


def test_the_summary_shows_the_machines_header_lines_but_not_the_verdict_twice() -> None:
    """With the machine's facts: its header lines (what is on the bus, the driver, the framework, the GPUs' numbers),
    each a paragraph, less the terminal's own verdict line (the page's title says it); then the lines in a ``pre``."""
    from gpucheck.diagnosis import Result
    from gpucheck.htmlreport import summary_html
    from gpucheck.report import header_lines
    from tests.test_kernel_log import hand_facts

    result = Result(hand_facts([]), {}, (), None, "accelerated", (), True)
    header = [line for line in header_lines(result) if not line.startswith("gpucheck verdict:")]
    assert len(header) >= 2 and len(header) == len(header_lines(result)) - 1
    page = summary_html(result)
    assert page == (
        '<div class="gpucheck-summary" id="gpucheck"><p class="gpucheck-verdict" style="font-size:1.3em;'
        'font-weight:bold;color:#2e7d32">gpucheck verdict: accelerated</p>'
        + "".join(f'<p class="gpucheck-header">{html.escape(line)}</p>' for line in header)
        + '<pre class="gpucheck-lines" style="white-space:pre-wrap;color:#222;border:1px solid #ddd;padding:6px;'
        'background:#fafafa">' + page.split('background:#fafafa">', 1)[1].removesuffix("</pre></div>") + "</pre></div>"
    )
    assert page.endswith("</pre></div>") and "gpucheck verdict: accelerated</p>" in page
