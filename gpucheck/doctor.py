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
from gpucheck.blocking import independent_of
from gpucheck.diagnosis import Diagnosis, Result
from gpucheck.isolation import Interrupts, ignore_interrupts
from gpucheck.model import ACTIONS, Finding, action_rank, unread
from gpucheck.model import verdict as verdict_of
from gpucheck.report import framework_label, node_action, other_faults, report_json, root_cause_lines
from gpucheck.reportfile import ReportWriteError, one_line, parse_report_path, reader_gone, report_target, write_report
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
        "--prometheus", metavar="PATH|-", default=None,
        help="write a node_exporter textfile (the verdict, one series per finding, the run's time) to PATH, "
        "atomically; '-' prints it on standard output instead of the summary (needs prometheus_client: pip install "
        "'pytest-gpucheck[prometheus]')",
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
            prometheus = parse_report_path(prometheus) if prometheus != "-" else prometheus
        except ValueError as exc:
            raise DoctorError(f"--prometheus: {str(exc).replace('the report', 'the textfile')}") from None
    target = own_json if own_json is not None else settings.json
    if prometheus is not None and target is not None and _same_file(target, prometheus):
        which = "standard output" if prometheus == "-" else prometheus
        raise DoctorError(f"--json and --prometheus both name {which}: one would overwrite the other")
    return Request(settings, target, prometheus, args.fail_on, tuple(notes))


def _same_file(a: str, b: str) -> bool:
    """Whether two output paths end in one file (``-``: standard output; a device such as /dev/null takes both)."""
    if "-" in (a, b):
        return a == b
    try:
        ta, tb = report_target(a), report_target(b)
    except ValueError:
        return False
    return ta.path == tb.path and ta.kind in ("file", "new")


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
    """Whether the findings, less those that say a source was not read to its end, leave the node usable."""
    left = unread(result.findings)
    return verdict_of([f for f in result.findings if f not in left]) not in FAIL_ON[fail_on]


def diagnosed(result: Result) -> bool:
    """Every probe reported and every source it was asked to read was read to its end (no :data:`UNREAD_KEY`)."""
    return result.complete and not unread(result.findings)


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
          registry=reg).set(1 if is_usable(result, fail_on) and diagnosed(result) else 0)
    Gauge("gpucheck_complete", "1 when every probe reported before the verdict and read its sources to their end",
          registry=reg).set(1 if diagnosed(result) else 0)
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
    # The root cause, as the report names it: none exactly when the verdict is accelerated (a degraded verdict's is
    # the lowest degraded finding).
    cause = Gauge("gpucheck_root_cause", "1 for the root cause the report names (none when the verdict is accelerated)",
                  ["id", "severity", "layer", "action", "gpu"], registry=reg)
    if (rc := result.root_cause) is not None:
        cause.labels(id=rc.id, severity=rc.severity.value, layer=rc.layer, action=rc.action, gpu=gpu_label(rc)).set(1)
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
    usable = "usable" if is_usable(result, fail_on) else "not usable"
    if not result.complete or (usable == "usable" and not diagnosed(result)):
        usable = "not diagnosed"
    lines = [f"gpucheck doctor: {result.verdict} ({usable}); recommended action: {node_action(result)}"]
    if interrupted is not None:
        lines.append(f"stopped by {interrupted} before the diagnosis finished; the probes were stopped")
    if result.root_cause is not None:
        lines.extend(root_cause_lines(result.root_cause, full=False))
    for f in other_faults(result):
        # As the terminal's summary: a fault the root cause cannot have caused (another GPU's) is said to be its own.
        lead = "also, not caused by the root cause" if independent_of(f, result.root_cause) else "also"
        lines.append(f"{lead}: {f.id} ({f.layer}, {f.severity.value}, action {f.action}): {f.summary}")
    for fw in result.frameworks:
        # Each framework diagnosed (--framework), with its own verdict: one's fault never blocks another's questions.
        why = f" (root cause: {fw.root_cause.id})" if fw.root_cause is not None else ""
        lines.append(f"framework {framework_label(result, fw.name)}: {fw.verdict}{why}")
    return [one_line(line) for line in lines]


def exit_status(result: Result, fail_on: str, interrupted: str | None) -> int:
    """2 for a diagnosis cut short, 1 for a node the findings make not usable, 2 for one whose sources were not all
    read to their end (not known is not healthy), else 0."""
    if interrupted is not None or not result.complete:
        return UNDIAGNOSED
    if not is_usable(result, fail_on):
        return NOT_USABLE
    return USABLE if diagnosed(result) else UNDIAGNOSED


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
    if req.prometheus not in (None, "-"):
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
        elif req.prometheus == "-":
            out.write(prometheus_text(result, req.fail_on, started, duration))
        else:
            out.write("\n".join(summary(result, req.fail_on, interrupted)) + "\n")
        out.flush()
    except BrokenPipeError:
        reader_gone(out)
    return UNDIAGNOSED if failed else status
