"""PCI bus ids, as NVML (``00000000:3B:00.0``), the CUDA driver (``0000:3B:00.0``), TensorFlow's "Created
device" lines and sysfs (``0000:3b:00.0``) write them: one grammar, one key. Pure: no environment."""

from __future__ import annotations

import re
from typing import NamedTuple

#: [extra fields:][domain:]bus:device.function, each field hexadecimal (any number of digits: NVML pads the
#: domain to 8, sysfs to 4; a reading with more leading fields keeps the last three before the function).
_PCI = re.compile(
    r"^(?:(?:[0-9a-f]+:)*(?P<domain>[0-9a-f]+):)?(?P<bus>[0-9a-f]+):(?P<device>[0-9a-f]+)\.(?P<function>[0-9a-f]+)$",
    re.IGNORECASE,
)


class BusId(NamedTuple):
    domain: int
    bus: int
    device: int
    function: int

    @property
    def text(self) -> str:
        """The canonical spelling: ``0000:3b:00.0``."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function}"


def pci_key(bus_id: str | None) -> BusId | None:
    """``00000000:3B:00.0`` (NVML, CUDA) and ``0000:3b:00.0`` (sysfs, TensorFlow) -> ``(0, 0x3b, 0, 0)``,
    whose ``text`` is ``0000:3b:00.0``; None for what is not a PCI bus id."""
    if not bus_id:
        return None
    m = _PCI.match(bus_id.strip())
    if not m:
        return None
    return BusId(int(m["domain"] or "0", 16), int(m["bus"], 16), int(m["device"], 16), int(m["function"], 16))
