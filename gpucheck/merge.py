"""``gpucheck merge REPORT.json...``: many hosts' reports (``--gpucheck-json`` on each node, e.g. through
``srun`` or a Kubernetes Job) joined into one table and one JSON, hosts whose root causes agree grouped.

Exit status: 0 every host accelerated, 1 at least one not, 2 unusable input (one sentence). Standard
library only: it reads the reports' JSON (schema ``gpucheck-report/1``), nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from gpucheck import registry
from gpucheck.jsonfile import Unreadable, as_list, dig, read_json
from gpucheck.model import catalog
from gpucheck.reportfile import one_line

ALL_ACCELERATED, NOT_ACCELERATED, UNUSABLE = 0, 1, 2
SCHEMA = "gpucheck-report/1"
FLEET_SCHEMA = "gpucheck-fleet/1"


class UnusableReport(Exception):
    """A report that cannot be merged, with the sentence that says why."""


@dataclass(frozen=True)
class Host:
    host: str
    path: str
    verdict: str
    root_cause: str | None
    root_cause_summary: str | None
    #: Faults other than the root cause (ids).
    also: list[str]
    gpus: list[str]
    driver: str | None
    tensorflow: str | None
    complete: bool
    #: Key figures where the run measured them: the cluster's all-reduce (``allreduce_latency_ms``,
    #: ``allreduce_busbw_gbps``, this host's task), the best matmul (``matmul_tflops``, and its device).
    figures: dict[str, Any]
    #: The CUDA version the driver supports (its API, "12.4"), the CUDA runtime and cuDNN the framework loads (else
    #: those it was built with), the GPU model (the names NVML lists, "A + B" for a host with several): with the driver
    #: and TensorFlow, what :func:`drift` compares across hosts.
    cuda: str | None = None
    cuda_runtime: str | None = None
    cudnn: str | None = None
    gpu_model: str | None = None
    #: Each framework the host's run diagnosed, in its order: name, title, version, its own verdict and root cause
    #: (the report's ``frameworks``; a report written before it had them: TensorFlow's version alone, no verdict).
    frameworks: list[dict[str, str | None]] = field(default_factory=list)


#: A framework's name as a report may give it (``gpucheck.frameworks``' names), else it is not shown as one.
_FRAMEWORK_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _frameworks(report: dict[str, Any], tensorflow: str | None) -> list[dict[str, str | None]]:
    """What a host's report says of each framework it diagnosed (``frameworks``, any shape: what is not a framework's
    entry is left out); a report without them that names TensorFlow's version, that one."""
    entries = report.get("frameworks")
    if not isinstance(entries, dict):
        return [{"name": "tensorflow", "title": "TensorFlow", "version": tensorflow, "verdict": None, "root_cause": None}] \
            if tensorflow is not None else []
    out = []
    for name, entry in list(entries.items())[:16]:
        if not isinstance(entry, dict) or not isinstance(name, str) or not _FRAMEWORK_NAME.match(name):
            continue
        known = registry.framework_named(name)
        verdict = entry.get("verdict")
        out.append({
            "name": name,
            "title": _text(entry.get("title")) or (known.title if known is not None else name),
            "version": _text(entry.get("version")),
            "verdict": verdict if verdict in ("accelerated", "degraded", "not-accelerated") else None,
            "root_cause": _text(entry.get("root_cause")),
        })
    return out


def frameworks_text(frameworks: Sequence[dict[str, str | None]]) -> str:
    """A host's frameworks in one cell: "TensorFlow 2.21.0: accelerated; PyTorch 2.13.0+cpu: not-accelerated
    (framework-cpu-only)"; "-" where its run diagnosed none."""
    parts = []
    for fw in frameworks:
        text = " ".join(str(v) for v in (fw.get("title") or fw.get("name"), fw.get("version")) if v)
        if fw.get("verdict"):
            text += f": {fw['verdict']}" + (f" ({fw['root_cause']})" if fw.get("root_cause") else "")
        parts.append(text)
    return "; ".join(parts) or "-"


class _Fleet(Exception):
    """The file is a merged fleet JSON (this command's own output), not a host's report."""


def _text(value: Any) -> str | None:
    """A value to show: a string or a number as text; anything else (an object, a list) is not one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return str(value) or None


def read(path: str) -> Host:
    return _host(path, _load(path))


def is_fleet_json(path: str) -> bool:
    """``path`` holds a merged fleet JSON (this command's own ``--json``)."""
    try:
        data = read_json(path, "a gpucheck report")
    except Unreadable:
        return False
    return isinstance(data, dict) and data.get("schema") == FLEET_SCHEMA


def _load(path: str) -> Any:
    try:
        return read_json(path, "a gpucheck report")
    except Unreadable as exc:
        raise UnusableReport(str(exc)) from None


#: ``gpucheck-report/1`` and its minors (``/1.1``: fields added, none renamed or dropped, DESIGN.md), which this
#: gpucheck reads; another major it refuses by name.
_SCHEMA = re.compile(r"gpucheck-report/(?P<major>[0-9]{1,6})(?:\.[0-9]{1,6})?")


def _check_schema(path: str, report: Any) -> None:
    """Raise with the sentence that says why ``report`` is not a report this gpucheck reads."""
    schema = report.get("schema") if isinstance(report, dict) else None
    if not isinstance(schema, str):
        raise UnusableReport(f"{path} is not a gpucheck report (no \"schema\": \"{SCHEMA}\"; made by --gpucheck-json)")
    m = _SCHEMA.fullmatch(schema)
    if m is None:
        raise UnusableReport(f"{path} is not a gpucheck report (its schema is {schema!r}, not {SCHEMA!r})")
    if m["major"] != SCHEMA.rsplit("/", 1)[1]:
        raise UnusableReport(f"{path} is a report of schema {schema}, a version this gpucheck does not read (it reads "
                             f"{SCHEMA} and its minor versions): merge it with the gpucheck that wrote it")


def _host(path: str, report: Any) -> Host:
    if isinstance(report, dict) and report.get("schema") == FLEET_SCHEMA:
        raise _Fleet(path)
    _check_schema(path, report)
    verdict = report.get("verdict")
    if verdict not in ("accelerated", "degraded", "not-accelerated"):
        raise UnusableReport(f"{path} has no verdict")
    rc = report.get("root_cause") if isinstance(report.get("root_cause"), dict) else None
    findings = [f for f in as_list(report.get("findings")) if isinstance(f, dict)]
    if rc is None and verdict == "degraded":
        rc = _lowest_degraded(findings)  # a report of a gpucheck that named no root cause for a degraded verdict
    rc_id = _text(rc.get("id")) if rc else None
    also = [
        _text(f.get("id")) or "?" for f in findings
        if f.get("severity") in ("blocker", "degraded") and (rc_id is None or _text(f.get("id")) != rc_id)
    ]
    facts: dict[str, Any] = report["facts"] if isinstance(report.get("facts"), dict) else {}
    gpus = [
        name for g in as_list(dig(facts, "nvml", "facts", "gpus")) if isinstance(g, dict) and (name := _text(g.get("name")))
    ]
    driver = _text(dig(facts, "kernel", "module_version")) or _text(dig(facts, "nvml", "facts", "driver_version"))
    host = _text(dig(report, "environment", "host")) or os.path.splitext(os.path.basename(path))[0]
    complete = report.get("complete", True)
    loaded = {
        key: _text(lib.get("version")) for lib in as_list(dig(facts, "libraries", "facts", "libraries"))
        if isinstance(lib, dict) and lib.get("loaded") is True and isinstance(key := lib.get("key"), str)
    }
    build = dig(facts, "framework", "facts", "build_info")
    build = build if isinstance(build, dict) else {}
    tensorflow = _text(dig(facts, "framework", "facts", "version"))
    return Host(
        host=host,
        path=path,
        verdict=verdict,
        root_cause=rc_id or ("?" if rc else None),
        root_cause_summary=_text(rc.get("summary")) if rc else None,
        also=list(dict.fromkeys(also)),
        gpus=gpus,
        driver=driver,
        tensorflow=tensorflow,
        complete=complete if isinstance(complete, bool) else False,
        figures=_figures(facts),
        cuda=_cuda_api(dig(facts, "cuda", "facts", "driver_version")) or _cuda_api(
            dig(facts, "nvml", "facts", "cuda_driver_version")
        ),
        cuda_runtime=loaded.get("cudart") or _text(build.get("cuda_version")),
        cudnn=loaded.get("cudnn") or _text(build.get("cudnn_version")),
        gpu_model=" + ".join(sorted(set(gpus))) or None,
        frameworks=_frameworks(report, tensorflow),
    )


def _lowest_degraded(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The root cause of a degraded verdict as the report contract names it: the lowest degraded finding (by the
    catalog's layers, then the report's order); None where the report lists none."""
    layers = catalog().layers
    degraded = [f for f in findings if f.get("severity") == "degraded"]
    rank = {name: i for i, name in enumerate(layers)}
    return min(degraded, key=lambda f: rank.get(str(f.get("layer")), len(layers)), default=None)


def _cuda_api(value: Any) -> str | None:
    """CUDA's driver API version as cuDriverGetVersion gives it (12040) as text ("12.4")."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return f"{value // 1000}.{value % 1000 // 10}"


#: What differs across a fleet that makes one host behave unlike another: (Host field, as a person names it).
DRIFT_KEYS: tuple[tuple[str, str], ...] = (
    ("driver", "driver"),
    ("cuda", "CUDA (driver API)"),
    ("cuda_runtime", "CUDA runtime"),
    ("cudnn", "cuDNN"),
    ("tensorflow", "TensorFlow"),
    ("gpu_model", "GPU model"),
)


@dataclass(frozen=True)
class Drift:
    """One thing the hosts disagree on: each value with its hosts (the most common first), and the hosts where it
    is not known (a driver not loaded, a framework not diagnosed)."""

    key: str
    name: str
    values: list[tuple[str, list[str]]]
    unknown: list[str]


def drift(hosts: Sequence[Host]) -> list[Drift]:
    """What the hosts differ in (driver, CUDA, cuDNN, TensorFlow, GPU model, then each other framework's version:
    PyTorch's), grouped by value: only where at least two hosts report different values; a host that does not say
    is listed apart, never counted as a value."""
    out = []
    others: dict[str, str] = {}
    for fw in (fw for h in hosts for fw in h.frameworks):
        # TensorFlow's version is DRIFT_KEYS' own (from its facts); a framework is named as its first host names it.
        if fw.get("name") and fw["name"] != "tensorflow" and fw["name"] not in dict(DRIFT_KEYS):
            others.setdefault(str(fw["name"]), str(fw.get("title") or fw["name"]))
    keys = [(key, name, False) for key, name in DRIFT_KEYS] + [(fw, title, True) for fw, title in others.items()]
    for key, name, framework in keys:
        by: dict[str, list[str]] = {}
        unknown = []
        for h in hosts:
            value = _version_of(h, key) if framework else getattr(h, key)
            if value is None:
                unknown.append(h.host)
            else:
                by.setdefault(value, []).append(h.host)
        if len(by) > 1:
            values = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            out.append(Drift(key, name, values, unknown))
    return out


def _version_of(host: Host, framework: str | None) -> str | None:
    """The version of ``framework`` a host's run diagnosed, None where it did not diagnose it or it did not import."""
    return next((fw.get("version") for fw in host.frameworks if fw.get("name") == framework), None)


def drift_lines(hosts: Sequence[Host]) -> list[str]:
    found = drift(hosts)
    if not found:
        return []
    lines = ["", "Version drift (hosts that differ):"]
    for d in found:
        groups = "; ".join(f"{value} on {', '.join(names)}" for value, names in d.values)
        lines.append(f"  {d.name}: {groups}" + (f" (not known on {', '.join(d.unknown)})" if d.unknown else ""))
    return [one_line(line) for line in lines]


def _figures(facts: dict[str, Any]) -> dict[str, Any]:
    try:
        return registry.figures(facts)
    except (TypeError, ValueError, AttributeError, KeyError):  # a unit's facts of other types than it wrote
        return {}


def figures_text(figures: dict[str, Any]) -> str:
    return "; ".join(registry.figures_text(figures)) or "-"


def _gpus(names: list[str]) -> str:
    if not names:
        return "none"
    counts = Counter(names)
    return ", ".join(f"{c}x {n.removeprefix('NVIDIA ')}" for n, c in counts.items())


def groups(hosts: Sequence[Host]) -> list[tuple[str, list[Host]]]:
    """Hosts by root cause (the healthy ones under "accelerated", degraded ones by their first fault), the
    largest group first."""
    by: dict[str, list[Host]] = {}
    for h in hosts:
        key = h.root_cause or (h.also[0] if h.verdict == "degraded" and h.also else h.verdict)
        by.setdefault(key, []).append(h)
    return sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))


@dataclass
class Merged:
    hosts: list[Host]
    #: What was left out, one sentence each: a fleet JSON among the inputs, a report given twice.
    notes: list[str] = field(default_factory=list)


def merge(paths: Sequence[str]) -> Merged:
    """Every host's report in ``paths``, once: a file given twice (or a copy of one: the same bytes) counts
    once, and a merged fleet JSON (this command's own ``--json``, picked up by ``reports/*.json``) is left
    out; each with a note."""
    if not paths:
        raise UnusableReport("no report given: gpucheck merge REPORT.json [REPORT.json ...]")
    merged = Merged([])
    seen: dict[str, str] = {}
    for path in paths:
        report = _load(path)
        digest = hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest()
        if digest in seen:
            merged.notes.append(f"{path} is the same report as {seen[digest]}: counted once")
            continue
        seen[digest] = path
        try:
            merged.hosts.append(_host(path, report))
        except _Fleet:
            merged.notes.append(f"{path} is a merged fleet JSON (gpucheck merge --json), not a host's report: left out")
    if not merged.hosts:
        raise UnusableReport("no host's report among the files given: " + "; ".join(merged.notes))
    merged.notes += same_names(merged.hosts)
    return merged


def same_names(hosts: Sequence[Host]) -> list[str]:
    """A note for each host name that different reports share: two rows of one name (a copied report edited, a
    node's report of another day, two nodes of one name) would make a contradictory summary without a word."""
    by: dict[str, list[Host]] = {}
    for h in hosts:
        by.setdefault(h.host, []).append(h)
    return [
        f"{len(hs)} different reports say they are host {name} ({', '.join(h.path for h in hs[:10])}"
        f"{' ...' if len(hs) > 10 else ''}): each is a row of its own; check which is current"
        for name, hs in by.items() if len(hs) > 1
    ]


def exit_status(hosts: Sequence[Host]) -> int:
    return ALL_ACCELERATED if all(h.verdict == "accelerated" for h in hosts) else NOT_ACCELERATED


def text_report(hosts: Sequence[Host], out: TextIO) -> None:
    """The table, the groups and the count. Every value from a report is shown printable (an escape sequence
    in a host name is shown as ``\\x1b``, never sent to the terminal)."""
    rows = [
        [h.host, h.verdict + ("" if h.complete else " (incomplete)"), h.root_cause or ", ".join(h.also) or "-",
         _gpus(h.gpus), h.driver or "-", frameworks_text(h.frameworks), figures_text(h.figures)]
        for h in hosts
    ]
    rows = [[one_line(c) for c in r] for r in rows]
    headers = ["host", "verdict", "root cause", "GPUs", "driver", "frameworks", "key figures"]
    widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(len(headers))]
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    out.write("\nHosts grouped by root cause:\n")
    for key, members in groups(hosts):
        summary = next((h.root_cause_summary for h in members if h.root_cause_summary), None)
        names = one_line(", ".join(h.host for h in members))
        out.write(f"  {one_line(key)} ({len(members)} host{'s' if len(members) != 1 else ''}): {names}\n")
        if summary and len(members) == len([m for m in members if m.root_cause == key]):
            out.write(f"    e.g. {one_line(summary)}\n")
    for line in drift_lines(hosts):
        out.write(line + "\n")
    bad = [h for h in hosts if h.verdict != "accelerated"]
    out.write(
        f"\n{len(hosts) - len(bad)} of {len(hosts)} host{'s' if len(hosts) != 1 else ''} accelerated"
        + (f"; not accelerated: {one_line(', '.join(h.host for h in bad))}.\n" if bad else ".\n")
    )


def json_report(hosts: Sequence[Host], notes: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "schema": FLEET_SCHEMA,
        "hosts": [asdict(h) for h in hosts],
        "notes": list(notes),
        "groups": [{"cause": key, "hosts": [h.host for h in members]} for key, members in groups(hosts)],
        "drift": [
            {"key": d.key, "name": d.name, "values": [{"value": v, "hosts": names} for v, names in d.values],
             "unknown": d.unknown}
            for d in drift(hosts)
        ],
        "accelerated": sum(h.verdict == "accelerated" for h in hosts),
        "not_accelerated": sum(h.verdict != "accelerated" for h in hosts),
        "exit_status": exit_status(hosts),
    }
