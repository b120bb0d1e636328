"""``gpucheck`` command line: ``gpucheck explain [FILE|-] [--json]``.

``explain`` reads a TensorFlow log a person pasted (a file, or standard input with ``-`` or no
argument) and prints the findings the log supports, each with cause and remedy, in the same shape
as the report contract (``--json`` prints ``{"findings": [...]}``). It runs no probe and loads no
library: the log is the only evidence. Exit status: 0 when the log shows no blocker, 1 when it
does, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from gpucheck import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpucheck", description="Does TensorFlow get NVIDIA GPU acceleration here, and if not, why not?"
    )
    parser.add_argument("--version", action="version", version=f"gpucheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    explain = sub.add_parser(
        "explain",
        help="explain a TensorFlow log: the causes it shows, with remedies",
        description="Read a TensorFlow log (FILE, or standard input for '-' or no FILE) and print the findings "
        "it supports. For a diagnosis of this machine run `pytest --gpucheck`.",
    )
    explain.add_argument("file", nargs="?", default="-", metavar="FILE|-", help="the log to read (default: stdin)")
    explain.add_argument("--json", action="store_true", help='print {"findings": [...]} as JSON')
    return parser


def _read(path: str) -> list[str]:
    if path == "-":
        return sys.stdin.read().splitlines()
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read().splitlines()


def run_explain(lines: list[str], as_json: bool, out: TextIO) -> int:
    from gpucheck.logs import explain
    from gpucheck.model import Severity
    from gpucheck.report import failure_text

    findings, classification, rc = explain(lines)
    if as_json:
        json.dump({"findings": [f.to_json() for f in findings]}, out, indent=2)
        out.write("\n")
    else:
        recognised = len(classification.matches)
        out.write(
            f"gpucheck explain: {len(lines)} lines read, {recognised} recognised "
            f"({len(classification.harmless)} harmless)\n\n"
        )
        if not findings:
            out.write("No line of this log shows a cause that keeps TensorFlow from the GPU.\n")
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
    return 1 if any(f.severity is Severity.BLOCKER for f in findings) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        try:
            lines = _read(args.file)
        except OSError as exc:
            parser.error(f"cannot read {args.file}: {exc.strerror or exc}")
        return run_explain(lines, args.json, sys.stdout)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
