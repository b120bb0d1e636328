"""Reading a JSON file someone handed to a command (``gpucheck compare``, ``gpucheck merge``): every way it
can fail becomes one sentence (:class:`Unreadable`), never a traceback; and reading values out of it
defensively (:func:`dig`, :func:`number`, :func:`as_list`), whatever types its fields have. Standard library only."""

from __future__ import annotations

import json
import math
from typing import Any


class Unreadable(ValueError):
    """The file cannot be read as JSON; the message is the sentence that says why."""


def read_json(path: str, what: str) -> Any:
    """The JSON of ``path`` (a UTF-8 byte-order mark allowed); ``what`` names what it should be, for the
    sentence ("pytest-benchmark's JSON", "a gpucheck report")."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise Unreadable(f"{path} is not a file") from None
    except IsADirectoryError:
        raise Unreadable(f"{path} is a folder, not {what}") from None
    except UnicodeDecodeError:
        raise Unreadable(f"{path} is not JSON (it is not even UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise Unreadable(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise Unreadable(f"{path} is not {what} (nested too deep to read)") from None
    except OSError as exc:
        raise Unreadable(f"{path} cannot be read ({exc.strerror or exc})") from None


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
