"""The host's own files read without blocking: a FIFO or a device where a sysfs or procfs file should be is an
error read at once, and a read that never returns (a driver stuck in the kernel) is bounded in time and becomes
``host-read-hung``, never a hung run."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import GpucheckRun
from gpucheck.facts import Facts, HardwareFacts, KernelFacts, ProbeOutcome, VisibilityFacts
from gpucheck.probes.host import probe_hardware, probe_hardware_within, probe_kernel, probe_kernel_within
from gpucheck.rules.host import hardware_rules, kernel_rules
from gpucheck.settings import Settings
from tests.fakelibs import make_host_root

GPU = {"bus_id": "0000:3b:00.0", "vendor": "0x10de", "device": "0x2330", "class": "0x030200", "driver": "nvidia"}


def _fifo_in_place_of(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def test_fifos_in_the_host_view_are_errors_read_at_once(tmp_path: Path) -> None:
    root = make_host_root(tmp_path, {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia0"]})
    _fifo_in_place_of(root / "proc/driver/nvidia/version")
    _fifo_in_place_of(root / "sys/bus/pci/devices/0000:3b:00.0/class")
    kernel = probe_kernel_within(1, 60.0, root)
    assert not kernel.unanswered and kernel.version_line is None
    assert kernel.version_error is not None and "FIFO" in kernel.version_error
    hardware = probe_hardware_within(60.0, root)
    assert not hardware.unanswered and hardware.readable
    assert [(d.bus_id, d.pci_class) for d in hardware.nvidia_devices] == [("0000:3b:00.0", "")]


def _blocked_until(release: threading.Event, value: Any) -> Callable[..., Any]:
    """A probe that does what a read of a wedged driver's file does: it does not return (here until released,
    so that no thread outlives the test)."""

    def probe(*_: object) -> Any:
        release.wait(60)
        return value

    return probe


def _facts(hardware: HardwareFacts, kernel: KernelFacts) -> Facts:
    unused: Any = ProbeOutcome("unused", None, None)  # type: ignore[arg-type]
    return Facts(hardware=hardware, kernel=kernel, visibility=VisibilityFacts(None, None, None, (), False, None, None, ()),
                 cuda=unused, nvml=unused)


def test_a_read_that_never_returns_is_bounded_and_named(tmp_path: Path) -> None:
    root = make_host_root(tmp_path, {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia0"]})
    release = threading.Event()
    try:
        kernel = probe_kernel_within(1, 0.5, root, _blocked_until(release, probe_kernel(1, root)))
        hardware = probe_hardware_within(0.5, root, _blocked_until(release, probe_hardware(root)))
    finally:
        release.set()
    assert kernel.unanswered and kernel.version_error is not None and "did not finish within 0.5 s" in kernel.version_error
    assert hardware.unanswered and not hardware.readable
    facts = _facts(hardware, kernel)
    findings = kernel_rules(facts, Settings()) + hardware_rules(facts, Settings())
    assert [f.id for f in findings] == ["host-read-hung"]
    assert findings[0].evidence["what_did_not_answer"] == [hardware.error, kernel.version_error]


def test_a_probe_that_answers_in_time_is_taken_as_it_is(tmp_path: Path) -> None:
    root = make_host_root(tmp_path, {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia0"]})
    assert probe_kernel_within(1, 60.0, root) == probe_kernel(1, root)
    assert probe_hardware_within(60.0, root) == probe_hardware(root)


def test_pytest_gpucheck_with_fifos_for_host_files_finishes_and_names_them(
    tmp_path: Path, run_gpucheck: Callable[..., GpucheckRun], monkeypatch: Any
) -> None:
    """The issue's case: GPUCHECK_HOST_ROOT at a tree whose proc/driver/nvidia/version is a FIFO hung the run.
    The run's own time limit (300 s in run_gpucheck) is the bound that says it did not hang."""
    root = make_host_root(tmp_path / "host", {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia0"]})
    _fifo_in_place_of(root / "proc/driver/nvidia/version")
    _fifo_in_place_of(root / "sys/bus/pci/devices/0000:3b:00.0/vendor")
    monkeypatch.setenv("GPUCHECK_HOST_ROOT", str(root))
    done = run_gpucheck("--gpucheck-framework=none")
    assert done.report["complete"] is True, json.dumps(done.report)[:2000]
    kernel = done.report["facts"]["kernel"]
    assert "FIFO" in kernel["version_error"] and kernel["unanswered"] is False


def test_the_header_tells_a_broken_libcuda_from_a_missing_one(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """A libcuda.so.1 the loader finds but cannot load (here a file cut to a few bytes, as an interrupted copy
    leaves it) was headed "libcuda.so.1: not found"."""
    machine = fake_machine({"host": {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia0"]}})
    (machine / "lib" / "libcuda.so.1").write_bytes(b"\x7fELF\x02")
    done = run_gpucheck("--gpucheck-framework=none")
    header = [ln for ln in done.result.outlines if ln.startswith("gpucheck:")]
    assert any("libcuda.so.1: found but does not load (" in ln for ln in header), header
    assert not any("libcuda.so.1: not found" in ln for ln in header), header
