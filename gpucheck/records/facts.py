"""The records unit's facts: what this boot's kernel log says about the GPUs (NVRM Xid, NVSwitch SXid records) and
what can be seen of Fabric Manager on an NVSwitch machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from gpucheck.facts import Facts, ProbeOutcome

#: The facts field of the records child.
FIELD = "records"


@dataclass(frozen=True)
class XidRecord:
    """The driver's records of one code on one device by one process, gathered: an ``Xid`` (``NVRM: Xid (PCI:...)``,
    a GPU) or an ``SXid`` (``nvidia-nvswitchN: SXid (PCI:...)``, an NVSwitch)."""

    kind: str
    code: int
    #: The device as the line writes it: ``0000:07:00`` for a GPU (the kernel log leaves out the function),
    #: ``0000:04:00.0`` for an NVSwitch.
    device: str
    #: The process the driver names (``pid=48213, name=python3``), None where it names none (``'<unknown>'``).
    pid: int | None
    process: str | None
    count: int
    #: Seconds since boot of the first and the last record (None where the source does not say).
    first_s: float | None
    last_s: float | None
    #: The text after the code of the first and the last record.
    first_text: str
    last_text: str
    #: Xid 154: the driver's recovery action it changed to, as written (``0x2 (Node Reboot Required)``).
    recovery_action: str | None = None
    #: SXid: the NVSwitch's instance (``nvidia-nvswitch3``) and whether a record said Fatal.
    switch: str | None = None
    fatal: bool = False


@dataclass(frozen=True)
class KernelLogRead:
    """Where this boot's kernel log was read from, or why it could not be."""

    #: "/dev/kmsg", "journalctl -k -b", "dmesg", or None: not read.
    source: str | None
    #: Every source tried, with what it answered ("/dev/kmsg: PermissionError: [Errno 1] ...").
    tried: tuple[str, ...] = ()
    records: int = 0
    #: More records than are kept were there (the oldest are kept, then the reading stopped).
    truncated: bool = False
    seconds: float | None = None


@dataclass(frozen=True)
class FabricFacts:
    """Fabric Manager as far as it can be seen without its API: its systemd unit, its process, its version."""

    #: The NVSwitches on the PCI bus (class 0x0680 NVIDIA functions) and their device nodes.
    nvswitches: tuple[str, ...]
    nvswitch_nodes: tuple[str, ...]
    #: ``systemctl show nvidia-fabricmanager``: LoadState, ActiveState, SubState, Result (None: not asked, see error).
    unit_load_state: str | None = None
    unit_active_state: str | None = None
    unit_sub_state: str | None = None
    unit_result: str | None = None
    unit_error: str | None = None
    #: Running ``nv-fabricmanager`` processes ("pid 1234: /usr/bin/nv-fabricmanager -c ...").
    processes: tuple[str, ...] = ()
    #: ``nv-fabricmanager --version``'s version, and the binary asked.
    version: str | None = None
    binary: str | None = None
    version_error: str | None = None


@dataclass(frozen=True)
class RecordsFacts:
    log: KernelLogRead
    xids: tuple[XidRecord, ...] = ()
    #: None where no NVSwitch is on the PCI bus.
    fabric: FabricFacts | None = None


def outcome(facts: Facts) -> ProbeOutcome[RecordsFacts] | None:
    """The records child's outcome: None when it did not run (``facts.not_run`` says why)."""
    return cast("ProbeOutcome[RecordsFacts] | None", facts.unit(FIELD))
