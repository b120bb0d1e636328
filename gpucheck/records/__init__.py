"""The records unit: what the machine itself recorded. This boot's kernel log (NVRM Xid, NVSwitch SXid records,
each code read through NVIDIA's Xid catalog) answers the health layer; the driver's own words about the GPUs it could
not take (a probe that failed: ``driverrules``) answer the kernel layer, and explain NVML's lost GPU; Fabric
Manager's state on an NVSwitch machine answers the driver layer (``cuInit`` 802 there is
``fabric-manager-not-running``). ``UNIT`` is what the registry lists.

The reading runs in a child process (``probe.probe_records``): its time limit is the child's, so neither a read
stuck in the kernel nor a ``journalctl``/``systemctl`` that does not answer can hold the run, and the commands it
starts die with the child's process group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucheck.facts import Facts
from gpucheck.model import Finding
from gpucheck.records import driverrules, nvlinkrules, report, rules
from gpucheck.records.facts import FIELD, RecordsFacts
from gpucheck.unit import CheckFile, ChildProbe, LayerRule, PreStart, Unit


def _no_gpu(pre: PreStart) -> str | None:
    return None if pre.nvidia_gpus_on_bus else "no NVIDIA GPU on the PCI bus"


def _summary(facts: Facts) -> list[str]:
    """The kernel log's lines in the terminal summary: its Xid records, then the driver's records of taking GPUs."""
    return report.records_summary(facts) + driverrules.summary_lines(facts)


def _explain(facts: Facts, f: Finding) -> Mapping[str, Any]:
    """The kernel log's words for another rule's finding: the driver's about a lost GPU, the NVLink records and the Xid
    45 follow-ups of the fault a finding names."""
    return {**nvlinkrules.explain(facts, f), **driverrules.explain(facts, f)}


#: The kernel log and Fabric Manager's state: a child of its own (no driver call, no TensorFlow: it is quick).
RECORDS_PROBE = ChildProbe(
    "records", "health", "gpucheck.records.probe:probe_records", RecordsFacts, FIELD, skip_reason=_no_gpu
)

UNIT = Unit(
    "records",
    probes=(RECORDS_PROBE,),
    rules=(LayerRule("driver", rules.fabric_rules), LayerRule("kernel", driverrules.unheld_rules),
           LayerRule("health", rules.records_rules), LayerRule("health", nvlinkrules.nvlink5_rules)),
    explains=_explain,
    not_checked=rules.not_checked,
    checks=(CheckFile("health", "records/checks_records.py"),),
    summary=_summary,
)
