"""The two machines of ``gpucheck compare``: everything pytest-benchmark, py-cpuinfo and gpucheck recorded of
each (``machine_info``), item by item, whatever their versions; what only one run recorded reads "not recorded"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucheck.jsonfile import dig

#: The GPU stack gpucheck records (``machine_info["gpucheck"]``): label, key.
GPU_STACK: tuple[tuple[str, str], ...] = (
    ("driver", "driver"),
    ("CUDA driver API", "cuda_driver"),
    ("CUDA (TensorFlow's build)", "cuda_build"),
    ("CUDA runtime (loaded)", "cuda_loaded"),
    ("cuDNN (TensorFlow's build)", "cudnn_build"),
    ("cuDNN (loaded)", "cudnn_loaded"),
    ("TensorFlow", "tensorflow"),
)
#: What pytest-benchmark (2.5 to 5.x: ``platform`` module) and py-cpuinfo (``cpu``: ``brand`` before 6.0,
#: ``brand_raw`` since; ``vendor_id`` / ``vendor_id_raw`` likewise) have recorded: label, then the places
#: it may be, the first one recorded wins.
HOST_KEYS: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("Python", (("python_version",),)),
    ("Python implementation", (("python_implementation",),)),
    ("Python build", (("python_build",),)),
    ("compiler", (("python_compiler",),)),
    ("CPU", (("cpu", "brand_raw"), ("cpu", "brand"))),
    ("CPU vendor", (("cpu", "vendor_id_raw"), ("cpu", "vendor_id"))),
    ("CPU count", (("cpu", "count"),)),
    ("CPU clock (advertised)", (("cpu", "hz_advertised_friendly"), ("cpu", "hz_advertised"))),
    ("architecture", (("machine",), ("cpu", "arch_string_raw"), ("cpu", "arch"))),
    ("processor", (("processor",),)),
    ("OS", (("system",),)),
    ("OS release (kernel)", (("release",),)),
    ("host", (("node",),)),
)
#: machine_info's keys read above; any other key a conftest added (``runner``, ``ci``) is compared as it is.
_KNOWN_TOP = frozenset(
    {"gpucheck", "cpu", "node", "processor", "machine", "python_compiler", "python_implementation",
     "python_implementation_version", "python_version", "python_build", "release", "system"}
)



@dataclass(frozen=True)
class MachineItem:
    """One thing about the machines (CPU, OS release, driver ...) as each run recorded it (None: not)."""

    what: str
    base: str | None
    new: str | None

    @property
    def state(self) -> str:
        """``same``, ``differs``, ``base only``, ``new only`` or ``neither`` (recorded by neither run)."""
        if self.base is None and self.new is None:
            return "neither"
        if self.base is None:
            return "new only"
        if self.new is None:
            return "base only"
        return "same" if self.base == self.new else "differs"



def _text(value: Any) -> str | None:
    """A recorded value as text; None where nothing was recorded (missing, null, an empty string)."""
    if value is None or isinstance(value, (dict,)):
        return None
    if isinstance(value, (list, tuple)):
        parts = [p for v in value if (p := _text(v)) is not None]
        return ", ".join(parts) if parts else None
    text = str(value).strip()
    return text or None


def _gpus(mi: dict[str, Any]) -> str | None:
    gpus = dig(mi, "gpucheck", "gpus")
    if not isinstance(gpus, list):
        return None
    names = [
        f"{g.get('name')} ({g.get('pci_bus_id') or g.get('uuid') or '?'})" if isinstance(g, dict) else "?" for g in gpus
    ]
    return f"{len(names)}: " + ", ".join(names) if names else "none"


def _implementation(mi: dict[str, Any]) -> str | None:
    name = _text(mi.get("python_implementation"))
    version = _text(mi.get("python_implementation_version"))
    if name is None:
        return None
    # PyPy's own version (7.3.17) beside the Python it implements; CPython's is the Python version.
    return f"{name} {version}" if version and version != _text(mi.get("python_version")) else name


def _host_value(mi: dict[str, Any], what: str, places: tuple[tuple[str, ...], ...]) -> str | None:
    if what == "Python implementation":
        return _implementation(mi)
    for place in places:
        value = _text(dig(mi, *place))
        if value is not None:
            return value
    return None


def machine_items(base: dict[str, Any], new: dict[str, Any]) -> list[MachineItem]:
    """Everything either run recorded of its machine, in the order a person reads it: gpucheck's GPU stack,
    then what pytest-benchmark and py-cpuinfo recorded (whichever of their keys a version wrote), then any
    other key a conftest added."""
    out = [MachineItem(label, _text(dig(base, "gpucheck", key)), _text(dig(new, "gpucheck", key)))
           for label, key in GPU_STACK]
    out.append(MachineItem("GPUs", _gpus(base), _gpus(new)))
    out += [MachineItem(label, _host_value(base, label, places), _host_value(new, label, places))
            for label, places in HOST_KEYS]
    for key in sorted((set(base) | set(new)) - _KNOWN_TOP):
        if isinstance(key, str):
            out.append(MachineItem(key, _text(base.get(key)), _text(new.get(key))))
    return out
