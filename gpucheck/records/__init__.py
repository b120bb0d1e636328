"""The records unit: what the machine itself recorded. This boot's kernel log (NVRM Xid, NVSwitch SXid records,
each code read through NVIDIA's Xid catalog) answers the health layer; Fabric Manager's state on an NVSwitch machine
answers the driver layer (``cuInit`` 802 there is ``fabric-manager-not-running``). ``UNIT`` is what the registry
lists.

The reading runs in a child process (``probe.probe_records``): its time limit is the child's, so neither a read
stuck in the kernel nor a ``journalctl``/``systemctl`` that does not answer can hold the run, and the commands it
starts die with the child's process group.
"""

from __future__ import annotations

from gpucheck.records import report, rules
from gpucheck.records.facts import FIELD, RecordsFacts
from gpucheck.unit import CheckFile, ChildProbe, LayerRule, PreStart, Unit


def _no_gpu(pre: PreStart) -> str | None:
    return None if pre.nvidia_gpus_on_bus else "no NVIDIA GPU on the PCI bus"


#: The kernel log and Fabric Manager's state: a child of its own (no driver call, no TensorFlow: it is quick).
RECORDS_PROBE = ChildProbe(
    "records", "health", "gpucheck.records.probe:probe_records", RecordsFacts, FIELD, skip_reason=_no_gpu
)

UNIT = Unit(
    "records",
    probes=(RECORDS_PROBE,),
    rules=(LayerRule("driver", rules.fabric_rules), LayerRule("health", rules.records_rules)),
    not_checked=rules.not_checked,
    checks=(CheckFile("health", "records/checks_records.py"),),
    summary=report.records_summary,
)
