"""The fakes refuse what the real libraries refuse, where a probe could ask the wrong thing and not notice.

Tests of the fakes themselves (tests/fakes/), and of the probe that could slip:

- NVML answers ``nvmlDeviceGetP2PStatus`` per capability index (nvml.h, ``nvmlGpuP2PCapsIndex_t``: READ 0,
  WRITE 1, NVLINK 2, ATOMICS 3, PROP 4, UNKNOWN 5), and refuses another index with
  NVML_ERROR_INVALID_ARGUMENT ("device1 or device2 or p2pIndex is invalid", nvml.h), as it refuses a
  handle index past the GPU count. So the NVML probe's read index (``P2P_CAPS_INDEX_READ``, a constant its
  comment calls easy to get wrong) is checked against a link whose read and write statuses differ.
- The CUDA driver refuses an attribute outside ``CUdevice_attribute`` with CUDA_ERROR_INVALID_VALUE and an
  ordinal that is no device with CUDA_ERROR_INVALID_DEVICE (cuda.h, cuDeviceGetAttribute, cuDeviceGet;
  https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html); the runtime's cudaSetDevice
  refuses an ordinal that is no device with cudaErrorInvalidDevice (cuda_runtime_api.h).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucheck.probes.nvml import P2P_CAPS_INDEX_NVLINK, P2P_CAPS_INDEX_READ

#: Two A100 PCIe cards on an AMD EPYC host: `nvidia-smi topo -p2p r` and `-p2p w` are separate matrices
#: because the driver answers each capability on its own; here reads are refused by the chipset (CNS, 1)
#: while writes pass (OK, 0), the two answers a probe can confuse. nvlink: NOT_SUPPORTED (5); atomics:
#: NOT_SUPPORTED; prop: OK.
MACHINE: dict[str, Any] = {
    "_source": "nvml.h nvmlGpuP2PCapsIndex_t / nvmlGpuP2PStatus_t; `nvidia-smi topo -p2p r|w|n|a|p` each print one index",
    "driver_version": "550.54.15",
    "host": {
        "pci": [
            {"bus_id": "0000:41:00.0", "vendor": "0x10de", "device": "0x20f1", "class": "0x030200", "driver": "nvidia"},
            {"bus_id": "0000:c1:00.0", "vendor": "0x10de", "device": "0x20f1", "class": "0x030200", "driver": "nvidia"},
        ],
        "module_version": "550.54.15",
        "dev": ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"],
    },
    "libraries": ["libcuda", "libcudart@12.5.82", "libnvml"],
    "cuda": {"driver_version": 12040},
    "gpus": [
        {"name": "NVIDIA A100 80GB PCIe", "cc_major": 8, "cc_minor": 0},
        {"name": "NVIDIA A100 80GB PCIe", "cc_major": 8, "cc_minor": 0},
    ],
    "links": {"0-1": {"p2p_read": 1, "p2p_write": 0, "p2p_nvlink": 5, "p2p_atomics": 5, "p2p_prop": 0, "topology": 50}},
}

NVML_CALLS = r"""
import ctypes, json
nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0
a, b, c = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
out = {"handle0": nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(a)),
       "handle1": nvml.nvmlDeviceGetHandleByIndex_v2(1, ctypes.byref(b)),
       "handle2": nvml.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(c))}
status = ctypes.c_int(-1)
out["p2p"] = {}
for index in range(-1, 8):
    status.value = -1
    code = nvml.nvmlDeviceGetP2PStatus(a, b, index, ctypes.byref(status))
    out["p2p"][str(index)] = [code, status.value]
print(json.dumps(out))
"""

CUDA_CALLS = r"""
import ctypes, json
cuda = ctypes.CDLL("libcuda.so.1")
rt = ctypes.CDLL("libcudart.so.12")
out = {"init": cuda.cuInit(0)}
v, dev = ctypes.c_int(-7), ctypes.c_int()
out["get1"] = cuda.cuDeviceGet(ctypes.byref(dev), 1)
out["get2"] = cuda.cuDeviceGet(ctypes.byref(dev), 2)
out["attr"] = {}
for attrib in (0, 75, 76, 147, 148, 9999, -3):
    v.value = -7
    out["attr"][str(attrib)] = [cuda.cuDeviceGetAttribute(ctypes.byref(v), attrib, 0), v.value]
out["attr_dev5"] = cuda.cuDeviceGetAttribute(ctypes.byref(v), 75, 5)
out["rt_attr_9999"] = rt.cudaDeviceGetAttribute(ctypes.byref(v), 9999, 0)
out["rt_attr_dev5"] = rt.cudaDeviceGetAttribute(ctypes.byref(v), 75, 5)
out["set"] = {str(d): rt.cudaSetDevice(d) for d in (1, 2, -1, 0)}
cur = ctypes.c_int(-1)
rt.cudaGetDevice(ctypes.byref(cur))
out["current"] = cur.value
print(json.dumps(out))
"""


def _run(code: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_nvml_answers_p2p_per_capability_index(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    fake_machine(MACHINE)
    out = _run(NVML_CALLS)
    assert (out["handle0"], out["handle1"]) == (0, 0)
    assert out["handle2"] == 2  # NVML_ERROR_INVALID_ARGUMENT: no third GPU
    p2p = {int(k): tuple(v) for k, v in out["p2p"].items()}
    assert p2p[0] == (0, 1)  # READ: chipset not supported
    assert p2p[1] == (0, 0)  # WRITE: OK
    assert p2p[2] == (0, 5)  # NVLINK: not supported
    assert p2p[3] == (0, 5)  # ATOMICS
    assert p2p[4] == (0, 0)  # PROP
    assert p2p[5] == (0, 6)  # NVML_P2P_CAPS_INDEX_UNKNOWN: NVML_P2P_STATUS_UNKNOWN
    for index in (-1, 6, 7):
        assert p2p[index] == (2, -1), index  # invalid index: refused, status untouched


def test_nvml_probe_reads_the_read_index(fake_machine: Callable[[dict[str, Any]], Path], tmp_path: Path) -> None:
    """The probe's P2P reading is the READ capability's (CNS here), not the WRITE one's (OK)."""
    assert (P2P_CAPS_INDEX_READ, P2P_CAPS_INDEX_NVLINK) == (0, 2)  # nvml.h
    fake_machine(MACHINE)
    out = tmp_path / "facts.json"
    subprocess.run(
        [sys.executable, "-m", "gpucheck.probes.child", "gpucheck.probes.nvml:probe_nvml", str(out)], check=True, timeout=120
    )
    links = json.loads(out.read_text())["links"]
    assert [(link["a"], link["b"], link["p2p_read"], link["p2p_nvlink"]) for link in links] == [(0, 1, 1, 5)]


def test_cuda_driver_and_runtime_refuse_unknown_attributes_and_ordinals(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    fake_machine(MACHINE)
    out = _run(CUDA_CALLS)
    assert out["init"] == 0
    assert out["get1"] == 0 and out["get2"] == 101  # CUDA_ERROR_INVALID_DEVICE
    attr = {int(k): tuple(v) for k, v in out["attr"].items()}
    assert attr[75] == (0, 8) and attr[76] == (0, 0)
    assert attr[147][0] == 0  # the last CUdevice_attribute of CUDA 13.0's cuda.h is answered
    for attrib in (0, 148, 9999, -3):
        assert attr[attrib] == (1, -7), attrib  # CUDA_ERROR_INVALID_VALUE, value untouched
    assert out["attr_dev5"] == 101
    assert out["rt_attr_9999"] == 1  # cudaErrorInvalidValue
    assert out["rt_attr_dev5"] == 101  # cudaErrorInvalidDevice
    assert out["set"] == {"1": 0, "2": 101, "-1": 101, "0": 0}  # cudaErrorInvalidDevice for no device
    assert out["current"] == 0


#: What the CUDA 12/13 runtimes ask of libcuda by name (docs/PITFALLS.md, "PyTorch's CUDA build on the fakes"): each
#: (symbol, version, flags) as libcudart.so.13 (nvidia-cuda-runtime 13.0.96) asked it of the fake, traced with
#: GPUCHECK_FAKE_CUDA_TRACE, and what cuGetProcAddress_v2 must answer (driver API reference, cuGetProcAddress:
#: CU_GET_PROC_ADDRESS_SUCCESS 0, SYMBOL_NOT_FOUND 1, VERSION_NOT_SUFFICIENT 2).
PROC_CALLS = r"""
import ctypes, json
cuda = ctypes.CDLL("libcuda.so.1")
out = {}
for name, version, flags in (("cuMemAlloc", 3020, 0), ("cuMemcpyHtoD", 7000, 2), ("cuGetProcAddress", 12000, 0),
                             ("cuCtxGetDevice", 2000, 0), ("cuCtxGetDevice", 13000, 0), ("cuMemAlloc", 2000, 0),
                             ("cuDeviceGetP2PAttribute", 8000, 0), ("", 0, 0)):
    fn, status = ctypes.c_void_p(), ctypes.c_int(-7)
    code = cuda.cuGetProcAddress_v2(name.encode(), ctypes.byref(fn), version, ctypes.c_uint64(flags), ctypes.byref(status))
    out[f"{name}@{version}"] = [code, status.value, fn.value]
for name in ("cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuGetProcAddress_v2", "cuCtxGetDevice"):
    out[name] = ctypes.cast(getattr(cuda, name), ctypes.c_void_p).value
table = ctypes.c_void_p(1)
uuid = (ctypes.c_ubyte * 16)(*bytes.fromhex("6bd5fb6c5bf4e74a8987d93912fd9df9"))
out["export"] = [cuda.cuGetExportTable(ctypes.byref(table), uuid), table.value]
print(json.dumps(out))
"""


def test_cuda_driver_hands_out_entry_points_by_name_and_abi_version(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    """The version asked picks the ABI (cuMemAlloc at 3020 is cuMemAlloc_v2; cuCtxGetDevice at 13000 is CUDA 13's
    _v2, another signature, which the fake does not have); the per-thread-stream flag gets the same function here;
    a name older than its first ABI is VERSION_NOT_SUFFICIENT; the runtime's private tables are refused."""
    fake_machine(MACHINE)
    out = _run(PROC_CALLS)
    assert out["cuMemAlloc@3020"] == [0, 0, out["cuMemAlloc_v2"]]
    assert out["cuMemcpyHtoD@7000"] == [0, 0, out["cuMemcpyHtoD_v2"]]
    assert out["cuGetProcAddress@12000"] == [0, 0, out["cuGetProcAddress_v2"]]
    assert out["cuCtxGetDevice@2000"] == [0, 0, out["cuCtxGetDevice"]]
    assert out["cuCtxGetDevice@13000"] == [500, 1, None]  # CUDA_ERROR_NOT_FOUND: an ABI the fake lacks
    assert out["cuMemAlloc@2000"] == [500, 2, None]  # VERSION_NOT_SUFFICIENT
    assert out["cuDeviceGetP2PAttribute@8000"] == [500, 1, None]
    assert out["@0"] == [500, 1, None]  # the runtime's first question, an empty name
    assert out["export"] == [500, None]
