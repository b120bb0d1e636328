"""The page of every cause (``docs/causes.md``), generated from the catalog, the code and the log patterns.

For each id of ``data/catalog.json``: its layer, action and meaning (the catalog's); the severities, remedies
and evidence keys of the ``finding(...)`` calls that raise it (read from the source with ``ast``, nothing
imported); the checks whose ``@asks`` names it; and the log patterns of ``data/log_patterns.json`` (and of each
framework unit's ``Framework.log_patterns``) through
which ``gpucheck explain`` (and the TensorFlow probe) map a log line to it. Regenerate the page with

    python -m gpucheck.causepage > docs/causes.md

``tests/test_causepage.py`` fails when the page and what this module makes of the package differ.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucheck import knowledge, logs, registry
from gpucheck.model import catalog
from gpucheck.reportfile import reader_gone

PACKAGE = Path(__file__).resolve().parent
#: The benchmarks do not declare their question with ``@asks``: it is built per benchmark by this function,
#: whose ids are read as for ``@asks``, for the test functions of this check file.
BENCHMARK_QUESTION = ("performance/plugin.py", "benchmark_question")
BENCHMARK_CHECKS = "performance/checks_performance.py"


@dataclass
class Raise:
    """One ``finding(...)`` call that can raise an id."""

    where: str
    severities: set[str] | None
    remedy: str | None
    evidence: list[str]


@dataclass
class Check:
    name: str
    layer: str


@dataclass
class Cause:
    id: str
    raises: list[Raise] = field(default_factory=list)
    named_in: set[str] = field(default_factory=set)
    checks: list[Check] = field(default_factory=list)
    patterns: list[dict[str, Any]] = field(default_factory=list)
    cuinit: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Every node with the name of the function it is in (``<module>`` outside any)."""
    def walk(node: ast.AST, name: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            yield inner, child
            yield from walk(child, inner)
    yield from walk(tree, "<module>")


def _text(node: ast.expr) -> str | None:
    """A remedy as the code writes it: literal text, an f-string's fields shown as ``<expr>``, the parts of a
    ``+``; None where it is computed some other way."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append("<" + ast.unparse(v.value) + ">")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None or right is not None:
            return (left or "…") + (right or "…")
    if isinstance(node, ast.IfExp):
        body, orelse = _text(node.body), _text(node.orelse)
        if body is not None and orelse is not None:
            return body if body == orelse else f"{body} / {orelse}"
        return body or orelse
    return None


def literal_severities(node: ast.expr) -> set[str] | None:
    """The severities an expression can be: ``Severity.X``, or a conditional between such; None if not literal."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Severity":
        return {node.attr.lower()}
    if isinstance(node, ast.IfExp):
        a, b = literal_severities(node.body), literal_severities(node.orelse)
        return a | b if a is not None and b is not None else None
    return None


def _dict_keys(node: ast.expr | None, local: dict[str, ast.expr], returns: dict[str, ast.expr]) -> list[str]:
    """The keys an evidence expression writes, where they are written out: a dict literal (its ``**`` parts
    followed into a local dict or a function of the module returning one), a local name bound to one."""
    if node is None:
        return []
    if isinstance(node, ast.Dict):
        keys: list[str] = []
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                keys += _dict_keys(v, local, returns)
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                keys.append(k.value)
        return keys
    if isinstance(node, ast.Name) and node.id in local and local[node.id] is not node:
        return _dict_keys(local[node.id], {n: e for n, e in local.items() if n != node.id}, returns)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in returns:
        return _dict_keys(returns[node.func.id], local, {n: e for n, e in returns.items() if n != node.func.id})
    return []


def _returned_dicts(tree: ast.Module) -> dict[str, ast.expr]:
    return {
        fn.name: r.value
        for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
        for r in ast.walk(fn) if isinstance(r, ast.Return) and isinstance(r.value, ast.Dict)
    }


def _assignments(fn: ast.AST | None) -> dict[str, list[ast.expr]]:
    """Every value a function binds to each plain name."""
    out: dict[str, list[ast.expr]] = {}
    for a in ast.walk(fn) if fn is not None else ():
        if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name):
            out.setdefault(a.targets[0].id, []).append(a.value)
        elif isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and a.value is not None:
            out.setdefault(a.target.id, []).append(a.value)
    return out


def _severities_in(node: ast.expr, bound: dict[str, list[ast.expr]]) -> set[str] | None:
    """The severities an argument can be, a local name followed to every value the function gives it."""
    if isinstance(node, ast.Name) and node.id in bound:
        out: set[str] = set()
        for value in bound[node.id]:
            one = literal_severities(value)
            if one is None:
                return None
            out |= one
        return out or None
    return literal_severities(node)


def _remedy(node: ast.expr | None, bound: dict[str, list[ast.expr]]) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Name) and len(bound.get(node.id, [])) == 1:
        node = bound[node.id][0]
    elif isinstance(node, ast.Name) and node.id in bound:
        # A remedy chosen among several by what the rule found: each as the code writes it.
        texts = [t for t in (_text(v) for v in bound[node.id]) if t is not None]
        return " ".join(f"({i}) {t}" for i, t in enumerate(texts, 1)) if texts else None
    text = _text(node)
    if text is None and isinstance(node, ast.Call):
        return f"composed by `{ast.unparse(node.func)}(...)` at run time"
    return text


def _table_rows(name: str, fn: ast.AST | None, tables: dict[str, ast.Dict], ids: set[str]) -> dict[str, dict[str, ast.expr]]:
    """Where a ``finding``'s id is a name, the rows of the module table it comes from, by id, each row's values by
    the names the function unpacks them into: ``what, remedy = TABLE[name]`` (the ids are the table's keys), or
    ``name, summary, remedy = TABLE[key]`` (the ids are in the rows)."""
    rows: dict[str, dict[str, ast.expr]] = {}
    for a in ast.walk(fn) if fn is not None else ():
        if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.value, ast.Subscript)):
            continue
        table = a.value.value
        if not (isinstance(table, ast.Name) and table.id in tables):
            continue
        target = a.targets[0]
        names = [e.id if isinstance(e, ast.Name) else "" for e in target.elts] if isinstance(target, ast.Tuple) else []
        by_key = isinstance(a.value.slice, ast.Name) and a.value.slice.id == name
        for key, value in zip(tables[table.id].keys, tables[table.id].values, strict=True):
            elts = value.elts if isinstance(value, ast.Tuple) and len(value.elts) == len(names) else []
            row = dict(zip(names, elts, strict=False))
            if by_key and isinstance(key, ast.Constant) and key.value in ids:
                rows[str(key.value)] = row
            elif name in row:
                cell = row[name]
                if isinstance(cell, ast.Constant) and cell.value in ids:
                    rows[str(cell.value)] = row
    return rows


def _raises(path: Path, tree: ast.Module, ids: set[str], causes: dict[str, Cause], everywhere: dict[str, ast.expr]) -> None:
    returns = {**everywhere, **_returned_dicts(tree)}
    bodies = {fn.name: fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)}
    tables = {
        t.id: stmt.value
        for stmt in tree.body if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Dict)
        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) if isinstance(t, ast.Name)
    }
    for function, node in _functions(tree):
        if isinstance(node, ast.Constant) and node.value in ids:
            causes[str(node.value)].named_in.add(_rel(path))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "finding"):
            continue
        if len(node.args) < 2:
            continue
        bound = _assignments(bodies.get(function))
        local = {name: values[-1] for name, values in bound.items()}
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        remedy = _remedy(kw.get("remedy"), bound)
        evidence = sorted(set(_dict_keys(kw.get("evidence"), local, returns)))
        where = f"{_rel(path)}:{function}"
        first, severity = node.args[0], node.args[1]
        pairs: list[tuple[ast.expr, ast.expr]] = [(first, severity)]
        if isinstance(first, ast.IfExp):
            if isinstance(severity, ast.IfExp) and ast.dump(severity.test) == ast.dump(first.test):
                pairs = [(first.body, severity.body), (first.orelse, severity.orelse)]
            else:
                pairs = [(first.body, severity), (first.orelse, severity)]
        for id_node, sev_node in pairs:
            if isinstance(id_node, ast.Constant) and id_node.value in ids:
                causes[str(id_node.value)].raises.append(Raise(where, _severities_in(sev_node, bound), remedy, evidence))
            elif isinstance(id_node, ast.Name):
                for cid, row in _table_rows(id_node.id, bodies.get(function), tables, ids).items():
                    named = kw.get("remedy")
                    text = _text(row[named.id]) if isinstance(named, ast.Name) and named.id in row else remedy
                    causes[cid].raises.append(Raise(where, _severities_in(sev_node, bound), text, evidence))


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    return {
        t.id: n.value
        for n in tree.body if isinstance(n, ast.Assign)
        for t in n.targets if isinstance(t, ast.Name)
    }


def _strings(node: ast.expr, names: dict[str, ast.expr]) -> list[str]:
    """The strings of a tuple expression: literals, module constants, their ``+``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [s for e in node.elts for s in _strings(e, names)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _strings(node.left, names) + _strings(node.right, names)
    if isinstance(node, ast.Name) and node.id in names:
        return _strings(names[node.id], names)
    return []


def _checks(causes: dict[str, Cause]) -> None:
    names = _constants(ast.parse((PACKAGE / "blocking.py").read_text(encoding="utf-8")))
    for path in sorted(PACKAGE.rglob("checks_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = {**names, **_constants(tree)}
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            for deco in fn.decorator_list:
                if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id == "asks":
                    layer = _strings(deco.args[0], module)
                    for cid in _strings(deco.args[1], module):
                        if cid in causes:
                            causes[cid].checks.append(Check(f"{_rel(path)}::{fn.name}", layer[0] if layer else "?"))
    # The benchmarks: their ids are the catalog ids written in the function that builds their question.
    source, function = BENCHMARK_QUESTION
    tree = ast.parse((PACKAGE / source).read_text(encoding="utf-8"))
    builder = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    ids = sorted({str(n.value) for n in ast.walk(builder) if isinstance(n, ast.Constant) and n.value in causes})
    checks = ast.parse((PACKAGE / BENCHMARK_CHECKS).read_text(encoding="utf-8"))
    tests = [n.name for n in checks.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    for cid in ids:
        name = f"gpucheck/{BENCHMARK_CHECKS}::{{{','.join(tests)}}} (`--gpucheck-benchmarks`)"
        causes[cid].checks.append(Check(name, "performance"))


def gather() -> dict[str, Cause]:
    """Everything the page says of each catalog id, in catalog order."""
    cat = catalog()
    causes = {cid: Cause(cid) for cid in cat.causes}
    ids = set(causes)
    trees = {
        path: ast.parse(path.read_text(encoding="utf-8"), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.name.startswith("checks_") and path.name != "causepage.py"
    }
    everywhere: dict[str, ast.expr] = {}
    for tree in trees.values():
        everywhere.update(_returned_dicts(tree))
    for path, tree in trees.items():
        _raises(path, tree, ids, causes, everywhere)
    _checks(causes)
    patterns = knowledge.data("log_patterns.json")
    for p in patterns["patterns"]:
        if p.get("finding") in causes:
            causes[p["finding"]].patterns.append(p)
    for fw in registry.FRAMEWORKS:  # the other frameworks' tables (Framework.log_patterns): explain reads their logs
        if fw.log_patterns is None or fw.log_patterns == logs.TENSORFLOW:
            continue
        for p in logs.table_data(fw.log_patterns)["patterns"]:
            if p.get("finding") in causes:
                causes[p["finding"]].patterns.append({**p, "framework": fw.title})
    for code, entry in patterns["cuinit_codes"].items():
        if isinstance(entry, dict) and entry.get("finding") in causes:
            causes[entry["finding"]].cuinit.append((code, entry))
    return causes


def _md(text: str) -> str:
    """Text for a table cell or a list item: one line, no pipe."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    ticks = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _severity_text(raises: list[Raise], patterns: list[dict[str, Any]]) -> str:
    found: set[str] = set()
    open_ = False
    for r in raises:
        if r.severities is None:
            open_ = True
        else:
            found |= r.severities
    found |= {str(p["severity"]) for p in patterns}
    order = ["blocker", "degraded", "info"]
    words = " or ".join(s for s in order if s in found)
    if open_:
        words = (words + ", or " if words else "") + "as its rule decides"
    return words or "as its rule decides"


def _section(cid: str, c: Cause) -> list[str]:
    entry = catalog().causes[cid]
    out = [f"## `{cid}`", ""]
    needs = f" (its evidence needs the {entry.needs} layer)" if entry.needs != entry.layer else ""
    out.append(
        f"**layer** {entry.layer}{needs} · **severity** {_severity_text(c.raises, c.patterns)} · "
        f"**action** {entry.action}"
    )
    out += ["", f"{_md(entry.meaning[0].upper() + entry.meaning[1:])}.", ""]
    if c.raises:
        out.append("Raised by the code:")
        out.append("")
        for r in c.raises:
            order = ("blocker", "degraded", "info")
            sev = (" or ".join(s for s in order if s in r.severities) if r.severities is not None else "its caller decides")
            if r.severities is not None and len(r.severities) > 1:
                sev += ", by what it finds"
            out.append(f"- `{r.where}` ({sev})")
            if r.evidence:
                out.append("  - evidence: " + ", ".join(f"`{k}`" for k in r.evidence))
            if r.remedy:
                out.append(f"  - remedy: {_md(r.remedy)}")
        out.append("")
    others = sorted(c.named_in - {r.where.split(":")[0] for r in c.raises})
    if others:
        out += ["Named by: " + ", ".join(f"`{p}`" for p in others) + ".", ""]
    if c.checks:
        out += ["Checks that answer it: " + ", ".join(f"`{ch.name}` ({ch.layer})" for ch in c.checks) + ".", ""]
    else:
        out += ["Checks that answer it: none (it is reported in the summary and the JSON).", ""]
    if c.patterns or c.cuinit:
        out.append("Log lines that raise it (`gpucheck explain`, and the TensorFlow probe's own log):")
        out.append("")
        for p in c.patterns:
            groups = sorted(re.compile(p["regex"]).groupindex)
            whose = f", {p['framework']}'s logs" if "framework" in p else ""
            line = f"- `{p['id']}` ({p['severity']}{whose}): {_code(p['regex'])}"
            if groups:
                line += "; evidence adds " + ", ".join(f"`{g}`" for g in groups)
            if p.get("report"):
                line += f"; seen in {p['report']}"
            out.append(line)
            out.append(f"  - remedy: {_md(str(p['remedy']))}")
        for code, row in c.cuinit:
            out.append(f"- a failed `cuInit` with code {code}: {_md(str(row['summary']))}")
            out.append(f"  - remedy: {_md(str(row['remedy']))}")
        out.append("")
    return out


def page() -> str:
    causes = gather()
    cat = catalog()
    lines = [
        "# Every cause gpucheck names",
        "",
        "<!-- Generated by `python -m gpucheck.causepage > docs/causes.md`; do not edit by hand. "
        "tests/test_causepage.py fails when this page and the package differ. -->",
        "",
        "Each id of the cause catalog (`gpucheck/data/catalog.json`; ids are a contract: added, never renamed), in "
        "the catalog's order: its layer, the severities it is raised at, the default action for a fleet's "
        "automation (evidence carrying the driver's own recovery action may raise it), what it means; then "
        "where the code raises it (the function, the evidence keys it writes where they are written out, and "
        "its remedy as the code writes it, `<...>` standing for what is filled in at run time), the checks "
        "(pytest items) that answer it, and the log lines that `gpucheck explain` maps to it "
        "(`gpucheck/data/log_patterns.json`, and each framework unit's own, such as "
        "`gpucheck/frameworks/torch/log_patterns.json`; each with the public report it was seen in).",
        "",
        "| id | layer | action | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for cid, entry in cat.causes.items():
        lines.append(f"| [`{cid}`](#{cid}) | {entry.layer} | {entry.action} | {_md(entry.meaning)} |")
    lines.append("")
    for cid, c in causes.items():
        lines += _section(cid, c)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    try:
        sys.stdout.write(page())
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone(sys.stdout)  # `| head`: what the reader read stands
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
