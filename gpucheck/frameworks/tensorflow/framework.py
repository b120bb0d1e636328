"""Framework-layer probe: import TensorFlow, read its build, list the devices it registers.

Runs only in a probe child process: importing TensorFlow loads the CUDA
libraries, and a hung ``cuInit`` hangs ``list_physical_devices`` with it.
TensorFlow's own log lines go to the child's stderr, which the parent keeps.
"""

from __future__ import annotations

import traceback
from typing import Any

from gpucheck.frameworks.tensorflow.facts import FrameworkFacts, TfDevice
from gpucheck.frameworks.tensorflow.imports import import_tensorflow
from gpucheck.probes import forked
from gpucheck.protocol import stage


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _error(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def probe_framework() -> FrameworkFacts:
    stage("import tensorflow")
    try:
        tf: Any = import_tensorflow()
    except Exception as exc:  # noqa: BLE001 - any import failure is the fact we report
        forked.start_from_env()  # they say, each in its words, what they can without TensorFlow
        return FrameworkFacts(False, _error(exc), None, None, {}, None, (), (), None)
    # The processes that need TensorFlow configured otherwise (memory growth), forked now: imported, and nothing
    # has called into the driver yet (the device listing below is what calls cuInit).
    forked.start_from_env()
    location = getattr(tf, "__file__", None) or ", ".join(getattr(tf, "__path__", []))
    if not hasattr(tf, "__version__") or not hasattr(tf, "sysconfig"):
        # A file or folder named tensorflow (a script called tensorflow.py, a stray directory) found
        # before the real package: `import tensorflow` "works" but is not TensorFlow.
        return FrameworkFacts(
            False,
            f"`import tensorflow` found {location or 'a namespace package'}, which is not the TensorFlow "
            "package (a local file or folder named tensorflow shadows it)",
            None, str(location), {}, None, (), (), None,
        )
    version = str(tf.__version__)
    stage("tf.sysconfig.get_build_info")
    try:
        build_info = _plain(dict(tf.sysconfig.get_build_info()))
    except Exception as exc:  # noqa: BLE001
        build_info = {"error": _error(exc)}
    is_cuda = build_info.get("is_cuda_build")
    is_cuda_build = bool(is_cuda) if is_cuda is not None else False
    stage("tf.config.list_physical_devices")
    devices: list[TfDevice] = []
    list_error = None
    try:
        for dev in tf.config.list_physical_devices():
            details: dict[str, Any] = {}
            if dev.device_type == "GPU":
                stage("tf.config.experimental.get_device_details")
                try:
                    details = _plain(dict(tf.config.experimental.get_device_details(dev)))
                except Exception as exc:  # noqa: BLE001
                    details = {"error": _error(exc)}
            devices.append(TfDevice(dev.name, dev.device_type, details))
    except Exception as exc:  # noqa: BLE001
        list_error = _error(exc)
    gpus = tuple(d for d in devices if d.device_type == "GPU")
    return FrameworkFacts(True, None, version, location, build_info, is_cuda_build, tuple(devices), gpus, list_error)
