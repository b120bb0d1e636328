"""Reading a JSON file someone handed to a command (``gpucheck compare``, ``gpucheck merge``): every way it
can fail becomes one sentence (:class:`Unreadable`), never a traceback; and reading values out of it
defensively (:func:`dig`, :func:`number`, :func:`as_list`), whatever types its fields have. Standard library only."""

from __future__ import annotations

import json
import math
from typing import Any

from gpucheck.inputfile import MiB, Unreadable, read_text

LIMIT_BYTES = 512 * MiB  # a 268-benchmark file with every round saved is 30 MiB

__all__ = ["Unreadable", "as_list", "dig", "number", "read_json"]


MAX_INT_DIGITS = 40  # no figure of a report or a benchmark file has more; 4,300 already costs seconds


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _TooLong(len(text))
    return int(text)


class _TooLong(ValueError):
    pass


def read_json(path: str, what: str) -> Any:
    """The JSON of ``path`` (read as :func:`gpucheck.inputfile.read_text` reads: bounded, any encoding, gzip);
    ``what`` names what it should be, for the sentence ("pytest-benchmark's JSON", "a gpucheck report")."""
    try:
        text = read_text(path, limit=LIMIT_BYTES)
    except Unreadable as exc:
        if "is a folder" in str(exc):
            raise Unreadable(f"{path} is a folder, not {what}") from None
        raise
    if not text.strip():
        raise Unreadable(f"{path} is empty, not {what}")
    try:
        return json.loads(text, parse_int=_int)
    except _TooLong as exc:
        raise Unreadable(f"{path} is not {what} (a number of {exc.args[0]} digits)") from None
    except json.JSONDecodeError as exc:
        raise Unreadable(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise Unreadable(f"{path} is not {what} (nested too deep to read)") from None
    except (ValueError, MemoryError) as exc:
        raise Unreadable(f"{path} is not {what} ({type(exc).__name__}: {exc})") from None


def dig(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, or None where a step is not a mapping or lacks the key."""
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def number(value: Any) -> float | None:
    """A finite number, or None (a string, a boolean, NaN, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []
