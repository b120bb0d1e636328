"""Reading a JSON file someone handed to a command (``gpucheck compare``, ``gpucheck merge``): every way it
can fail becomes one sentence (:class:`Unreadable`), never a traceback. Standard library only."""

from __future__ import annotations

import json
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
