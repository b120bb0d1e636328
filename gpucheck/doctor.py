"""``gpucheck doctor``: the diagnosis of ``pytest --gpucheck`` without pytest, for a Slurm prolog, a Kubernetes init
container, node-problem-detector or cron.

The settings are the option table's (``gpucheck.settings.OPTIONS``) as ``--NAME`` (``--timeout``, ``--framework``,
``--expect-gpus`` ...), generated from it, with the same ``GPUCHECK_*`` environment variables; ``--json PATH|-``
writes the report of ``pytest --gpucheck --gpucheck-json`` (atomically; ``-`` prints it instead of the summary),
``--prometheus PATH`` a node_exporter textfile (atomically; needs prometheus_client, imported only then).

Exit status: 0 the node is usable, 1 it is not (``--fail-on``: which verdicts count as not usable; by default
anything but ``accelerated``, as the pytest run), 2 it could not be diagnosed (a bad option, an interrupted or
incomplete diagnosis, a file that could not be written), always with one sentence and no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TextIO

from gpucheck import registry
from gpucheck.diagnosis import Diagnosis, Result
from gpucheck.isolation import Interrupts, ignore_interrupts
from gpucheck.model import ACTIONS, Finding, action_rank
from gpucheck.report import node_action, other_faults, report_json, root_cause_lines
from gpucheck.reportfile import ReportWriteError, one_line, parse_report_path, reader_gone, write_report
from gpucheck.settings import OPTIONS, Option, SettingError, Settings, conflicts, resolve

USABLE, NOT_USABLE, UNDIAGNOSED = 0, 1, 2
PROG = "gpucheck doctor"
#: ``--fail-on``: the verdicts that make the node not usable.
FAIL_ON: dict[str, tuple[str, ...]] = {
    "degraded": ("degraded", "not-accelerated"),
    "not-accelerated": ("not-accelerated",),
}
VERDICTS = ("accelerated", "degraded", "not-accelerated")
#: Options of the table doctor does not take as ``--NAME``: ``--json`` is its own (``-`` for standard output).
_OWN = frozenset({"json"})
_GPU_SUBJECT = re.compile(r"^GPU-(\d+)$")


class DoctorError(Exception):
    """Input doctor cannot work with: the sentence that says so (exit 2)."""


def flag(opt: Option) -> str:
    return f"--{opt.name}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The option table as ``--NAME``, then doctor's own options."""
    for opt in OPTIONS:
        if opt.name in _OWN or opt.pytest_only:
            continue
        parser.add_argument(flag(opt), **opt.arguments(f"{opt.help}. Also {opt.env}."))
    parser.add_argument(
        "--json", dest="doctor_json", metavar="PATH|-", default=None,
        help="write the report JSON (schema gpucheck-report/1, as pytest --gpucheck --gpucheck-json) to PATH, "
        "atomically; '-' prints it on standard output instead of the summary. Also GPUCHECK_JSON.",
    )
    parser.add_argument(
        "--prometheus", metavar="PATH", default=None,
        help="write a node_exporter textfile (the verdict, one series per finding, the run's time) to PATH, "
        "atomically (needs prometheus_client: pip install 'pytest-gpucheck[prometheus]')",
    )
    parser.add_argument(
        "--fail-on", choices=tuple(FAIL_ON), default="degraded",
        help="the least verdict that makes the node not usable (exit 1): degraded (the default, as the pytest "
        "run: anything but accelerated) or not-accelerated",
    )


@dataclass(frozen=True)
class Request:
    settings: Settings
    #: Where the report goes: a path, "-" for standard output, or None.
    json: str | None
    prometheus: str | None
    fail_on: str
    notes: tuple[str, ...]


def _doctor_words(text: str) -> str:
    """A sentence of the settings (written for pytest's ``--gpucheck-X``) in doctor's words (``--X``)."""
    return text.replace("--gpucheck-json", "--json").replace("--gpucheck-", "--")


def request(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Request:
    """What the command line and the environment ask for; :class:`DoctorError` with a sentence for bad input."""
    env = os.environ if environ is None else environ
    own_json: str | None = args.doctor_json

    def cli(dest: str) -> Any:
        if dest == "gpucheck_json":
            # Checked as pytest checks its report path (writable, not a folder) at start, not lost at the end.
            return own_json if own_json not in (None, "-") else None
        return getattr(args, dest, None)

    try:
        settings = resolve(cli, lambda key: None, env)
    except SettingError as exc:
        raise DoctorError(_doctor_words(str(exc))) from None
    sources = tuple((name, _doctor_words(source)) for name, source in settings.sources)
    notes = [_doctor_words(n) for n in conflicts(replace(settings, benchmarks=False))]
    if settings.benchmarks:
        # The benchmarks are planned from pytest's selection and handed to pytest-benchmark: a pytest run's.
        notes.append(
            "--benchmarks is ignored by gpucheck doctor: the benchmarks run under pytest "
            "(pytest --gpucheck --gpucheck-benchmarks); the performance layer reads 'not checked'"
        )
        settings = replace(settings, benchmarks=False)
    settings = replace(settings, sources=sources)
    prometheus: str | None = args.prometheus
    if prometheus is not None:
        try:
            import prometheus_client  # noqa: F401 - only whether it is there
        except ImportError:
            raise DoctorError(
                "--prometheus needs prometheus_client, which is not installed "
                "(pip install 'pytest-gpucheck[prometheus]' or pip install prometheus-client)"
            ) from None
        try:
            prometheus = parse_report_path(prometheus)
        except ValueError as exc:
            raise DoctorError(f"--prometheus: {str(exc).replace('the report', 'the textfile')}") from None
    target = own_json if own_json is not None else settings.json
    return Request(settings, target, prometheus, args.fail_on, tuple(notes))


class _Interrupted(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def diagnose(settings: Settings) -> tuple[Result, str | None]:
    """The diagnosis and, when a signal cut it short, the signal's name (the probes are killed then). The caller
    has made SIGTERM an interrupt (:class:`gpucheck.isolation.Interrupts`)."""
    diagnosis: Diagnosis | None = None
    try:
        diagnosis = Diagnosis(settings)
        return diagnosis.result(), None
    except KeyboardInterrupt as exc:
        ignore_interrupts()
        why = str(exc) or "SIGINT"
        if diagnosis is None:
            raise _Interrupted(why) from None
        return diagnosis.abandon(), why


def is_usable(result: Result, fail_on: str) -> bool:
    return result.verdict not in FAIL_ON[fail_on]


def gpu_label(f: Finding) -> str:
    """The GPU a finding is about, as NVML numbers it ("0"), or "" when it is about none."""
    m = _GPU_SUBJECT.match(f.subject or "")
    return m.group(1) if m else ""


def prometheus_text(result: Result, fail_on: str, started: float, duration: float) -> str:
    """The node_exporter textfile: the verdict, the action, one series per finding, the run's time, the units' key
    figures where they were measured (``registry.figures``: the all-reduce of --cluster, the matmul of a benchmark
    run)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    reg = CollectorRegistry()
    verdict = Gauge("gpucheck_verdict", "1 for the diagnosis's verdict, 0 for the others", ["verdict"], registry=reg)
    for v in VERDICTS:
        verdict.labels(verdict=v).set(1 if result.verdict == v else 0)
    Gauge("gpucheck_usable", f"1 when the node is usable (not {' nor '.join(FAIL_ON[fail_on])})",
          registry=reg).set(1 if is_usable(result, fail_on) and result.complete else 0)
    Gauge("gpucheck_complete", "1 when every probe reported before the verdict", registry=reg).set(
        1 if result.complete else 0
    )
    top = node_action(result)
    action = Gauge("gpucheck_action", "1 for the most severe recommended action of the findings, 0 for the others",
                   ["action"], registry=reg)
    for a in ACTIONS:
        action.labels(action=a).set(1 if a == top else 0)
    Gauge("gpucheck_action_level", "the most severe recommended action as a number: " +
          ", ".join(f"{i} {a}" for i, a in enumerate(ACTIONS)), registry=reg).set(action_rank(top))
    finding = Gauge("gpucheck_finding", "1 for each finding of the diagnosis (info findings are notes)",
                    ["id", "severity", "layer", "action", "gpu"], registry=reg)
    for f in result.findings:
        finding.labels(id=f.id, severity=f.severity.value, layer=f.layer, action=f.action, gpu=gpu_label(f)).set(1)
    Gauge("gpucheck_last_run_timestamp_seconds", "when the diagnosis started (Unix time)", registry=reg).set(started)
    Gauge("gpucheck_run_duration_seconds", "how long the diagnosis took", registry=reg).set(round(duration, 3))
    figures = registry.figures(result.facts_json())
    numbers = {k: v for k, v in figures.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if numbers:
        figure = Gauge("gpucheck_figure", "a key figure the run measured (matmul_tflops, allreduce_latency_ms, ...)",
                       ["name"], registry=reg)
        for name, value in numbers.items():
            figure.labels(name=name).set(value)
    return generate_latest(reg).decode("utf-8")


def summary(result: Result, fail_on: str, interrupted: str | None) -> list[str]:
    """The short human summary: the verdict with what it means for the node, the root cause with its remedy and
    action, the other faults one line each."""
    usable = "usable" if is_usable(result, fail_on) and result.complete else "not usable"
    if not result.complete:
        usable = "not diagnosed"
    lines = [f"gpucheck doctor: {result.verdict} ({usable}); recommended action: {node_action(result)}"]
    if interrupted is not None:
        lines.append(f"stopped by {interrupted} before the diagnosis finished; the probes were stopped")
    if result.root_cause is not None:
        lines.extend(root_cause_lines(result.root_cause, full=False))
    for f in other_faults(result):
        lines.append(f"also: {f.id} ({f.layer}, {f.severity.value}, action {f.action}): {f.summary}")
    return [one_line(line) for line in lines]


def exit_status(result: Result, fail_on: str, interrupted: str | None) -> int:
    if interrupted is not None or not result.complete:
        return UNDIAGNOSED
    return USABLE if is_usable(result, fail_on) else NOT_USABLE


def run(req: Request, out: TextIO, err: TextIO) -> int:
    """Diagnose, write what was asked for, print the summary (or the JSON for ``--json -``); the exit status."""
    for note in req.notes:
        err.write(f"{PROG}: note: {one_line(note)}\n")
    # SIGTERM (a prolog's timeout, a pod deleted) ends the run as Ctrl-C does: the probes killed, exit 2.
    interrupts = Interrupts()
    try:
        return _run(req, out, err)
    except _Interrupted as exc:
        err.write(f"{PROG}: stopped by {exc.why} before the diagnosis started\n")
        return UNDIAGNOSED
    except KeyboardInterrupt as exc:
        # After the diagnosis, while the files were written (each atomically: none is left half written).
        ignore_interrupts()
        err.write(f"{PROG}: stopped by {str(exc) or 'SIGINT'} while writing what the diagnosis found\n")
        return UNDIAGNOSED
    finally:
        interrupts.restore()


def _run(req: Request, out: TextIO, err: TextIO) -> int:
    started, clock = time.time(), time.monotonic()
    result, interrupted = diagnose(req.settings)
    duration = time.monotonic() - clock
    status = exit_status(result, req.fail_on, interrupted)
    data = report_json(result, [], req.settings)
    failed = False
    if req.json not in (None, "-"):
        try:
            write_report(req.json, json.dumps(data, indent=2) + "\n")
        except ReportWriteError as exc:
            err.write(f"{PROG}: {exc}\n")
            failed = True
    if req.prometheus is not None:
        try:
            write_report(req.prometheus, prometheus_text(result, req.fail_on, started, duration))
        except ReportWriteError as exc:
            err.write(f"{PROG}: {str(exc).replace('the report', 'the textfile')}\n")
            failed = True
    if interrupted is not None:
        err.write(f"{PROG}: stopped by {interrupted} before the diagnosis finished; the probes were stopped\n")
    try:
        if req.json == "-":
            out.write(json.dumps(data, indent=2) + "\n")
        else:
            out.write("\n".join(summary(result, req.fail_on, interrupted)) + "\n")
        out.flush()
    except BrokenPipeError:
        reader_gone(out)
    return UNDIAGNOSED if failed else status
