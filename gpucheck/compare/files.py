"""Reading ``gpucheck compare``'s inputs: a pytest-benchmark JSON file, or a run id in a pytest-benchmark storage
folder, as a :class:`Run` of :class:`Bench` es; anything that cannot be compared is an :class:`UnusableInput`."""

from __future__ import annotations

import glob
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from gpucheck.jsonfile import Unreadable, number, read_json


class UnusableInput(Exception):
    """An input that cannot be compared, with the sentence that says why."""


@dataclass(frozen=True)
class Bench:
    name: str
    stats: dict[str, float]
    data: tuple[float, ...] | None
    extra_info: dict[str, Any]
    #: pytest-benchmark's ``group`` (``@pytest.mark.benchmark(group=...)``, ``--benchmark-group-by``).
    group: str | None = None
    #: pytest-benchmark's ``name``: the test without its file (``test_x[param]``), for narrow output.
    short: str = ""


@dataclass(frozen=True)
class Run:
    label: str
    path: str
    datetime: str | None
    machine_info: dict[str, Any]
    benchmarks: dict[str, Bench]


# --- reading the inputs ---------------------------------------------------------------------------------

_RUN_ID = re.compile(r"^\d{4,}(?:_[^/\\]*)?$")


def resolve(arg: str, storage: str) -> str:
    """A file path as given, or a pytest-benchmark run id (``0001``) found in ``storage``."""
    if os.path.isfile(arg):
        return arg
    if os.path.isdir(arg):
        raise UnusableInput(f"{arg} is a folder, not a pytest-benchmark JSON file: give a file, or run ids with --storage {arg}")
    if _RUN_ID.match(arg):
        found = sorted(glob.glob(os.path.join(glob.escape(storage), "*", f"{glob.escape(arg)}*.json")))
        found = [f for f in found if os.path.basename(f).startswith(arg if "_" in arg else f"{arg}_")]
        if len(found) == 1:
            return found[0]
        if not found:
            raise UnusableInput(f"no run {arg} in the pytest-benchmark storage {storage} (look for {storage}/*/{arg}_*.json)")
        raise UnusableInput(f"run {arg} is ambiguous in {storage}: {', '.join(found[:4])}; give the file")
    raise UnusableInput(f"{arg} is not a file (nor a run id like 0001 in {storage})")


def load(arg: str, storage: str = ".benchmarks") -> Run:
    path = resolve(arg, storage)
    try:
        raw = read_json(path, "pytest-benchmark's JSON")
    except Unreadable as exc:
        raise UnusableInput(str(exc)) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("benchmarks"), list):
        raise UnusableInput(f"{path} is not in pytest-benchmark's format (no 'benchmarks' list)")
    if not raw["benchmarks"]:
        raise UnusableInput(f"{path} has no benchmarks (its 'benchmarks' list is empty): nothing to compare")
    benches: dict[str, Bench] = {}
    for i, item in enumerate(raw["benchmarks"]):
        bench = _bench(item)
        if bench is None:
            raise UnusableInput(f"{path} is not in pytest-benchmark's format (benchmark {i + 1} has no name or stats)")
        bad = next((k for k in ("median", "mean", "min", "max") if not bench.stats[k] > 0), None)
        if bad is not None:
            raise UnusableInput(f"{path}: benchmark {bench.name} has a {bad} time of {bench.stats[bad]!r}, not a positive number")
        if bench.name in benches:
            raise UnusableInput(f"{path} has the benchmark {bench.name} twice")
        benches[bench.name] = bench
    mi = raw.get("machine_info")
    return Run(arg, path, _str(raw.get("datetime")), mi if isinstance(mi, dict) else {}, benches)


def _bench(item: Any) -> Bench | None:
    if not isinstance(item, dict):
        return None
    name = item.get("fullname") or item.get("name")
    stats = item.get("stats")
    if not isinstance(name, str) or not isinstance(stats, dict):
        return None
    numbers = {k: f for k, v in stats.items() if (f := number(v)) is not None}
    if not all(k in numbers for k in ("median", "min", "max", "mean")):
        return None
    data = stats.get("data")
    rounds: tuple[float, ...] | None = None
    if isinstance(data, list) and data and set(map(type, data)) <= {float, int}:  # not bool, not str
        try:
            rounds = tuple(map(float, data))
        except OverflowError:
            rounds = None
        if rounds is not None and not (math.isfinite(math.fsum(rounds)) and min(rounds) >= 0):
            rounds = None
    saved_rounds = numbers.get("rounds")
    if rounds is not None and saved_rounds is not None and len(rounds) != saved_rounds:
        rounds = None  # a sample of the rounds (cut to keep a file small) is not the run
    extra = item.get("extra_info")
    group = item.get("group")
    short = item.get("name")
    return Bench(
        name,
        numbers,
        rounds,
        extra if isinstance(extra, dict) else {},
        group if isinstance(group, str) and group else None,
        short if isinstance(short, str) and short else name,
    )


def _number(x: Any) -> bool:
    return number(x) is not None


def _str(x: Any) -> str | None:
    return x if isinstance(x, str) else None
