"""Visibility variables parsed like the driver parses them, and host views read through GPUCHECK_HOST_ROOT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucheck.probes.host import probe_hardware, probe_kernel
from gpucheck.probes.visibility import parse_cuda_visible_devices, probe_visibility
from gpucheck.rules.host import _unusable_nodes
from tests.fakelibs import make_host_root

GPU = {"bus_id": "0000:3b:00.0", "vendor": "0x10de", "device": "0x2330", "class": "0x030200", "driver": "nvidia"}


@pytest.mark.parametrize(
    ("value", "count", "used", "hides_all"),
    [
        ("0,1", 2, ["0", "1"], False),
        ("1", 2, ["1"], False),
        ("-1", 2, [], True),
        ("", 2, [], True),
        ("none", 2, [], True),
        ("0,7,1", 2, ["0"], False),  # 7 is invalid: it and everything after it are hidden
        ("7,0", 2, [], True),  # an invalid first entry hides every device
        ("GPU-8f2b4c1e", 2, ["GPU-8f2b4c1e"], False),
        ("MIG-GPU-8f2b4c1e/1/0", 1, ["MIG-GPU-8f2b4c1e/1/0"], False),
        ("0,0", 2, ["0"], False),  # a repeated entry stops the list
        ("3", None, ["3"], False),  # device count unknown: an index cannot be judged
    ],
)
def test_cuda_visible_devices_parsing(value: str, count: int | None, used: list[str], hides_all: bool) -> None:
    entries = parse_cuda_visible_devices(value, count)
    assert [e.text for e in entries if e.honoured] == used
    facts = probe_visibility(count, {"CUDA_VISIBLE_DEVICES": value})
    assert facts.hides_all is hides_all


def test_unset_variables_hide_nothing() -> None:
    facts = probe_visibility(4, {})
    assert not facts.hides_all and facts.visible_count == 4 and facts.entries == ()


def test_index_order_note_on_multi_gpu_hosts() -> None:
    facts = probe_visibility(2, {"CUDA_VISIBLE_DEVICES": "1"})
    assert any("PCI_BUS_ID" in n for n in facts.notes)
    assert probe_visibility(2, {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).notes == ()
    assert any("not one of" in n for n in probe_visibility(1, {"CUDA_DEVICE_ORDER": "pci"}).notes)


def test_hardware_view_reads_vendor_class_and_bound_driver(tmp_path: Path) -> None:
    audio = {"bus_id": "0000:3b:00.1", "vendor": "0x10de", "device": "0x10f0", "class": "0x040300", "driver": None}
    nic = {"bus_id": "0000:00:03.0", "vendor": "0x8086", "device": "0x100e", "class": "0x020000", "driver": None}
    root = make_host_root(tmp_path, {"pci": [GPU, audio, nic]})
    hw = probe_hardware(root)
    assert hw.readable and hw.pci_device_count == 3
    assert [d.bus_id for d in hw.nvidia_devices] == ["0000:3b:00.0", "0000:3b:00.1"]
    assert [(g.bus_id, g.driver) for g in hw.nvidia_gpus] == [("0000:3b:00.0", "nvidia")]


def test_unreadable_pci_bus_is_a_fact(tmp_path: Path) -> None:
    hw = probe_hardware(tmp_path / "nowhere")
    assert not hw.readable and hw.error and "FileNotFoundError" in hw.error


def test_kernel_view_module_version_and_nodes(tmp_path: Path) -> None:
    root = make_host_root(
        tmp_path, {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia-uvm", "nvidia0"]}
    )
    k = probe_kernel(1, root)
    assert k.module_version == "550.54.15" and k.module_in_sysfs
    assert k.version_line and k.version_line.startswith("NVRM version")
    assert all(n.exists and n.is_char_device and n.readable for n in k.nodes)
    assert _unusable_nodes(k.nodes) == []


def test_container_with_a_subset_of_gpus_is_not_a_fault(tmp_path: Path) -> None:
    """`docker run --gpus '"device=1"'` on a 2-GPU host: sysfs shows both, /dev has only nvidia1."""
    gpu1 = dict(GPU, bus_id="0000:86:00.0")
    root = make_host_root(
        tmp_path, {"pci": [GPU, gpu1], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia-uvm", "nvidia1"]}
    )
    k = probe_kernel(2, root)
    assert any(n.path == "/dev/nvidia0" and not n.exists for n in k.nodes)
    assert _unusable_nodes(k.nodes) == []


def test_missing_uvm_node_is_a_fault(tmp_path: Path) -> None:
    root = make_host_root(tmp_path, {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidiactl", "nvidia0"]})
    assert [n.path for n in _unusable_nodes(probe_kernel(1, root).nodes)] == ["/dev/nvidia-uvm"]


def test_regular_file_is_not_a_device_node(tmp_path: Path) -> None:
    root = make_host_root(tmp_path, {"pci": [GPU], "module_version": "550.54.15", "dev": ["nvidia-uvm", "nvidia0"]})
    (root / "dev" / "nvidiactl").write_text("")
    bad = _unusable_nodes(probe_kernel(1, root).nodes)
    assert [(n.path, n.is_char_device) for n in bad] == [("/dev/nvidiactl", False)]


def test_independent_of_root_cause() -> None:
    """NVML health readings above a framework-side root cause are not its consequences; a TensorFlow-side
    finding above it is; nothing is independent of a root cause below what it needs."""
    from gpucheck.blocking import independent_of
    from gpucheck.model import Severity, finding

    def make(cid: str) -> Any:
        return finding(cid, Severity.BLOCKER, summary="s", cause="c", remedy="r")

    libs, memory, placement, hidden = (
        make("cuda-runtime-missing"), make("gpu-memory-exhausted"), make("placement-failed"), make("devices-hidden-by-env")
    )
    assert independent_of(memory, libs)
    assert not independent_of(placement, libs)
    assert not independent_of(memory, hidden)
    assert not independent_of(libs, libs) and not independent_of(memory, None)
