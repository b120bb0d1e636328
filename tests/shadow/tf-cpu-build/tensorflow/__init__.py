"""Stand-in for the tensorflow-cpu wheel (see tests/shadow/README.md)."""

from types import SimpleNamespace

__version__ = "2.21.0"


def _build_info() -> dict[str, object]:
    return {"cpu_compiler": "/usr/lib/llvm-18/bin/clang", "is_cuda_build": False, "is_rocm_build": False,
            "is_tensorrt_build": False}


class _PhysicalDevice(SimpleNamespace):
    pass


sysconfig = SimpleNamespace(get_build_info=_build_info)
config = SimpleNamespace(
    list_physical_devices=lambda device_type=None: [
        _PhysicalDevice(name="/physical_device:CPU:0", device_type="CPU")
    ],
    experimental=SimpleNamespace(get_device_details=lambda device: {}),
)
