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


def process_label(r: XidRecord) -> str:
    """How a finding names the process of a record (``python3 (pid 48213)``): two records of one label are one
    process."""
    return f"{r.process or '?'} (pid {r.pid})" if r.pid is not None else str(r.process)


@dataclass(frozen=True)
class XidDropped:
    """The records of one code on one device that ``RecordsFacts.xids`` does not keep: where more than
    ``RecordsFacts.kept`` processes have records of it, the newest ``kept`` (by their last record) are kept and the
    others counted here, exactly. A record that names no process is always kept (one per code and device)."""

    kind: str
    code: int
    device: str
    #: The gathered records not kept (one per process), and the log's records (lines) they gathered.
    records: int
    count: int
    #: Seconds since boot of the first and the last of them.
    first_s: float | None
    last_s: float | None
    #: Xid 144-150, and Xid 45 records that name the Xid they followed (``records.catalog.owned``): judged from
    #: ``nvlink`` and ``follow_ups``, never as records of their own.
    owned: bool = False


@dataclass(frozen=True)
class XidCodes:
    """The Xid records of one device whose codes NVIDIA's catalog does not have, beyond the newest ``RecordsFacts.kept``
    such codes (a code has up to 6 digits: a log can name thousands), counted together, exactly: their codes, the
    gathered records and the log's records (lines)."""

    device: str
    codes: int
    records: int
    count: int
    first_s: float | None
    last_s: float | None


@dataclass(frozen=True)
class XidProcesses:
    """The distinct processes named by one GPU's records of the codes a user program causes (NVIDIA's catalog, class
    ``application``, not ``owned``), kept or dropped: given for each GPU some of whose such records were dropped."""

    device: str
    processes: int


@dataclass(frozen=True)
class KernelLogRead:
    """Where this boot's kernel log was read from, or why it could not be."""

    #: "/dev/kmsg", "journalctl -k -b", "dmesg", or None: not read.
    source: str | None
    #: Every source tried, with what it answered ("/dev/kmsg: PermissionError: [Errno 1] ...").
    tried: tuple[str, ...] = ()
    records: int = 0
    #: More records than are kept were there: the newest are kept, ``dropped`` of the oldest were not.
    truncated: bool = False
    seconds: float | None = None
    dropped: int = 0
    #: Lines longer than any record of the kernel's (skipped unread), and lines that name an Xid or SXid the parser
    #: could not read (a code or pid of thousands of digits, a device that is no PCI address): skipped, counted.
    overlong: int = 0
    unreadable: int = 0
    #: Why the source was not read to its end (a device that never ends), None where it was.
    unfinished: str | None = None


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
class DriverRecord:
    """The kernel log's words about the driver taking a GPU (probing it, initialising it), gathered by what they say
    and where: the nvidia driver's own (``NVRM: The NVIDIA GPU ... has fallen off the bus``, ``RmInitAdapter failed!``,
    ``The NVIDIA probe routine failed for N device(s)``, ``This PCI I/O region assigned to your NVIDIA device is
    invalid``) and the kernel's (``nvidia: probe of ... failed with error -1``, ``pci ...: BAR 1 ...: failed to
    assign``). ``records.driverlog`` reads them."""

    #: "fallen-off-the-bus", "rm-init-adapter-failed", "probe-routine-failed", "bar-invalid", "bar-unassigned",
    #: "probe-failed".
    kind: str
    #: The GPU the record names, in sysfs's spelling (``0000:b3:00.0``); None where it names none (the count of failed
    #: probes, an old driver's ``RmInitAdapter failed!``).
    device: str | None
    #: The device minor number it names (``rm_init_adapter failed, device minor number 5``: ``/dev/nvidia5``).
    minor: int | None
    #: What it says beyond its kind: RmInitAdapter's status (``0x24:0x72:1568``), the count of devices whose probe
    #: failed (``1``), the region (``BAR1 is 0M @ 0x0``, ``BAR 1: failed to assign``), the probe's error (``-1``).
    detail: str | None
    count: int
    first_s: float | None
    last_s: float | None
    #: The driver's words of its first record, the message's lines joined (at most 300 characters).
    text: str
    #: How the message was written: "multi-line" (one message over several lines, a newer driver's) or "one-line".
    form: str = "one-line"


@dataclass(frozen=True)
class NvlinkXid:
    """Blackwell's NVLink records (Xid 144-150), each as the driver wrote it: ``NVRM: Xid (PCI:0018:01:00): 149,
    NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 ...)``, gathered by everything it says
    (``records.nvlink5`` reads them)."""

    xid: int
    #: ``0018:01:00``, the kernel log's spelling (no function).
    device: str
    #: The NVLink5 unit (``NETIR_LINK_EVT``, ``RLW_RXPIPE``, ``SAW_MVB``).
    unit: str
    #: The record's own word: Fatal or Nonfatal.
    fatal: bool
    #: The link (-1: the GPU's NVLink as a whole), intrinfo, its sub-code (bits 20-25) and the error status.
    link: int
    intrinfo: int
    subcode: int
    error_status: int
    count: int
    first_s: float | None
    last_s: float | None
    text: str


@dataclass(frozen=True)
class FollowUp:
    """An Xid 45 the driver says was ``caused by previous Xid N`` (a channel torn down after another fault), gathered
    by GPU, cause and process: evidence of that cause, never a program's own fault."""

    device: str
    cause: int
    pid: int | None
    process: str | None
    count: int
    first_s: float | None
    last_s: float | None
    text: str


@dataclass(frozen=True)
class RecordsFacts:
    log: KernelLogRead
    #: The Xid and SXid records gathered by (kind, code, device, process), in the order first seen: at most ``kept``
    #: of each code on each device (``dropped``).
    xids: tuple[XidRecord, ...] = ()
    #: None where no NVSwitch is on the PCI bus.
    fabric: FabricFacts | None = None
    #: The driver's records of taking the GPUs (``DriverRecord``), in the order first seen.
    driver: tuple[DriverRecord, ...] = ()
    #: Blackwell's NVLink records (Xid 144-150) one by one, and the Xid 45 records that name the Xid they followed.
    nvlink: tuple[NvlinkXid, ...] = ()
    follow_ups: tuple[FollowUp, ...] = ()
    #: At most this many records (processes) of each code on each device are kept in ``xids``, the newest; None: every
    #: record is (facts made before the bound). What was not kept is counted in ``dropped``, per code and device.
    kept: int | None = None
    dropped: tuple[XidDropped, ...] = ()
    application_processes: tuple[XidProcesses, ...] = ()
    #: Per device, the records of the codes not in NVIDIA's catalog beyond the newest ``kept`` of them.
    uncatalogued: tuple[XidCodes, ...] = ()


def outcome(facts: Facts) -> ProbeOutcome[RecordsFacts] | None:
    """The records child's outcome: None when it did not run (``facts.not_run`` says why)."""
    return cast("ProbeOutcome[RecordsFacts] | None", facts.unit(FIELD))
