"""``gpucheck compare``'s output: the text report (fitted to the terminal's width), Markdown and JSON."""

from __future__ import annotations

import math
import os
import re
import shutil
import textwrap
from dataclasses import asdict, replace
from typing import Any, TextIO

from gpucheck.compare.files import Run
from gpucheck.compare.machines import GPU_STACK, MachineItem
from gpucheck.compare.verdicts import NO_SPREAD, RANK_TEST, WELCH, Comparison, Row
from gpucheck.reportfile import one_line

#: Where standard output is no terminal (a pipe, a CI log) and COLUMNS is not set.
DEFAULT_WIDTH = 120
#: The narrowest the benchmark column gets, however narrow the terminal.
MIN_NAME_WIDTH = 24


def terminal_width() -> int:
    return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def threshold_text(threshold: float) -> str:
    """The threshold as the person gave it: 2.5 -> "2.5%", 0.05 -> "0.05%", 5 -> "5%"."""
    return f"{threshold * 100:.10g}%"


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)):
        if abs(seconds) * scale >= 1 or unit == "ns":
            return f"{seconds * scale:.4g} {unit}"
    return f"{seconds:.4g} s"


def _pct(change: float) -> str:
    return "inf" if math.isinf(change) else f"{change:+.1%}"


def _methods(c: Comparison) -> str:
    used = sorted({r.method for r in c.rows})
    return " and ".join(used)


def fit(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters: its start and its end (the file and the test's
    parameters), an ellipsis for the middle."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 3
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def _levels(name: str) -> list[str]:
    """``name`` ever shorter: as it is, without the file's folders, without the file (pytest's ``name``)."""
    path, sep, rest = name.partition("::")
    if not sep:
        return [name]
    return list(dict.fromkeys([name, f"{os.path.basename(path)}::{rest}", rest]))


def fit_names(names: list[str], width: int) -> list[str]:
    """The names in at most ``width`` characters each: the shortest spelling that leaves them all tell-apart
    (the file's folders dropped, then the file), then an ellipsis in the middle of those still too long."""
    levels = [_levels(n) for n in names]
    chosen = list(names)
    for depth in (1, 2):
        if max(map(len, chosen), default=0) <= width:
            break
        shorter = [lv[min(depth, len(lv) - 1)] for lv in levels]
        if len(set(shorter)) < len(set(names)):
            break
        chosen = shorter
    fitted = [fit(n, width) for n in chosen]
    if len(set(fitted)) == len(set(names)) or width < 3:
        return fitted
    # Cut where the names differ: the same head and tail lengths for all, the first split that keeps
    # them apart (where there is one).
    for head in range(width - 1):
        tail = width - 1 - head
        cut = [n if len(n) <= width else n[:head] + "…" + n[len(n) - tail :] for n in chosen]
        if len(set(cut)) == len(set(names)):
            return cut
    return fitted


def _table(headers: list[str], rows: list[list[str]], width: int | None = None, fitted: int = 0) -> list[str]:
    """Columns padded to their widest cell. With ``width``, column ``fitted`` (the names) gets what the
    other columns leave of it, no narrower than MIN_NAME_WIDTH."""
    def widths_of(table_rows: list[list[str]]) -> list[int]:
        return [max(len(h), *(len(r[i]) for r in table_rows)) if table_rows else len(h) for i, h in enumerate(headers)]

    widths = widths_of(rows)
    if width is not None and rows and sum(widths) + 2 * (len(widths) - 1) > width:
        others = sum(wd for i, wd in enumerate(widths) if i != fitted) + 2 * (len(widths) - 1)
        names = fit_names([r[fitted] for r in rows], max(MIN_NAME_WIDTH, width - others))
        rows = [[names[k] if i == fitted else cell for i, cell in enumerate(r)] for k, r in enumerate(rows)]
        widths = widths_of(rows)
    line = "  ".join(h.ljust(wd) for h, wd in zip(headers, widths, strict=True))
    out = [line.rstrip(), "  ".join("-" * wd for wd in widths)]
    out += ["  ".join(cell.ljust(wd) for cell, wd in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def _grouped(c: Comparison) -> bool:
    return any(r.group is not None for r in c.rows)


def _wrap(text: str, width: int, indent: str = "", keep: tuple[str, ...] = ()) -> str:
    """``text`` wrapped to ``width``; the phrases in ``keep`` (a method's name) never broken across lines."""
    for phrase in keep:
        text = text.replace(phrase, phrase.replace(" ", "\0"))
    wrapped = textwrap.fill(text, width=max(20, width), subsequent_indent=indent, break_on_hyphens=False,
                            break_long_words=False)
    return wrapped.replace("\0", " ")


def _printable(value: Any) -> Any:
    return one_line(value) if isinstance(value, str) else value


def printable(c: Comparison) -> Comparison:
    """``c`` with every text that came from the files (the benchmarks' names and groups, the figures, the machines'
    values, the dates, the paths) one printable line, as ``gpucheck merge`` shows a host's values
    (``reportfile.one_line``): an escape sequence (``ESC[2J``, an OSC 52 clipboard write), a bidi control (U+202E) or
    a newline reaches the terminal as text (``\\x1b``, ``\\u202e``, ``\\n``), never as a command to it."""
    p = _printable

    def run(r: Run) -> Run:
        return replace(r, path=p(r.path), datetime=p(r.datetime))

    return replace(
        c,
        base=run(c.base),
        new=run(c.new),
        machine=[(p(label), p(a), p(b)) for label, a, b in c.machine],
        rows=[replace(r, name=p(r.name), group=p(r.group), short=p(r.short)) for r in c.rows],
        figures=[replace(f, name=p(f.name), figure=p(f.figure)) for f in c.figures],
        only_base=[p(x) for x in c.only_base],
        only_new=[p(x) for x in c.only_new],
        machine_items=tuple(MachineItem(p(i.what), p(i.base), p(i.new)) for i in c.machine_items),
    )


def text_report(c: Comparison, out: TextIO, width: int | None = None) -> None:
    width = width or terminal_width()
    c = printable(c)
    w = out.write
    w(_wrap(f"gpucheck compare: {c.base.path} ({c.base.datetime or 'no date'}) -> {c.new.path} "
            f"({c.new.datetime or 'no date'})", width, "  ") + "\n\n")
    for line in machine_lines(c, width):
        w(line + "\n")
    w("\n" + _wrap(
        f"Benchmarks ({c.metric} time, lower is better; noise judged by {_methods(c)}, whose own estimate of the "
        f"change gives the verdict its direction; a slower benchmark beyond {threshold_text(c.threshold)} is a "
        "regression):", width, keep=(RANK_TEST, WELCH, NO_SPREAD)) + "\n")
    headers = ["benchmark", "base", "new", "change", "verdict", "noise"]
    cells = [
        [r.name, _time(r.base), _time(r.new), _pct(r.change), verdict_text(r) + (" REGRESSION" if r.regression else ""),
         _noise_text(r)]
        for r in c.rows
    ]
    lines = _table(headers, cells, width - 2)
    dropped = False
    if max(map(len, lines)) > width - 2 or _cut(lines[2:], cells):
        # Too narrow for the names beside the noise column: the names first, the noise in --json/--markdown.
        lines = _table(headers[:-1], [r[:-1] for r in cells], width - 2)
        dropped = True
    room = len(lines[1].split("  ")[0])  # the names' column, as _table cut it
    apart = len(set(fit_names([r.name for r in c.rows], room))) == len({r.name for r in c.rows})
    stacked = max(map(len, lines)) > width - 2 or not apart
    if stacked:
        # Narrower still: each name on a line of its own, its figures on the next.
        names = fit_names([r.name for r in c.rows], width - 2)
        figures = _table(headers[1:-1], [r[1:-1] for r in cells])
        lines = [headers[0], f"  {figures[0]}\n    {figures[1]}", *(f"{n}\n    {f}" for n, f in zip(names, figures[2:], strict=True))]
    w(f"  {lines[0]}\n  {lines[1]}\n")
    group: object = object()
    grouped = _grouped(c)  # once: asked for every row, it scanned every row (1,000 rows: a million looks)
    for r, line in zip(c.rows, lines[2:], strict=True):
        if grouped and r.group != group:
            group = r.group
            w(f"  {fit('group: ' + (r.group or '(none)'), width - 2)}\n")
        w(f"  {line}\n")
    moved = [f for f in c.figures if f.verdict != "same"]
    if c.figures:
        w(f"\nFigures (extra_info): {len(c.figures) - len(moved)} of {len(c.figures)} within {threshold_text(c.threshold)}")
        w(":\n" if moved else ".\n")
    if moved:
        frows = [
            [f.name, f.figure + ("" if f.higher_is_better else " (lower is better)"), f"{f.base:.4g}", f"{f.new:.4g}",
             _pct(f.change), f.verdict]
            for f in moved
        ]
        for line in _table(["benchmark", "figure", "base", "new", "change", "verdict"], frows, width - 2):
            w(f"  {line}\n")
    for label, names in (("Only in the base run", c.only_base), ("Only in the new run", c.only_new)):
        if names:
            w(f"\n{label} ({len(names)}):\n")
            for name in names:
                w(f"  {fit(name, width - 2)}\n")
    if dropped:
        w("\n" + _wrap("(The noise column is left out at this width: a wider terminal, --markdown or --json "
                       "show it.)", width) + "\n")
    w("\n" + _wrap(summary(c, width), width, "  ") + "\n")


def _cut(lines: list[str], cells: list[list[str]]) -> bool:
    """Whether some name in the table lines had to be shortened (its folders or file dropped, or cut)."""
    return any(not (line + " ").startswith(row[0] + " ") for line, row in zip(lines, cells, strict=True))


def _estimate(r: Row) -> str:
    """The test's own estimate of the change, named: the Hodges-Lehmann shift, the mean's change."""
    if r.shift is None or r.method == NO_SPREAD:
        return _pct(r.change)
    return f"{'shift' if r.method == RANK_TEST else 'mean'} {_pct(r.shift)}"


def verdict_text(r: Row) -> str:
    """The verdict with the change that decided it (the test's estimate, which the threshold is held to):
    ``slower (mean +6.1%)``, ``faster (shift -12.0%)``, ``same (within noise)``."""
    if r.verdict in ("slower", "faster"):
        return f"{r.verdict} ({_estimate(r)})"
    return r.verdict


def _noise_text(r: Row) -> str:
    parts = []
    if r.p_value is not None:
        parts.append("p<1e-300" if r.p_value < 1e-300 else f"p={r.p_value:.2g}")
    if r.method != NO_SPREAD:
        parts.append(f"IQR {r.noise:.1%}")
    return ", ".join(parts) or "no spread saved"


def _shown(value: Any) -> str:
    return "not recorded" if value is None else str(value)


def machine_lines(c: Comparison, width: int) -> list[str]:
    """The machine section: what differs (a value recorded by one run only reads "not recorded"), what is the
    same, and what neither run recorded."""
    items = list(c.machine_items) or [MachineItem(label, a, b) for label, a, b in c.machine]
    differs = [i for i in items if i.state not in ("same", "neither")]
    same = [i.what for i in items if i.state == "same"]
    neither = [i.what for i in items if i.state == "neither"]
    out: list[str] = []
    if differs:
        out.append("What differs between the two machines:")
        label_width = max(len(i.what) for i in differs)
        for i in differs:
            out.append(f"  {i.what:<{label_width}}  {_shown(i.base)} -> {_shown(i.new)}")
        if same:
            out.append(_wrap("The same in both runs: " + ", ".join(same) + ".", width, "  "))
    elif same:
        out.append(_wrap("The two machines are the same in what both runs recorded: " + ", ".join(same) + ".", width, "  "))
    else:
        out.append("Neither run recorded anything of its machine: they may or may not be the same.")
    stack = {label for label, _key in GPU_STACK} | {"GPUs"}
    if stack <= set(neither):
        neither = [x for x in neither if x not in stack]
        out.append(_wrap("Neither run recorded its GPU stack (machine_info['gpucheck']: run the benchmarks with "
                         "--gpucheck).", width, "  "))
    if neither:
        out.append(_wrap("Not recorded by either run: " + ", ".join(neither) + ".", width, "  "))
    return out


def same_machines(c: Comparison) -> str:
    """The machine section in one paragraph (Markdown)."""
    return " ".join(machine_lines(c, 10_000))


def summary(c: Comparison, width: int | None = None) -> str:
    """The closing line. With ``width`` (the terminal's), regressions are named by their short names as far as
    the line fits, then counted; without, by their full names (Markdown)."""
    regs = c.regressions
    faster = sum(r.verdict == "faster" for r in c.rows)
    tail = f"; {faster} faster" if faster else ""
    if not regs:
        return (f"No regression beyond {threshold_text(c.threshold)} ({len(c.rows)} benchmark"
                f"{'s' if len(c.rows) != 1 else ''} compared{tail}).")
    head = f"{len(regs)} regression{'s' if len(regs) != 1 else ''} beyond {threshold_text(c.threshold)}: "
    if width is None:
        names = [f"{r.name} ({_estimate(r)})" for r in regs]
        shown = names[:10]
        rest = len(names) - len(shown)
        return head + ", ".join(shown) + (f" and {rest} more" if rest else "") + f"{tail}."
    shown = []
    for i, r in enumerate(regs):
        entry = f"{fit(r.short or r.name, max(MIN_NAME_WIDTH, width // 2))} ({_estimate(r)})"
        rest = len(regs) - i - 1
        more = f" and {rest} more (in the table)" if rest else ""
        if shown and len(head) + len(", ".join([*shown, entry])) + len(more) + len(tail) + 1 > width:
            break
        shown.append(entry)
    rest = len(regs) - len(shown)
    return head + ", ".join(shown) + (f" and {rest} more (in the table)" if rest else "") + f"{tail}."


def markdown_report(c: Comparison, out: TextIO) -> None:
    """The comparison in GitHub Markdown. The files' texts are printable (:func:`printable`), Markdown and HTML in them
    are escaped (:func:`_md`), and a name in a code span cannot end it (:func:`_code`)."""
    c = printable(c)
    w = out.write
    w(f"### gpucheck compare: {_code(os.path.basename(c.base.path))} → {_code(os.path.basename(c.new.path))}\n\n")
    if c.machine:
        w("| | base | new |\n| --- | --- | --- |\n")
        for label, a, b in c.machine:
            w(f"| {label} | {_md(_shown(a))} | {_md(_shown(b))} |\n")
        w("\n")
        rest = [x for x in machine_lines(c, 10_000) if not x.startswith("  ") and not x.startswith("What differs")]
        if rest:
            w(" ".join(_md(x) for x in rest) + "\n\n")
    else:
        w(_md(same_machines(c)) + "\n\n")
    w("| benchmark | base | new | change | verdict | noise |\n| --- | ---: | ---: | ---: | --- | --- |\n")
    group: object = object()
    grouped = _grouped(c)
    for r in c.rows:
        if grouped and r.group != group:
            group = r.group
            w(f"| **group: {_md(r.group or '(none)')}** | | | | | |\n")
        verdict = f"**{verdict_text(r)}**" if r.regression else verdict_text(r)
        w(f"| {_code(r.name)} | {_time(r.base)} | {_time(r.new)} | {_pct(r.change)} | {verdict} | {_md(_noise_text(r))} |\n")
    moved = [f for f in c.figures if f.verdict != "same"]
    if moved:
        w("\n| benchmark | figure | base | new | change | verdict |\n| --- | --- | ---: | ---: | ---: | --- |\n")
        for f in moved:
            w(f"| {_code(f.name)} | {_md(f.figure)} | {f.base:.4g} | {f.new:.4g} | {_pct(f.change)} | {f.verdict} |\n")
    for label, names in (("Only in the base run", c.only_base), ("Only in the new run", c.only_new)):
        if names:
            w(f"\n{label}: " + ", ".join(_code(x) for x in names) + "\n")
    w(f"\n{c.metric} times; noise judged by {_methods(c)}. {_md(summary(c))}\n")


#: What Markdown or HTML reads in text: each is shown as itself behind a backslash (CommonMark escapes any ASCII
#: punctuation so), so that ``<img src=...>``, ``![x](url)`` or ``**`` in a name is text, never markup (an underscore
#: inside a word is no emphasis: names keep theirs as they are).
_MARKUP = re.compile(r"([\\`*\[\]<>!|~&])")
_TICKS = re.compile(r"`+")


def _md(x: Any) -> str:
    return _MARKUP.sub(r"\\\1", str(x if x is not None else "unknown"))


def _code(x: str) -> str:
    """``x`` as a code span that nothing in it can end: fenced by one backtick more than its longest run of them
    (CommonMark), a pipe escaped (GitHub reads a table's cells before their code spans). Inside, HTML is text."""
    fence = "`" * (max(map(len, _TICKS.findall(x)), default=0) + 1)
    pad = " " if x.startswith("`") or x.endswith("`") else ""
    return f"{fence}{pad}{x.replace('|', chr(92) + '|')}{pad}{fence}"


def json_report(c: Comparison) -> dict[str, Any]:
    return {
        "schema": "gpucheck-compare/1",
        "base": {"path": c.base.path, "datetime": c.base.datetime},
        "new": {"path": c.new.path, "datetime": c.new.datetime},
        "metric": c.metric,
        "threshold": c.threshold,
        "threshold_text": threshold_text(c.threshold),
        "machine": [{"what": label, "base": a, "new": b} for label, a, b in c.machine],
        "machine_same": [{"what": i.what, "value": i.base} for i in c.machine_items if i.state == "same"],
        "machine_not_recorded": [i.what for i in c.machine_items if i.state == "neither"],
        "benchmarks": [asdict(r) for r in c.rows],
        "figures": [asdict(f) for f in c.figures],
        "only_base": c.only_base,
        "only_new": c.only_new,
        "regressions": [r.name for r in c.regressions],
        "exit_status": c.exit_status,
    }
