"""NVLink per GPU (health): the links NVML reports active against what the GPU's model has when healthy, and the
GPU's registration with the NVLink fabric of an NVSwitch system. One id, ``nvlink-degraded`` (degraded), per GPU.

What one reading can honestly conclude (``data/nvlink_skus.json`` says per model, with sources):

- A part whose links are wired on the board (SXM, HGX/DGX, GB200: ``fixed``) has every link active when healthy:
  some but fewer is a fault, and the finding names the links that are down. None at all is a fault where a GPU of
  the same model in the machine has links up (leptonai/gpud#1085: one B200 with every link inactive among healthy
  peers); a GPU alone, or every GPU at none, is what a cloud VM given one GPU of an NVLink board shows (a real
  single-H100 VM runs the driver with ``NvLinkDisable: 1``, ../shared/machines/h100-80gb-driver-580), so it is left
  alone there unless ``--gpucheck-expect-nvlink``.
- A PCIe card whose links run through optional bridges (H100 NVL, H100 PCIe, A100 PCIe, GA102: ``bridge``) has 0
  active without a bridge and the bridged count with one (12 of the 18 slots an H100 NVL lists). Some but fewer
  than the bridged count is a fault (a bridge is fitted, some links did not come up). None at all is what an
  unbridged card shows, and also what a bridged card shows when its links did not train at boot (Azure's
  NC80adis_H100_v5 in 29 of 50 boots, azhpc-images#443): NVML lists the same slots, all inactive, for both
  (NVSentinel#1481, DCGM#198). One reading cannot tell them apart, so it is a fault only with
  ``--gpucheck-expect-nvlink``, which says the bridges are there.
- A model the file does not know is compared with the GPUs of the same name in this machine: some links active but
  fewer than a peer has is a fault; none at all is left alone (it may be an unbridged card), unless
  ``--gpucheck-expect-nvlink``.
- Fabric (``nvmlDeviceGetGpuFabricInfoV``): a registration not completed, completed with a status other than
  success (Azure/azhpc-images#506: "Insufficient Resources"), or a health mask saying the bandwidth is degraded.

The error counters (replay, recovery, CRC) are counts since the driver loaded or the counters were reset: one
reading gives no rate, and DCGM judges them only as a change over its watch window (replay or recovery: any;
CRC: 100 per second, ``DcgmGpuHardwareLimits.h``). They are reported with a finding, never one on their own.

The kernel log's Xid 74 (the records unit) is ``nvlink-degraded`` only for a GPU this rule finds nothing wrong
with now (the links logged errors this boot and came back up); where this rule names the GPU, the log's record
is a note of when (``xid-recorded``), not a second finding of one fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpucheck.facts import NvmlFabric, NvmlFacts, NvmlGpu, NvmlNvLink
from gpucheck.knowledge import NvlinkSku, nvlink_sku
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import label
from gpucheck.settings import Settings

ID = "nvlink-degraded"
#: nvmlGpuFabricState_t.
FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}
FABRIC_COMPLETED = 3
#: NVML_GPU_FABRIC_HEALTH_MASK_*_DEGRADED_BW: bits 0-1, 1 = TRUE (the fabric runs this GPU at degraded bandwidth).
HEALTH_MASK_DEGRADED_BW_TRUE = 1
_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")


@dataclass(frozen=True)
class LinkJudgement:
    """A GPU with fewer active links than it should have, and what it was compared with."""

    active: int
    listed: int
    expected: int
    #: What was compared, in words (the model's healthy count and its source, a peer, the setting).
    basis: str
    sku: NvlinkSku | None
    #: Links of the listed slots that are inactive by design (a bridged H100 NVL: 6 of 18).
    by_design: int | None


def nvlink_rules(nf: NvmlFacts, settings: Settings, nvlink_disabled: bool | None = None) -> list[Finding]:
    """``nvlink-degraded``, one per GPU whose links or fabric registration fall short. ``nvlink_disabled``: the
    kernel module's ``NvLinkDisable`` parameter (``KernelFacts.nvlink_disabled``), named in the evidence."""
    out = []
    for gpu in nf.gpus:
        if gpu.handle_error is not None:
            continue
        links = judge_links(gpu, nf.gpus, settings)
        fabric = fabric_problems(gpu.fabric)
        if links is not None or fabric:
            out.append(_finding(gpu, links, fabric, nvlink_disabled))
    return out


def bridge_notes(nf: NvmlFacts, settings: Settings) -> list[Finding]:
    """``nvlink-bridge-unconfirmed`` (info), per bridge-capable card (``kind: bridge``) that lists its link slots with
    none active, where ``--gpucheck-expect-nvlink`` is not given: what one reading cannot tell, and the setting that
    says the bridges are fitted. It never changes the verdict by itself."""
    if settings.expect_nvlink:
        return []
    out = []
    for gpu in nf.gpus:
        nl, sku = gpu.nvlink, nvlink_sku(gpu.name)
        if gpu.handle_error is not None or nl is None or not nl.links or nl.active or sku is None or sku.kind != "bridge":
            continue
        if gpu.mig is not None and gpu.mig.current == 1:
            continue
        out.append(finding(
            "nvlink-bridge-unconfirmed",
            Severity.INFO,
            summary=f"{label(gpu)} lists {len(nl.links)} NVLink slots and none is active: without an NVLink bridge that "
            "is how it should be; with one, its links did not come up.",
            cause=f"A {sku.model} has {sku.designed} NVLinks active with its bridge and none without one, and NVML lists "
            "the same slots, all inactive, for a card without a bridge and for a bridged card whose links did not train "
            "at boot (Azure/azhpc-images#443: 29 of 50 boots; NVIDIA/DCGM#198, NVSentinel#1481): one reading cannot "
            "tell them apart, so gpucheck does not call it a fault on its own.",
            remedy="If the cards are bridged, say so: --gpucheck-expect-nvlink (GPUCHECK_EXPECT_NVLINK=1, or "
            "gpucheck_expect_nvlink = true in the ini file) makes a card with no link up nvlink-degraded. "
            f"`nvidia-smi nvlink -s -i {gpu.index}` and `nvidia-smi topo -m` show the links.",
            evidence={"gpu": gpu.index, "name": gpu.name, "pci_bus_id": gpu.pci_bus_id, "source": "NVML",
                      "links_listed": len(nl.links), "active": 0, "model": sku.model,
                      "active_when_bridged": sku.designed, "setting": "--gpucheck-expect-nvlink",
                      "sources": list(sku.sources)},
            subject=gpu.id,
        ))
    return out


def judge_links(gpu: NvmlGpu, gpus: Sequence[NvmlGpu], settings: Settings) -> LinkJudgement | None:
    """Whether ``gpu`` has fewer active NVLinks than it should (see the module's docstring); None when not, or when
    NVML lists no link for it (no NVLink, or not read)."""
    nl = gpu.nvlink
    if nl is None or not nl.links or (gpu.mig is not None and gpu.mig.current == 1):
        # With MIG on, GPU-to-GPU traffic over NVLink is not available at all (NVIDIA's MIG user guide, deployment
        # considerations; RAPIDS' MIG guide: "When using MIG, NVLink and NVSwitch are thus completely unavailable").
        return None
    active, listed = nl.active, len(nl.links)
    sku = nvlink_sku(gpu.name)
    expect = " (--gpucheck-expect-nvlink: the GPUs are meant to be linked)"
    if sku is not None and sku.kind != "none":
        designed = sku.designed
        by_design = listed - designed if listed >= designed else None
        if active >= designed:
            return None
        peers_up = [p for p in gpus if p is not gpu and p.name == gpu.name and p.nvlink is not None and p.nvlink.active]
        if sku.kind == "fixed" and (active > 0 or peers_up):
            basis = f"a healthy {sku.model} has all {designed} of its NVLinks active" + (
                f", as {label(peers_up[0])} has {peers_up[0].nvlink.active}" if not active and peers_up[0].nvlink else ""
            )
        elif sku.kind == "fixed" and settings.expect_nvlink:
            basis = f"a healthy {sku.model} has all {designed} of its NVLinks active{expect}"
        elif sku.kind == "fixed":
            return None
        elif active > 0:
            basis = (f"a {sku.model} has {designed} active with its NVLink bridge and none without one: {active} came "
                     "up, so a bridge is fitted and the others did not")
        elif settings.expect_nvlink:
            basis = f"a bridged {sku.model} has {designed} active{expect}"
        else:
            return None
        return LinkJudgement(active, listed, designed, basis, sku, by_design)
    peers = [(p, p.nvlink.active) for p in gpus if p is not gpu and p.name == gpu.name and p.nvlink is not None]
    best = max(peers, key=lambda pair: pair[1], default=None)
    if best is not None and 0 < active < best[1]:
        basis = (f"{label(best[0])}, the same model, has {best[1]} active (the model is not in data/nvlink_skus.json: "
                 "compared with its peers in this machine)")
        return LinkJudgement(active, listed, best[1], basis, sku, None)
    if active == 0 and settings.expect_nvlink:
        want = best[1] if best is not None and best[1] > 0 else listed
        return LinkJudgement(0, listed, want, f"NVML lists {listed} link(s), none active{expect}", sku, None)
    return None


def fabric_problems(fabric: NvmlFabric | None) -> list[str]:
    """What is wrong with a GPU's NVLink fabric registration (empty where it is fine or not supported)."""
    if fabric is None or fabric.state == 0:
        return []
    out = []
    if fabric.state != FABRIC_COMPLETED:
        out.append(f"its NVLink fabric registration is {FABRIC_STATES.get(fabric.state, str(fabric.state))}, not completed")
    elif fabric.status not in (0, None):
        out.append(f"its NVLink fabric registration completed with status {fabric.status_name or fabric.status}")
    if fabric.health_mask is not None and fabric.health_mask & 0x3 == HEALTH_MASK_DEGRADED_BW_TRUE:
        out.append("the fabric reports its NVLink bandwidth degraded")
    return out


def counters(nl: NvmlNvLink | None) -> dict[str, dict[str, int]]:
    """The links with a non-zero error counter: ``{"3": {"replay": 12}}``."""
    out: dict[str, dict[str, int]] = {}
    for link in nl.links if nl is not None else ():
        nonzero = {name: value for name in _COUNTERS if (value := getattr(link, name))}
        if nonzero:
            out[str(link.link)] = nonzero
    return out


def _finding(gpu: NvmlGpu, links: LinkJudgement | None, fabric: list[str], nvlink_disabled: bool | None) -> Finding:
    nl = gpu.nvlink
    inactive = list(nl.inactive) if nl is not None else []
    errors = counters(nl)
    parts = []
    if links is not None:
        down = ", ".join(map(str, inactive))
        design = f"; {links.by_design} of them by design" if links.by_design else ""
        which = f"link{'s' if len(inactive) > 1 else ''} {down}{design}"
        parts.append(f"{links.active} of its {links.expected} NVLinks are active (inactive: {which})")
    parts += fabric
    causes = []
    if links is not None:
        causes.append(
            f"nvmlDeviceGetNvLinkState lists {links.listed} link(s) for this GPU, {links.active} active; "
            f"{links.basis}"
            + (f"; {links.by_design} of the inactive ones are so by design" if links.by_design else "")
            + ". Traffic to its peers runs over the links left, or over PCIe when none is left: all-reduce (NCCL, "
            "MirroredStrategy) and multi-GPU training run at a fraction of the speed with no error anywhere."
        )
    if nvlink_disabled:
        causes.append(
            "The kernel module runs with NvLinkDisable: 1 (/proc/driver/nvidia/params, the NVreg_NvLinkDisable module "
            "option): the driver does not train the links at all. Remove the option if the GPUs are meant to use NVLink."
        )
    if fabric:
        causes.append(
            "nvmlDeviceGetGpuFabricInfoV: " + "; ".join(fabric) + ". Until the GPU is registered with the NVLink "
            "fabric, its NVLink traffic to the other GPUs of the domain does not flow (Azure/azhpc-images#506)."
        )
    if errors:
        causes.append(
            "Error counters since the driver loaded or were reset (nvmlDeviceGetNvLinkErrorCounter): "
            + "; ".join(f"link {k}: " + ", ".join(f"{n} {v}" for n, v in c.items()) for k, c in errors.items())
            + ". One reading gives no rate: they are shown, not judged."
        )
    bridge = links is not None and links.sku is not None and links.sku.kind == "bridge"
    if fabric and links is None:
        remedy = (
            f"Read `nvidia-smi -q -i {gpu.index} | grep -A 6 Fabric` and the fabric services (`systemctl status "
            "nvidia-fabricmanager`, and on GB200 NVL the IMEX service and the NVLink switch trays); drain the node "
            "and reboot it to register the GPU again."
        )
    elif bridge:
        remedy = (
            f"Reboot: bridged links that did not train at one boot usually do at the next (azhpc-images#443). If they "
            f"stay down, power off and reseat the NVLink bridges. `nvidia-smi nvlink -s -i {gpu.index}` shows each link."
        )
    else:
        remedy = (
            f"Read `nvidia-smi nvlink -s -i {gpu.index}` and `nvidia-smi nvlink -e -i {gpu.index}`; drain the GPU and "
            f"reset it (`sudo nvidia-smi -r -i {gpu.index}`, on an NVSwitch system with Fabric Manager reboot the node); "
            "if links stay down, have the GPU board or baseboard serviced (`dcgmi diag -r 3` for the ticket)."
        )
    evidence: dict[str, Any] = {
        "gpu": gpu.index,
        "name": gpu.name,
        "pci_bus_id": gpu.pci_bus_id,
        "source": "NVML",
        "links_listed": len(nl.links) if nl is not None else 0,
        "active": nl.active if nl is not None else 0,
        "inactive": inactive,
        "error_counters": errors,
        "nvlink_disable_param": nvlink_disabled,
    }
    if links is not None:
        evidence.update(
            expected_active=links.expected,
            compared_with=links.basis,
            model=links.sku.model if links.sku is not None else None,
            sources=list(links.sku.sources) if links.sku is not None else [],
            inactive_by_design=links.by_design,
        )
    if gpu.fabric is not None:
        f = gpu.fabric
        evidence["fabric"] = {
            "state": FABRIC_STATES.get(f.state, f.state), "status": f.status_name, "clique_id": f.clique_id,
            "cluster_uuid": f.cluster_uuid, "health_mask": f.health_mask, "api": f.api,
        }
    return finding(
        ID,
        Severity.DEGRADED,
        summary=f"{label(gpu)}: " + "; ".join(parts) + ".",
        cause=" ".join(causes),
        remedy=remedy,
        evidence=evidence,
        subject=gpu.id,
    )
