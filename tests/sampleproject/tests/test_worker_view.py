"""What each process sees of the GPUs: the driver's own list, through ctypes (no framework)."""

import ctypes

import pytest
from record import record


def driver_bus_ids() -> list[str]:
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuInit(0) == 0
    count = ctypes.c_int()
    assert cuda.cuDeviceGetCount(ctypes.byref(count)) == 0
    ids = []
    for ordinal in range(count.value):
        dev = ctypes.c_int()
        assert cuda.cuDeviceGet(ctypes.byref(dev), ordinal) == 0
        buf = ctypes.create_string_buffer(64)
        assert cuda.cuDeviceGetPCIBusId(buf, 64, dev) == 0
        ids.append(buf.value.decode())
    return ids


@pytest.mark.gpu(framework=None)
@pytest.mark.parametrize("part", range(4))
def test_this_worker_has_a_gpu(part, gpus):
    record(f"worker_view-{part}", driver=driver_bus_ids(), gpus=[g.to_json() for g in gpus])
