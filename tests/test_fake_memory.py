"""The fake driver's GPU memory is shared by the processes of a machine, as a real GPU's is.

Tests of the fakes themselves (tests/fakes/libcuda.c, libnvidia-ml.c, fakeledger.h), not of gpucheck:
what one process holds through the fake libcuda, the others' cuMemGetInfo and NVML's memory and
process queries see; a process that dies gives it back; an allocation that does not fit fails with
CUDA_ERROR_OUT_OF_MEMORY. Each observer is a separate process that loads the fake libraries with
ctypes (or the real nvidia-ml-py bindings), as gpucheck's probes and TensorFlow do.

The machine is tests/scenarios/cuda/h100-80gb-healthy.json (a real H100 host): NVML total 85520809984,
reserved 503316480, used 131072; cuDeviceTotalMem 85017493504; a context costs 552271872 bytes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import fakelibs

GiB = 1 << 30
MiB = 1 << 20
SCENARIO = "cuda/h100-80gb-healthy"

#: cuInit, the primary context of CUDA device argv[1] (stops there if that fails), cuMemGetInfo_v2; then
#: each allocation in argv[2:] (a Python expression of ``free``, the bytes free just before it) with its
#: CUresult and the free memory after it. JSON on stdout.
CUDA_PROBE = r"""
import ctypes, json, sys
cuda = ctypes.CDLL("libcuda.so.1")
out = {"init": cuda.cuInit(0)}
dev = ctypes.c_int()
out["device"] = cuda.cuDeviceGet(ctypes.byref(dev), int(sys.argv[1]))
ctx = ctypes.c_void_p()
out["retain"] = cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
if out["retain"]:
    print(json.dumps(out))
    sys.exit(0)
cuda.cuCtxSetCurrent(ctx)
def info():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value, total.value
out["free"], out["total"] = info()
out["allocs"] = []
for spec in sys.argv[2:]:
    size = eval(spec, {"free": info()[0], "GiB": 1 << 30})
    ptr = ctypes.c_uint64()
    code = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))
    out["allocs"].append({"size": size, "code": code, "free_after": info()[0]})
print(json.dumps(out))
"""

#: NVML through the real nvidia-ml-py bindings (memory v1 and v2, compute processes v2 and v3, names)
#: and the v1 process call through ctypes (nvmlProcessInfo_v1_t). JSON on stdout.
NVML_PROBE = r"""
import ctypes, json, sys
import pynvml as n
n.nvmlInit()
out = []
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    m1 = n.nvmlDeviceGetMemoryInfo(h)
    m2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
    lib = ctypes.CDLL("libnvidia-ml.so.1")  # the library pynvml loaded, same handle
    class P1(ctypes.Structure):  # nvmlProcessInfo_v1_t
        _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
    count = ctypes.c_uint(0)
    rc = lib.nvmlDeviceGetComputeRunningProcesses(h, ctypes.byref(count), None)
    assert rc in (0, 7), rc  # NVML_ERROR_INSUFFICIENT_SIZE when there are some
    arr = (P1 * max(count.value, 1))()
    rc = lib.nvmlDeviceGetComputeRunningProcesses(h, ctypes.byref(count), arr)
    assert rc == 0, rc
    procs = {}
    for api, items in (
        ("v1", [(arr[k].pid, arr[k].usedGpuMemory) for k in range(count.value)]),
        ("v2", [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses_v2(h)]),
        ("v3", [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses_v3(h)]),
    ):
        procs[api] = sorted(items)
    names = {}
    for pid, _ in procs["v3"]:
        try:
            names[pid] = n.nvmlSystemGetProcessName(pid)
        except n.NVMLError as e:
            names[pid] = str(e)
    out.append({"v1": {"total": m1.total, "free": m1.free, "used": m1.used},
                "v2": {"total": m2.total, "reserved": m2.reserved, "free": m2.free, "used": m2.used},
                "processes": procs, "names": names})
print(json.dumps(out))
"""


def cuda_probe(ordinal: int = 0, *allocs: str, context: int = 0) -> dict[str, Any]:
    """CUDA_PROBE in a new process; ``context``: the CUresult its context must get."""
    proc = subprocess.run(
        [sys.executable, "-c", CUDA_PROBE, str(ordinal), *allocs], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    assert (out["init"], out["device"], out["retain"]) == (0, 0, context), out
    return out


def nvml_probe() -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-c", NVML_PROBE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    gpus: list[dict[str, Any]] = json.loads(proc.stdout)
    return gpus


@pytest.fixture
def h100(fake_machine: Callable[[dict[str, Any]], Path]) -> dict[str, Any]:
    """The real H100 host, with only the driver libraries (what these tests load)."""
    scenario = fakelibs.load_scenario(SCENARIO)
    scenario["libraries"] = ["libcuda", "libnvml"]
    fake_machine(scenario)
    gpu: dict[str, Any] = scenario["gpus"][0]
    return gpu


@pytest.fixture
def hold(fake_lib_cache: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``hold(gpu, nbytes)`` or ``hold(gpu, leave=X)``: a process holding GPU memory
    (fakelibs.hold_gpu_memory), killed at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(gpu: int, nbytes: int | None = None, leave: int | None = None) -> subprocess.Popen[str]:
        proc = fakelibs.hold_gpu_memory(gpu, nbytes, leave=leave, cache_dir=fake_lib_cache)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_scenario_reads_like_the_real_h100(h100: dict[str, Any]) -> None:
    """Nothing allocated: the numbers the real machine gave (tf-healthy/C1.json)."""
    cuda = cuda_probe()
    assert cuda["total"] == 85017493504  # cuDeviceTotalMem_v2 / cuMemGetInfo's total there
    assert cuda["free"] == 84465090560  # what gpucheck's ctypes probe read there, its own context included
    (gpu,) = nvml_probe()
    assert gpu["v2"] == {"total": 85520809984, "reserved": 503316480, "free": 85017362432, "used": 131072}
    assert gpu["processes"] == {"v1": [], "v2": [], "v3": []}


def test_held_memory_is_gone_for_other_processes_until_the_holder_dies(
    h100: dict[str, Any], hold: Callable[..., subprocess.Popen[str]]
) -> None:
    before = cuda_probe()["free"]
    holder = hold(0, 70 * GiB)
    held = 70 * GiB + h100["context_memory"]  # its allocation and its context
    assert cuda_probe()["free"] == before - held

    (gpu,) = nvml_probe()
    used = h100["memory_used"] + held
    assert gpu["v2"]["used"] == used
    assert gpu["v2"]["free"] == h100["memory_total"] - h100["memory_reserved"] - used
    assert gpu["v1"]["used"] == used + h100["memory_reserved"]  # v1 counts the reservation as used
    for api in ("v1", "v2", "v3"):
        assert gpu["processes"][api] == [[holder.pid, held]], api
    assert gpu["names"][str(holder.pid)].rsplit("/", 1)[-1].startswith("holdmem-")

    holder.kill()
    holder.wait(timeout=10)
    assert cuda_probe()["free"] == before
    (gpu,) = nvml_probe()
    assert gpu["v2"]["used"] == h100["memory_used"]
    assert gpu["processes"]["v3"] == []


def test_a_killed_process_frees_its_memory_before_it_is_reaped(
    h100: dict[str, Any], hold: Callable[..., subprocess.Popen[str]]
) -> None:
    """A real driver frees a process's memory when it exits; a zombie holds none."""
    before = cuda_probe()["free"]
    holder = hold(0, 10 * GiB)
    os.kill(holder.pid, signal.SIGKILL)
    stat = Path(f"/proc/{holder.pid}/stat")
    deadline = time.monotonic() + 10
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert cuda_probe()["free"] == before
    assert nvml_probe()[0]["processes"]["v3"] == []


def test_an_allocation_beyond_free_fails_with_out_of_memory(
    h100: dict[str, Any], hold: Callable[..., subprocess.Popen[str]]
) -> None:
    hold(0, 70 * GiB)
    probe = cuda_probe(0, "free + 1", "free", "1")
    too_big, exact, one_more = probe["allocs"]
    assert too_big["code"] == 2  # CUDA_ERROR_OUT_OF_MEMORY, and nothing taken
    assert too_big["free_after"] == probe["free"]
    assert exact["code"] == 0 and exact["free_after"] == 0
    assert one_more["code"] == 2
    # A third process cannot hold what is left to the others either.
    with pytest.raises(RuntimeError, match="failed cuMemAlloc_v2 2"):
        hold(0, 10 * GiB)


def test_a_holder_can_leave_a_given_amount_free(
    h100: dict[str, Any], hold: Callable[..., subprocess.Popen[str]]
) -> None:
    """leave=F + context_memory: the next process sees F free in its own context."""
    hold(0, leave=1536 * MiB + h100["context_memory"])
    assert cuda_probe()["free"] == 1536 * MiB
    with pytest.raises(RuntimeError, match="failed cuMemGetInfo_v2 2"):
        hold(0, leave=100 * GiB)


def test_a_context_needs_room_too(h100: dict[str, Any], hold: Callable[..., subprocess.Popen[str]]) -> None:
    """With less free than a context costs, making one fails with CUDA_ERROR_OUT_OF_MEMORY."""
    free = cuda_probe()["free"]
    hold(0, free - 1 * MiB)  # the holder's own context costs what the probe's did: `free` is its room too
    cuda_probe(0, context=2)  # cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY


#: Retain the primary context, allocate 1 GiB, release the context; say so and stay alive until stdin closes.
RELEASE = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
ctx = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
ptr = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 30)) == 0
assert cuda.cuDevicePrimaryCtxRelease_v2(0) == 0
print("released", flush=True)
sys.stdin.read()
"""


def test_releasing_the_last_context_gives_its_memory_back(h100: dict[str, Any]) -> None:
    """The context's allocations and its own cost go with it, while the process lives on."""
    before = cuda_probe()["free"]
    proc = subprocess.Popen([sys.executable, "-c", RELEASE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "released\n"
        assert cuda_probe()["free"] == before
        assert nvml_probe()[0]["processes"]["v3"] == []
    finally:
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_ledger_gpu_is_the_nvml_index_whatever_cuda_visible_devices_says(
    fake_machine: Callable[[dict[str, Any]], Path],
    hold: Callable[..., subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CUDA ordinal 0 under CUDA_VISIBLE_DEVICES=1 is the second GPU: NVML device 1 shows the holder."""
    scenario = fakelibs.load_scenario(SCENARIO)
    scenario["libraries"] = ["libcuda", "libnvml"]
    second = dict(scenario["gpus"][0], pci_bus_id="00000000:00:07.0", cuda_pci_bus_id="0000:00:07.0",
                  uuid="GPU-00000000-0000-4000-8000-000000000007")
    scenario["gpus"].append(second)
    fake_machine(scenario)
    free = [cuda_probe(i)["free"] for i in (0, 1)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    holder = hold(0, 8 * GiB)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    held = 8 * GiB + second["context_memory"]
    assert [cuda_probe(i)["free"] for i in (0, 1)] == [free[0], free[1] - held]
    first_gpu, second_gpu = nvml_probe()
    assert first_gpu["processes"]["v3"] == [] and first_gpu["v2"]["used"] == second["memory_used"]
    assert second_gpu["processes"]["v3"] == [[holder.pid, held]]


def test_dead_entries_in_the_ledger_are_ignored_and_dropped(
    h100: dict[str, Any], hold: Callable[..., subprocess.Popen[str]]
) -> None:
    """Entries of processes that are gone (or whose pid now names another process) count for nothing."""
    ledger = fakelibs.ledger_path()
    assert ledger is not None
    before = cuda_probe()["free"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ledger.write_text(f"0 {dead.pid} 1 {40 * GiB}\n0 {os.getpid()} 1 {40 * GiB}\n")  # start time 1: not us
    assert cuda_probe()["free"] == before
    assert nvml_probe()[0]["processes"]["v3"] == []
    holder = hold(0, 1 * GiB)  # a write drops them
    lines = [line.split() for line in ledger.read_text().splitlines() if not line.startswith("#")]
    assert [(int(pid), int(nbytes)) for _, pid, _, nbytes in lines] == [(holder.pid, 1 * GiB + h100["context_memory"])]


#: TensorFlow creates its GPU devices and logs "Created device ... with N MB memory".
TF_DEVICE = 'import tensorflow as tf; tf.config.list_logical_devices("GPU")'



@pytest.mark.parametrize("held_gib", [0, 70])
def test_tensorflow_sizes_its_gpu_device_by_what_others_left(
    fake_machine: Callable[[dict[str, Any]], Path], hold: Callable[..., subprocess.Popen[str]], held_gib: int
) -> None:
    """The real TensorFlow 2.21 on the fake H100: alone, it creates GPU:0 with 78752 MB, as on the real
    machine (tf-healthy/C1.json); beside a process holding 70 GiB, with what that process left."""
    scenario = fakelibs.load_scenario(SCENARIO)
    fake_machine(scenario)
    gpu = scenario["gpus"][0]
    if held_gib:
        hold(0, held_gib * GiB)
    proc = subprocess.run([sys.executable, "-c", TF_DEVICE], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    free = 85017493504 - gpu["memory_used"] - gpu["context_memory"] * (2 if held_gib else 1) - held_gib * GiB
    expected_mb = (free - 1800 * MiB) >> 20  # TensorFlow 2.21 keeps 1800 MiB back on compute capability 9.x
    assert f"device:GPU:0 with {expected_mb} MB memory" in proc.stderr, proc.stderr[-3000:]
    if not held_gib:
        assert expected_mb == 78752
