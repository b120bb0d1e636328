"""``gpucheck`` command line: ``gpucheck explain [FILE|-] [--json]`` and ``gpucheck compare BASE NEW``.

``explain`` reads a TensorFlow or PyTorch log a person pasted (a file, or standard input with ``-`` or no
argument) and prints the findings the log supports, each with cause and remedy, in the same shape
as the report contract (``--json`` prints ``{"findings": [...]}``). It runs no probe and loads no
library: the log is the only evidence. Exit status: 0 when the log shows no blocker, 1 when it
does, 2 on a usage error.

``merge`` (``gpucheck.merge``) joins many hosts' reports into one table; exit 1 when a host is not
accelerated, 2 on unusable input.

``doctor`` (``gpucheck.doctor``) runs the diagnosis of ``pytest --gpucheck`` without pytest, for prologs, init
containers and cron: exit 0 the node is usable, 1 not, 2 it could not be diagnosed.

``compare`` (``gpucheck.compare``) reads two pytest-benchmark runs and says what differs between the two
machines and which benchmarks got slower beyond noise. Exit status: 0 no regression beyond the
threshold, 1 at least one, 2 unusable input (one sentence).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

from gpucheck import __version__

if TYPE_CHECKING:
    from gpucheck.logs import Classification
    from gpucheck.model import Finding


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpucheck", description="Does TensorFlow get NVIDIA GPU acceleration here, and if not, why not?"
    )
    parser.add_argument("--version", action="version", version=f"gpucheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    explain = sub.add_parser(
        "explain",
        help="explain a TensorFlow or PyTorch log: the causes it shows, with remedies",
        description="Read a TensorFlow or PyTorch log (FILE, or standard input for '-' or no FILE) and print the findings "
        "it supports. For a diagnosis of this machine run `pytest --gpucheck`.",
    )
    explain.add_argument("file", nargs="?", default="-", metavar="FILE|-", help="the log to read (default: stdin)")
    explain.add_argument("--json", action="store_true", help='print {"findings": [...]} as JSON')
    compare = sub.add_parser(
        "compare",
        help="compare two pytest-benchmark runs: what differs between the machines, what got slower",
        description="Compare two pytest-benchmark runs (JSON files, or run ids like 0001 in --storage): first what "
        "differs between the two machines (driver, CUDA, cuDNN, TensorFlow, GPUs, Python, CPU), then each "
        "benchmark's change with a verdict that accounts for noise. Exit status: 0 no regression beyond the "
        "threshold, 1 at least one, 2 unusable input.",
    )
    compare.add_argument("base", metavar="BASE", help="the run before: a pytest-benchmark JSON file or a run id")
    compare.add_argument("new", metavar="NEW", help="the run after")
    compare.add_argument(
        "--threshold", default="5%", metavar="PCT", help="a slower benchmark beyond this is a regression (default 5%%)"
    )
    compare.add_argument("--metric", default="median", choices=("median", "mean", "min", "max"), help="default median")
    compare.add_argument("--storage", default=".benchmarks", metavar="DIR", help="pytest-benchmark's storage, for run ids")
    compare.add_argument("--plot", metavar="FILE.png|FILE.svg", help="also draw the changes (needs matplotlib)")
    form = compare.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the comparison as JSON")
    form.add_argument("--markdown", action="store_true", help="print a Markdown table (a CI job summary)")
    merge = sub.add_parser(
        "merge",
        help="join many hosts' reports (--gpucheck-json) into one table and one JSON",
        description="Join the reports of many hosts (pytest --gpucheck --gpucheck-json on each) into one table: "
        "host, verdict, root cause, GPUs, driver, frameworks (each with its verdict), key figures; hosts whose root causes agree are grouped. Exit status: "
        "0 every host accelerated, 1 at least one not, 2 unusable input.",
    )
    merge.add_argument("reports", nargs="*", metavar="REPORT.json", help="the hosts' reports")
    merge.add_argument("--json", metavar="PATH", help="also write the merged JSON to PATH ('-': standard output only)")
    doctor = sub.add_parser(
        "doctor",
        help="diagnose this node without pytest (Slurm prolog, init container, cron): exit 0 usable, 1 not, 2 unknown",
        description="Run the diagnosis of `pytest --gpucheck` without pytest and print a short summary (verdict, root "
        "cause, remedy, recommended action). The settings are pytest's --gpucheck-NAME as --NAME, with the same "
        "GPUCHECK_* environment variables. Exit status: 0 the node is usable, 1 it is not (--fail-on), 2 it could "
        "not be diagnosed (bad option, interrupted or incomplete diagnosis, a file not written).",
    )
    from gpucheck.doctor import add_arguments as add_doctor_arguments

    add_doctor_arguments(doctor)
    return parser


def _read(path: str) -> list[str]:
    """The lines of the log at ``path`` (``-``: standard input), read by :mod:`gpucheck.inputfile`: bounded in size
    and time, in whatever encoding it was saved (UTF-16 from PowerShell, Latin-1, gzip)."""
    from gpucheck.inputfile import read_text

    return read_text(path).splitlines()


def run_explain(lines: list[str], as_json: bool, out: TextIO) -> int:
    """Print what the log shows to ``out``; the exit status: 1 when it shows a blocker, else 0. A reader that goes
    away (`gpucheck explain LOG | head -1`) ends the printing without a traceback; the status stands."""
    from gpucheck.logs import explain, ordered
    from gpucheck.model import Severity
    from gpucheck.registry import log_tables

    tables = log_tables()
    findings, classification, rc = explain(lines, tables)
    title = ordered(lines, tables)[0].title if tables else "TensorFlow"
    status = 1 if any(f.severity is Severity.BLOCKER for f in findings) else 0
    reconfigure = getattr(out, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")  # a log's characters the terminal's encoding cannot show
    try:
        _print_explanation(lines, as_json, findings, classification, rc, out, title)
        out.flush()
    except BrokenPipeError:
        from gpucheck.reportfile import reader_gone

        reader_gone(out)
    return status


def _print_explanation(
    lines: list[str],
    as_json: bool,
    findings: list[Finding],
    classification: Classification,
    rc: Finding | None,
    out: TextIO,
    title: str = "TensorFlow",
) -> None:
    from gpucheck.report import failure_text

    if as_json:
        json.dump({"findings": [f.to_json() for f in findings]}, out, indent=2)
        out.write("\n")
        return
    recognised = len(classification.matches)
    out.write(
        f"gpucheck explain: {len(lines)} lines read, {recognised} recognised "
        f"({len(classification.harmless)} harmless)\n\n"
    )
    if not findings:
        out.write(f"No line of this log shows a cause that keeps {title} from the GPU.\n")
    for f in findings:
        out.write(failure_text(f) + "\n\n")
    if classification.harmless:
        counts = Counter(m.pattern.summary for m in classification.harmless)
        out.write("harmless, no action needed:\n")
        for summary, n in counts.items():
            out.write(f"  - {summary} ({n} line{'s' if n != 1 else ''})\n")
        out.write("\n")
    if rc is not None:
        out.write(f"root cause shown by this log: {rc.id} ({rc.layer})\n")
    out.write("For a diagnosis of this machine itself, run `pytest --gpucheck`.\n")


def run_compare(args: argparse.Namespace) -> int:
    from gpucheck import compare

    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # a file name the terminal cannot show
    try:
        threshold = compare.parse_threshold(args.threshold)
    except ValueError as exc:
        return _error("gpucheck compare", str(exc), compare.UNUSABLE)
    opts = compare.Options(args.base, args.new, threshold, args.metric, args.storage, args.plot, args.json, args.markdown)
    try:
        comparison = compare.prepare(opts)
    except compare.UnusableInput as exc:
        return _error("gpucheck compare", str(exc), compare.UNUSABLE)
    except (OverflowError, RecursionError, MemoryError) as exc:
        return _error("gpucheck compare", f"the input cannot be compared ({type(exc).__name__}: {exc})", compare.UNUSABLE)
    try:
        compare.write(comparison, opts, sys.stdout)
        sys.stdout.flush()  # inside the try: a reader gone at the last buffer too (`| head -1`)
    except BrokenPipeError:
        # The reader went away: what it read stands, the verdict is still the comparison's.
        from gpucheck.reportfile import reader_gone

        reader_gone(sys.stdout)
    # The plot after the comparison: a file that cannot be written is said, and a regression still exits 1.
    plot_error = compare.save_plot(comparison, opts)
    if plot_error is not None:
        _error("gpucheck compare", plot_error, compare.UNUSABLE)
    return compare.exit_status(comparison, plot_error)


def run_merge(args: argparse.Namespace) -> int:
    from gpucheck import merge
    from gpucheck.reportfile import ReportWriteError, reader_gone, same_file, write_report

    if args.json not in (None, "-") and any(
        same_file(args.json, r) and not merge.is_fleet_json(r) for r in args.reports
    ):
        # Only this command's own earlier output may be replaced (`merge reports/*.json --json reports/fleet.json`).
        return _error("gpucheck merge", f"--json {args.json} is one of the reports to merge: it would be overwritten; "
                      "give another path", merge.UNUSABLE)
    try:
        merged = merge.merge(args.reports)
    except merge.UnusableReport as exc:
        return _error("gpucheck merge", str(exc), merge.UNUSABLE)
    for note in merged.notes:
        _error("gpucheck merge", f"note: {note}", 0)
    fleet = merge.json_report(merged.hosts, merged.notes)
    try:
        if args.json == "-":
            json.dump(fleet, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            merge.text_report(merged.hosts, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): what it read stands; the fleet JSON is still written below.
        reader_gone(sys.stdout)
    if args.json not in (None, "-"):
        try:
            write_report(args.json, json.dumps(fleet, indent=2) + "\n")
        except ReportWriteError as exc:
            return _error("gpucheck merge", f"cannot write {args.json} ({exc.reason})", merge.UNUSABLE)
    return merge.exit_status(merged.hosts)


def run_doctor(args: argparse.Namespace) -> int:
    from gpucheck import doctor

    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # a host's or a GPU's name the terminal cannot show
    try:
        req = doctor.request(args)
        return doctor.run(req, sys.stdout, sys.stderr)
    except doctor.DoctorError as exc:
        return _error(doctor.PROG, str(exc), doctor.UNDIAGNOSED)
    except Exception as exc:  # noqa: BLE001 - a fault of gpucheck's own is "could not diagnose" (2), never "not usable" (1)
        return _error(doctor.PROG, f"could not diagnose the node: gpucheck failed ({type(exc).__name__}: {exc}); please "
                      "report it", doctor.UNDIAGNOSED)


def _error(prog: str, sentence: str, status: int) -> int:
    from gpucheck.reportfile import one_line

    sys.stderr.write(f"{prog}: {one_line(sentence)}\n")
    return status


class _OneLineParser(argparse.ArgumentParser):
    """A subcommand's usage errors in one sentence (exit 2, as for unusable input)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if args.command == "doctor":
            # A prolog's log gets one sentence, not the usage of every command.
            return _error("gpucheck doctor", f"unrecognized arguments: {' '.join(unknown)} (see gpucheck doctor --help)", 2)
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "explain":
        from gpucheck.inputfile import Unreadable

        try:
            lines = _read(args.file)
        except Unreadable as exc:
            return _error("gpucheck explain", str(exc), 2)
        return run_explain(lines, args.json, sys.stdout)
    if args.command == "compare":
        return run_compare(args)
    if args.command == "merge":
        return run_merge(args)
    if args.command == "doctor":
        return run_doctor(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
