"""The report file: written where the user points, never replacing what is there by something
else, checked at start, following the published schema.

Defect 1: ``--gpucheck-json PATH`` renamed a temporary file over PATH, so a character device, a FIFO or a
symlink became a regular file (as root, ``--gpucheck-json=/dev/null`` would replace the system's
``/dev/null``), and the file's mode was mkstemp's 0600. Defect 3: an unwritable path (``/proc/version`` as
root) was found only at the end. The unit tests call ``gpucheck.report.write_report`` and
``gpucheck.reportfile.parse_report_path``; the others run ``pytest --gpucheck`` for real, as the defects
were seen.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import jsonschema
import pytest

from conftest import RUN_OPTIONS, SharedRuns, report_validator, validate_report
from gpucheck import report
from gpucheck.model import catalog
from gpucheck.reportfile import EXIT_REPORT_NOT_WRITTEN, TEMP_PREFIX, ReportWriteError, parse_report_path, write_report

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="mknod of a device needs root")


def unprivileged(fn: Callable[[str], object], path: str) -> str:
    """``fn(path)`` in a forked child that is no superuser (root may write files whatever their mode): as root,
    the child drops to ``nobody`` (no supplementary groups) before the call. Returns what it returned
    (``ok: ...``) or raised (``ValueError: ...``), after ``uid=N`` of the caller it ran as."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                nobody = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            try:
                message = f"ok: {fn(path)!r}"
            except Exception as exc:  # noqa: BLE001 - what it raised is the answer, whatever it is
                message = f"{type(exc).__name__}: {exc}"
            os.write(write_end, f"uid={os.geteuid()}\n{message}".encode())
        except BaseException:  # noqa: BLE001 - a forked child never returns into pytest
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, (status, data)
    who, _, message = data.partition("\n")
    assert who != "uid=0", "the child still runs as root"
    return message


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder an unprivileged child can reach and write in (pytest's tmp_path is root's own, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="gpucheck-unprivileged-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        for child in path.iterdir():
            child.chmod(0o755)
        shutil.rmtree(path)
FAST = ("--gpucheck", "--gpucheck-framework=none", *RUN_OPTIONS)
TEXT = '{"schema": "gpucheck-report/1"}\n'


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith((TEMP_PREFIX, ".gpucheck-probe-")))


def mknod_null(path: Path) -> Path:
    """A copy of /dev/null (character device 1:3); skips where the file system refuses devices (nodev)."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    try:
        os.close(os.open(path, os.O_WRONLY))
    except OSError as exc:
        pytest.skip(f"devices cannot be opened on {path.parent}'s file system: {exc}")
    return path


# --- defect 1: what the path names stays what it is ------------------------------------------------


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_mode_follows_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    target = tmp_path / "r.json"
    with umask(mask):
        write_report(str(target), TEXT)
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_text() == TEXT
    assert leftovers(tmp_path) == []


def test_existing_file_is_replaced_atomically_keeping_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o640)
    inode = target.stat().st_ino
    with umask(0o077):
        write_report(str(target), TEXT)
    assert target.read_text() == TEXT
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_ino != inode, "a new file renamed over the old one: readers never see half a report"
    assert leftovers(tmp_path) == []


def test_longest_file_name_is_written(tmp_path: Path) -> None:
    """The temporary file beside it must fit in NAME_MAX (255 bytes) too."""
    target = tmp_path / ("r" * 250 + ".json")
    write_report(str(target), TEXT)
    assert target.read_text() == TEXT and leftovers(tmp_path) == []


def test_new_directories_are_made(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "r.json"
    write_report(str(target), TEXT)
    assert target.read_text() == TEXT


def test_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "reports" / "host1.json"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_report(str(link), TEXT)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == TEXT and stat.S_IMODE(real.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == [] and leftovers(real.parent) == []


def test_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "r.json"
    link.symlink_to("out/r.json")  # relative to the link's directory
    write_report(str(link), TEXT)
    assert link.is_symlink() and (tmp_path / "out" / "r.json").read_text() == TEXT


def test_symlink_to_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "r.json").symlink_to("d")
    with pytest.raises(ReportWriteError, match=r"r\.json: it is a directory$"):
        write_report(str(tmp_path / "r.json"), TEXT)
    with pytest.raises(ValueError, match="it is a directory"):
        parse_report_path(str(tmp_path / "r.json"))


def test_symlink_loop_is_a_sentence(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(ValueError, match="symbolic links"):
        parse_report_path(str(tmp_path / "a"))


def test_fifo_without_reader_fails_at_once_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    assert parse_report_path(str(fifo)) == str(fifo), "no reader at start is fine: it may come later"
    start = time.monotonic()
    with pytest.raises(ReportWriteError, match="it is a FIFO that no process reads"):
        write_report(str(fifo), TEXT)
    assert time.monotonic() - start < 5
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_fifo_with_reader_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while True:  # until the reader has the FIFO open (a writer's non-blocking open then succeeds)
        try:
            write_report(str(fifo), TEXT * 5000)  # more than a pipe's buffer: the write blocks until read
            break
        except ReportWriteError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    reader.join(10)
    assert got == [(TEXT * 5000).encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@needs_root
def test_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    null = mknod_null(tmp_path / "null")
    assert parse_report_path(str(null)) == str(null)
    write_report(str(null), TEXT)
    st = os.lstat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert leftovers(tmp_path) == []


@needs_root
def test_block_device_is_refused_without_opening_it(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    os.mknod(disk, stat.S_IFBLK | 0o600, os.makedev(7, 0))  # loop0; never opened
    with pytest.raises(ValueError, match="it is a block device"):
        parse_report_path(str(disk))
    with pytest.raises(ReportWriteError, match="it is a block device"):
        write_report(str(disk), TEXT)
    assert stat.S_ISBLK(os.lstat(disk).st_mode)


def test_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(ValueError, match="it is a socket"):
            parse_report_path(str(path))


# --- defect 3: checked at start; failures name the path given, never a temporary file ---------------


def test_proc_file_is_refused_at_start() -> None:
    """As root os.access says yes and even open(O_WRONLY) succeeds on /proc/version; creating a file
    beside it is what fails, as the rename would."""
    with pytest.raises(ValueError, match=r"^cannot write the report to /proc/version: no file can be created in /proc"):
        parse_report_path("/proc/version")


def test_write_failure_names_the_path_given_not_a_temporary_file() -> None:
    with pytest.raises(ReportWriteError) as info:
        write_report("/proc/gpucheck-report.json", TEXT)
    assert str(info.value).startswith("cannot write the report to /proc/gpucheck-report.json: ")
    assert TEMP_PREFIX not in str(info.value)
    assert isinstance(info.value, OSError), "callers that catch OSError still catch it"
    with pytest.raises(ReportWriteError) as multi:
        write_report("/proc/a\nb.json", TEXT)
    assert str(multi.value).isprintable(), "one line, whatever the path holds"


def test_report_path_checks(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    with pytest.raises(ValueError, match=r"afile is not a directory"):
        parse_report_path(str(tmp_path / "afile" / "x" / "r.json"))
    with pytest.raises(ValueError, match="must be a file path"):
        parse_report_path("  ")
    with pytest.raises(ValueError, match="NUL"):
        parse_report_path("a\0b")
    with pytest.raises(ValueError, match=r"\\n"):  # one line, whatever the path holds
        parse_report_path(str(tmp_path / "afile" / "a\nb"))
    assert parse_report_path(str(tmp_path / "new" / "r.json")) == str(tmp_path / "new" / "r.json")
    assert not (tmp_path / "new").exists(), "the check at start creates nothing"
    assert leftovers(tmp_path) == []


def test_relative_path_is_made_absolute_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_report_path("r.json") == str(tmp_path / "r.json")


def test_read_only_file_is_refused_at_start(shared_tmp: Path) -> None:
    target = shared_tmp / "r.json"
    target.write_text("")
    target.chmod(0o444)
    outcome = unprivileged(parse_report_path, str(target))
    assert outcome.startswith("ValueError: ") and "cannot be opened for writing" in outcome, outcome
    # A file that is writable is accepted by the same unprivileged caller.
    target.chmod(0o666)
    assert unprivileged(parse_report_path, str(target)) == f"ok: {str(target)!r}"


def test_read_only_directory_is_refused_at_start(shared_tmp: Path) -> None:
    (shared_tmp / "ro").mkdir(mode=0o555)
    (shared_tmp / "ro").chmod(0o555)
    outcome = unprivileged(parse_report_path, str(shared_tmp / "ro" / "r.json"))
    assert outcome.startswith("ValueError: ") and "no file can be created in" in outcome, outcome
    (shared_tmp / "ro").chmod(0o777)
    assert unprivileged(parse_report_path, str(shared_tmp / "ro" / "r.json")) == f"ok: {str(shared_tmp / 'ro' / 'r.json')!r}"


# --- through the real command line ------------------------------------------------------------------


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_cli_proc_version_is_a_usage_error_at_start(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*FAST, "--gpucheck-json=/proc/version")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = _one_line(result.stderr.str())
    assert line.startswith("ERROR: --gpucheck-json cannot write the report to /proc/version: ")
    assert "from --gpucheck-json" in line
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "collected" not in out, "nothing ran"


@pytest.mark.parametrize(
    ("args", "env", "origin"),
    [
        ((), {"GPUCHECK_TIMEOUT": "1e9"}, "environment variable GPUCHECK_TIMEOUT"),
        (("--gpucheck-timeout=3e6",), {}, "--gpucheck-timeout"),
        ((), {"GPUCHECK_TIMEOUT": "inf"}, "environment variable GPUCHECK_TIMEOUT"),
    ],
    ids=["env-1e9", "cli-3e6", "env-inf"],
)
def test_cli_timeout_beyond_the_limit_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], env: dict[str, str], origin: str
) -> None:
    """Issue 12, defect 2: not an INTERNALERROR (OverflowError: timeout is too large), exit 3."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = pytester.runpytest_subprocess(*FAST, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = _one_line(result.stderr.str())
    assert line.startswith("ERROR: --gpucheck-timeout ")
    assert origin in line
    if "inf" not in line:
        assert "at most 86400 seconds" in line
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_cli_fifo_with_reader_gets_the_report(pytester: pytest.Pytester) -> None:
    fifo = pytester.path / "report.fifo"
    os.mkfifo(fifo)
    with subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE) as cat:
        try:
            result = pytester.runpytest_subprocess(*FAST, f"--gpucheck-json={fifo}", timeout=120)
            out, _ = cat.communicate(timeout=30)
        finally:
            cat.kill()
    assert result.ret in (0, 1), result.stderr.str()
    validate_report(json.loads(out), "the report read from the FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_cli_fifo_without_reader_does_not_hang_or_replace_it(pytester: pytest.Pytester) -> None:
    fifo = pytester.path / "report.fifo"
    os.mkfifo(fifo)
    result = pytester.runpytest_subprocess(*FAST, f"--gpucheck-json={fifo}", timeout=120)
    assert "it is a FIFO that no process reads" in result.stderr.str()
    assert result.ret == EXIT_REPORT_NOT_WRITTEN, "the exit status says the report is missing"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert leftovers(pytester.path) == []


def test_cli_symlink_is_written_through(pytester: pytest.Pytester) -> None:
    real = pytester.path / "reports" / "r.json"
    real.parent.mkdir()
    link = pytester.path / "link.json"
    link.symlink_to(real)
    result = pytester.runpytest_subprocess(*FAST, f"--gpucheck-json={link}")
    assert result.ret in (0, 1)
    assert link.is_symlink() and os.readlink(link) == str(real)
    validate_report(json.loads(real.read_text()), real)
    assert stat.S_IMODE(real.stat().st_mode) == 0o666 & ~_current_umask()


@needs_root
def test_cli_character_device_is_not_replaced(pytester: pytest.Pytester) -> None:
    """The run that would have replaced the system's /dev/null, on a copy of it."""
    null = mknod_null(pytester.path / "null")
    result = pytester.runpytest_subprocess(*FAST, f"--gpucheck-json={null}")
    assert result.ret in (0, 1), result.stderr.str()
    st = os.lstat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert leftovers(pytester.path) == []


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- the published schema --------------------------------------------------------------------------


def test_schema_is_valid_json_schema_and_packaged() -> None:
    schema = report.report_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert "data/*.json" in pyproject["tool"]["setuptools"]["package-data"]["gpucheck"], "the schema ships as package data"


def test_schema_layers_are_the_catalogs() -> None:
    schema = report.report_schema()
    assert schema["$defs"]["layer"]["enum"] == ["run", *catalog().layers]
    assert schema["properties"]["schema"]["const"] == report.SCHEMA


def test_schema_rejects_what_breaks_the_contract() -> None:
    good: dict[str, object] = {
        "schema": "gpucheck-report/1", "verdict": "accelerated", "action": "none", "root_cause": None, "findings": [],
        "facts": {},
        "checks": [{"nodeid": "checks_stack.py::test_x", "outcome": "passed", "finding_ids": []}], "layers": [],
        "complete": True, "settings": {"timeout": {"value": 60.0, "source": "default"}},
        "environment": {"gpucheck": "0.1.0", "python": "3.11.7", "platform": "Linux"}, "added_later": 1,
    }
    validator = report_validator()
    assert list(validator.iter_errors(good)) == []
    for broken in (
        {**good, "verdict": "fast"},
        {**good, "action": "panic"},
        {k: v for k, v in good.items() if k != "action"},
        {**good, "verdict": "not-accelerated"},  # without its root cause
        {**good, "complete": False},  # an unfinished run is never accelerated
        {k: v for k, v in good.items() if k != "facts"},
        {**good, "checks": [{"nodeid": "x", "outcome": "xfailed", "finding_ids": []}]},
    ):
        assert list(validator.iter_errors(broken)), broken


def test_report_of_an_unfinished_run_follows_the_schema(tmp_path: Path) -> None:
    """What Diagnosis.abandon() leaves (Ctrl-C before the verdict): complete false, diagnosis-incomplete."""
    from gpucheck.diagnosis import Result
    from gpucheck.model import Severity, finding
    from gpucheck.settings import Settings

    incomplete = finding("diagnosis-incomplete", Severity.BLOCKER, summary="s", cause="c", remedy="r",
                         evidence={"finished_probes": []})
    result = Result(None, {}, (incomplete,), incomplete, "not-accelerated", (), False)
    report.write_json(str(tmp_path / "r.json"), result, [], Settings(sources=(("timeout", "default"),)))
    validate_report(json.loads((tmp_path / "r.json").read_text()))


def test_report_of_a_real_run_on_this_host_follows_the_schema(gpucheck_shared: SharedRuns) -> None:
    """run_gpucheck and gpucheck_shared validate every report they read; this says so for the plainest run there is
    (shared with tests/test_performance.py)."""
    run = gpucheck_shared.run("--gpucheck-framework=none")
    assert run.report, run.result.stdout.str()
    assert list(report_validator().iter_errors(run.report)) == []
    assert run.report["complete"] is True


def test_schema_is_readable_without_the_repository() -> None:
    """From the installed package, as a CI script would load it."""
    code = "import json; from gpucheck.report import report_schema; print(report_schema()['title'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert "gpucheck-report/1" in out.stdout
