"""Reading what someone handed to a command (a log for ``gpucheck explain``, a JSON file for ``compare`` and
``merge``): bounded in size and time, in whatever encoding people's tools write, gzip opened, and every way it
can fail one sentence (:class:`Unreadable`), never a traceback or a hang. Standard library only.

- A regular file is read up to ``limit`` bytes; more is refused in a sentence (``/dev/zero`` is no log).
- Anything else (a FIFO, ``<(command)``, a character device, a socket) is read without blocking: each wait for
  data is bounded by ``wait_s``, so a FIFO no one writes to ends in a sentence instead of a hang.
- Standard input (``-``) is read to its end, up to ``limit``, without a deadline: a person may be pasting.
- Text: a byte-order mark decides (UTF-8, UTF-16 as Windows PowerShell's ``>`` writes, UTF-32); without
  one, UTF-8, or UTF-16 when the NUL bytes say so, else Latin-1 (any byte is a character there, so nothing
  is lost and no read fails).
- gzip (``.gz``, or the magic bytes) is opened, its output bounded by the same ``limit``.
"""

from __future__ import annotations

import codecs
import os
import select
import stat
import sys
import time
import zlib

MiB = 1024 * 1024
LIMIT_BYTES = 256 * MiB
WAIT_S = 10.0
_CHUNK = 1 << 16


class Unreadable(ValueError):
    """The input cannot be read; the message is the sentence that says why."""


def read_bytes(path: str, *, limit: int = LIMIT_BYTES, wait_s: float = WAIT_S) -> bytes:
    """The bytes of ``path`` (``-``: standard input), gzip opened; at most ``limit`` of them."""
    if path == "-":
        data = _read_fd(sys.stdin.buffer.fileno(), "standard input", limit, None)
    else:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise Unreadable(f"{path} is not a file (there is nothing of that name)") from None
        except IsADirectoryError:
            raise Unreadable(f"{path} is a folder, not a file") from None
        except OSError as exc:
            raise Unreadable(f"{path} cannot be read ({exc.strerror or exc})") from None
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise Unreadable(f"{path} is a folder, not a file")
            if stat.S_ISREG(mode):
                os.set_blocking(fd, True)
                data = _read_fd(fd, path, limit, None)
            else:
                data = _read_fd(fd, path, limit, wait_s)
        except OSError as exc:
            raise Unreadable(f"{path} cannot be read ({exc.strerror or exc})") from None
        finally:
            os.close(fd)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, path, limit)
    return data


def _read_fd(fd: int, name: str, limit: int, wait_s: float | None) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if wait_s is not None:
            ready, _, _ = select.select([fd], [], [], wait_s)
            if not ready:
                what = "nothing" if size == 0 else "nothing more"
                raise Unreadable(
                    f"{what} came from {name} within {wait_s:g} s (a pipe or FIFO no program writes to?); "
                    "give a file, or pipe the text into standard input"
                )
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise Unreadable(f"{name} is larger than {limit // MiB} MiB, more than this command reads")
        chunks.append(chunk)


def _gunzip(data: bytes, name: str, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise Unreadable(f"{name} is gzip-compressed but damaged ({exc})") from None
    if len(out) > limit:
        raise Unreadable(f"{name} unpacks to more than {limit // MiB} MiB, more than this command reads")
    if not inflater.eof:
        raise Unreadable(f"{name} is gzip-compressed but cut short")
    return out


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode(data: bytes) -> str:
    """``data`` as text: by its byte-order mark, else UTF-8, UTF-16 (NUL bytes at every other place), Latin-1."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    sample = data[:4096]
    if len(sample) >= 4 and sample.count(0) * 3 >= len(sample):
        odd_nuls = sample[1::2].count(0)
        even_nuls = sample[0::2].count(0)
        return data.decode("utf-16-le" if odd_nuls > even_nuls else "utf-16-be", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") * 20 > len(text):  # mostly not UTF-8: a Latin-1 or Windows code page file
        return data.decode("latin-1")
    return text  # UTF-8 with a few damaged bytes (a log cut mid-character): keep the rest readable


def read_text(path: str, *, limit: int = LIMIT_BYTES, wait_s: float = WAIT_S) -> str:
    """The text of ``path`` (``-``: standard input), decoded as :func:`decode` says."""
    return decode(read_bytes(path, limit=limit, wait_s=wait_s))
