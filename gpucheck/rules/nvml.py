"""What NVML's inventory says about visibility, resources and health, one GPU at a time.

Findings about one GPU carry ``subject="GPU-<index>"`` so that its per-GPU check fails alone. The
findings NVML's *initialisation* gives (driver-library-mismatch, driver-not-loaded, gpu-lost, nvml
missing or not initialising) come from ``rules.driver``; these rules only run on an NVML that
answered, so they never repeat them.
"""

from __future__ import annotations

from typing import Any

from gpucheck.facts import Facts, NvmlFacts, NvmlGpu, NvmlLink
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules import nvlink
from gpucheck.rules.common import label
from gpucheck.rules.devicemap import device_map
from gpucheck.settings import Settings, memory_bytes

NVML_GPU_IS_LOST = 15
NVML_RESET_REQUIRED = 16
NVML_UNKNOWN = 999
#: Handle errors that mean the GPU is gone or unusable until a reset (nvidia-smi: "Unable to determine
#: the device handle for GPU ...: GPU is lost / Unknown Error" after Xid 79).
LOST_CODES = (NVML_GPU_IS_LOST, NVML_RESET_REQUIRED, NVML_UNKNOWN)

COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
COMPUTE_MODE_PROHIBITED = 2
COMPUTE_MODE_EXCLUSIVE_PROCESS = 3

#: nvml.h, nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*).
CLOCK_REASONS = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
#: Reasons that are faults. Idle, application clocks, the power cap a busy GPU runs into, sync boost
#: and display clocks are normal operation.
CLOCK_FAULTS = 0x8 | 0x20 | 0x40 | 0x80
THERMAL = 0x20 | 0x40
POWER_BRAKE = 0x80

P2P_STATUS = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}
TOPOLOGY = {
    0: "same board",
    10: "single PCIe switch",
    20: "multiple PCIe switches",
    30: "host bridge",
    40: "NUMA node",
    50: "across CPU sockets (SMP interconnect)",
}
#: A GPU this busy runs its link at full generation; below it, a lower generation is power saving.
LOAD_UTILIZATION = 50
#: Retired pages at which NVIDIA asks for the board to be replaced (the limit is 64).
RETIRED_PAGES_RMA = 60

GiB = 1024**3


def gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / GiB:.1f} GiB"


def answered(facts: Facts) -> NvmlFacts | None:
    """NVML's facts when it loaded and initialised, else None (the driver rules speak then)."""
    return _answered(facts.nvml.facts)


def _answered(nf: NvmlFacts | None) -> NvmlFacts | None:
    if nf is None or nf.init is None or nf.init.code != 0:
        return None
    return nf


#: The questions NVML's inventory answers (by the id each is named after).
INVENTORY_QUESTIONS = (
    "gpu-lost", "mig-unaddressable", "compute-mode-prohibited", "gpu-memory-exhausted", "ecc-errors",
    "clocks-throttled", "pcie-link-degraded", "p2p-unavailable", "nvlink-degraded",
)


def not_checked(facts: Facts, settings: Settings) -> dict[str, str]:
    """What NVML's inventory cannot answer here: every per-GPU question when NVML did not answer, the GPU
    count when no count is expected."""
    out = {} if answered(facts) is not None else dict.fromkeys(
        INVENTORY_QUESTIONS, "NVML did not answer, so there is no GPU inventory to judge"
    )
    if settings.expect_gpus is None:
        out["gpu-count-mismatch"] = "--gpucheck-expect-gpus not given"
    return out


def gpu_subjects(facts: Facts) -> tuple[str, ...]:
    """The GPUs NVML lists, as findings name them ("GPU-0"): the subjects of the per-GPU checks."""
    return gpu_ids(facts.nvml.facts)


def gpu_ids(nf: NvmlFacts | None) -> tuple[str, ...]:
    """:func:`gpu_subjects` from NVML's facts alone (collection asks before the rest of the diagnosis ends)."""
    found = _answered(nf)
    return tuple(g.id for g in found.gpus) if found is not None else ()


def lost(gpu: NvmlGpu) -> bool:
    if gpu.handle_error is not None:
        return gpu.handle_error.code in LOST_CODES
    return any(e.code == NVML_GPU_IS_LOST for e in gpu.errors)


def mig_without_instances(gpu: NvmlGpu) -> bool:
    return gpu.mig is not None and gpu.mig.current == 1 and not gpu.mig.instances


def compute_blocked(gpu: NvmlGpu) -> str | None:
    """Why the compute mode keeps this process off the GPU, or None."""
    if gpu.compute_mode == COMPUTE_MODE_PROHIBITED:
        return "compute mode is Prohibited: no process may create a CUDA context on it"
    if gpu.compute_mode == COMPUTE_MODE_EXCLUSIVE_PROCESS and gpu.processes:
        pids = ", ".join(str(p.pid) for p in gpu.processes)
        return f"compute mode is Exclusive_Process and process {pids} already holds it"
    return None


def usable(gpu: NvmlGpu) -> bool:
    return gpu.handle_error is None and not lost(gpu) and not mig_without_instances(gpu) and not compute_blocked(gpu)


def nvml_rules(facts: Facts, settings: Settings) -> list[Finding]:
    out = _count(facts, settings)
    nf = answered(facts)
    if nf is None:
        return out
    gpus = nf.gpus
    any_usable = any(usable(g) for g in gpus)
    for gpu in gpus:
        out += _lost(gpu)
        out += _mig(gpu, any_usable)
        out += _compute_mode(gpu, any_usable)
    out += _memory(gpus, settings)
    for gpu in gpus:
        out += ecc_findings(gpu)
        out += _clocks(gpu)
        out += _pcie(gpu)
    out += _p2p(nf, settings, framework_gpus(facts))
    out += nvlink.nvlink_rules(nf, settings, facts.kernel.nvlink_disabled)
    out += nvlink.bridge_notes(nf, settings)
    return out


# --- visibility -----------------------------------------------------------------------------


def seen_gpus(facts: Facts) -> tuple[int | None, list[dict[str, Any]], str]:
    """How many GPUs the machine shows, which, and who said so (NVML, else CUDA, else the PCI bus)."""
    nf = answered(facts)
    if nf is not None and nf.device_count is not None:
        listed = [
            {"index": g.index, "name": g.name, "pci_bus_id": g.pci_bus_id, "uuid": g.uuid}
            | ({"error": g.handle_error.name} if g.handle_error else {})
            for g in nf.gpus
        ]
        return nf.device_count, listed, "NVML"
    cf = facts.cuda.facts
    if cf is not None and cf.device_count is not None:
        return cf.device_count, [{"cuda_ordinal": i} for i in range(cf.device_count)], "CUDA (cuDeviceGetCount)"
    hw = facts.hardware
    if hw.readable:
        return len(hw.nvidia_gpus), [{"pci_bus_id": d.bus_id} for d in hw.nvidia_gpus], f"the PCI bus ({hw.source})"
    return None, [], "nothing"


def _count(facts: Facts, settings: Settings) -> list[Finding]:
    expected = settings.expect_gpus
    if expected is None:
        return []
    count, listed, source = seen_gpus(facts)
    if count == expected:
        return []
    source_of = dict(settings.sources).get("expect-gpus", "--gpucheck-expect-gpus")
    names = "; ".join(
        ", ".join(str(v) for k, v in entry.items() if v is not None and k != "uuid") for entry in listed
    )
    seen_text = "no GPU" if not count else f"{count} GPU(s): {names}"
    return [
        finding(
            "gpu-count-mismatch",
            Severity.BLOCKER if count is None or count < expected else Severity.DEGRADED,
            summary=f"{expected} GPU(s) expected, {count if count is not None else 'none that can be counted'} seen.",
            cause=f"{source} shows {seen_text}; {expected} were expected ({source_of}).",
            remedy=(
                "Find the missing GPUs: `nvidia-smi -L` and `lspci -d 10de:` list what the driver and the bus see; "
                "a GPU on the bus but not in nvidia-smi fell off the bus or failed to initialise (`sudo dmesg | grep -i xid`); "
                "one missing from the bus needs reseating or its power checked. In a container or job, request all "
                "GPUs (`--gpus all`, `nvidia.com/gpu: N`). If the machine really has another count, fix --gpucheck-expect-gpus."
                if count is None or count < expected
                else "More GPUs than expected: check --gpucheck-expect-gpus, or restrict the job's GPUs with "
                "CUDA_VISIBLE_DEVICES / the scheduler."
            ),
            evidence={"expected": expected, "seen": count, "counted_by": source, "gpus": listed, "setting": source_of},
        )
    ]


def _lost(gpu: NvmlGpu) -> list[Finding]:
    if not lost(gpu):
        return []
    err = gpu.handle_error or next(e for e in gpu.errors if e.code == NVML_GPU_IS_LOST)
    return [
        finding(
            "gpu-lost",
            Severity.BLOCKER,
            summary=f"{label(gpu)} is lost: NVML cannot reach it ({err.name}).",
            cause=(
                f"{err.function}() for GPU {gpu.index} returned {err.code} ({err.name}: {err.message}): the GPU fell "
                "off the bus or is in a state only a reset or reboot clears (Xid 79 / 'GPU has fallen off the bus')."
            ),
            remedy=(
                "Read `sudo dmesg | grep -iE 'xid|fallen off'`; stop the processes on the GPU and reset it "
                f"(`sudo nvidia-smi -r -i {gpu.index}`) or reboot. If it recurs, check the card's power cables, seating, "
                "riser and cooling, and report it to the vendor."
            ),
            evidence={"gpu": gpu.index, "call": err.function, "code": err.code, "name": err.name, "message": err.message},
            subject=gpu.id,
        )
    ]


def _mig(gpu: NvmlGpu, any_usable: bool) -> list[Finding]:
    if not mig_without_instances(gpu):
        return []
    assert gpu.mig is not None
    return [
        finding(
            "mig-unaddressable",
            Severity.DEGRADED if any_usable else Severity.BLOCKER,
            summary=f"MIG is on for {label(gpu)}, but it has no MIG instance: CUDA cannot use it.",
            cause=(
                "With MIG mode enabled, CUDA runs only on MIG devices (a GPU instance with a compute instance); "
                f"nvmlDeviceGetMigDeviceHandleByIndex finds none of the {gpu.mig.max_devices} possible, so the GPU is "
                "unaddressable."
            ),
            remedy=(
                f"Create instances (`sudo nvidia-smi mig -i {gpu.index} -cgi 9,9 -C`, profiles from "
                f"`nvidia-smi mig -lgip`) or turn MIG off (`sudo nvidia-smi -i {gpu.index} -mig 0`, then reset the GPU); "
                "then name the MIG devices in CUDA_VISIBLE_DEVICES (MIG-<uuid> from `nvidia-smi -L`)."
            ),
            evidence={"gpu": gpu.index, "mig_mode": gpu.mig.current, "pending": gpu.mig.pending,
                      "max_devices": gpu.mig.max_devices, "instances": 0},
            subject=gpu.id,
        )
    ]


def _compute_mode(gpu: NvmlGpu, any_usable: bool) -> list[Finding]:
    why = compute_blocked(gpu)
    if why is None:
        return []
    procs = [{"pid": p.pid, "name": p.name, "used_memory": p.used_memory} for p in gpu.processes or ()]
    return [
        finding(
            "compute-mode-prohibited",
            Severity.DEGRADED if any_usable else Severity.BLOCKER,
            summary=f"{label(gpu)} refuses new CUDA processes: {why}.",
            cause=(
                f"nvmlDeviceGetComputeMode reports {COMPUTE_MODES.get(gpu.compute_mode or 0, gpu.compute_mode)}; "
                "cudaSetDevice / context creation on it fails with 'all CUDA-capable devices are busy or unavailable'."
            ),
            remedy=(
                f"Set the default compute mode (`sudo nvidia-smi -i {gpu.index} -c DEFAULT`) if nothing requires the "
                "restriction; with Exclusive_Process, wait for or stop the process that holds the GPU, or use another GPU."
            ),
            evidence={"gpu": gpu.index, "compute_mode": gpu.compute_mode, "processes": procs},
            subject=gpu.id,
        )
    ]


# --- resources ------------------------------------------------------------------------------


def _memory(gpus: tuple[NvmlGpu, ...], settings: Settings) -> list[Finding]:
    spec = settings.min_free_memory
    source = dict(settings.sources).get("min-free-memory", "default")
    short: list[tuple[NvmlGpu, int]] = []
    judged = 0
    for gpu in gpus:
        # A MIG-enabled GPU's memory belongs to its instances; the lost ones have none to judge.
        if gpu.memory is None or not usable(gpu) or (gpu.mig is not None and gpu.mig.current == 1):
            continue
        judged += 1
        need = memory_bytes(spec, gpu.memory.total)
        if gpu.memory.free < need:
            short.append((gpu, need))
    out = []
    for gpu, need in short:
        assert gpu.memory is not None
        procs = sorted(gpu.processes or (), key=lambda p: -(p.used_memory or 0))
        holders = [
            f"pid {p.pid} {p.name or '(name not readable)'} ({gib(p.used_memory)})" for p in procs
        ]
        if gpu.processes is None:
            err = next((e for e in gpu.errors if e.function.startswith("nvmlDeviceGetComputeRunningProcesses")), None)
            who = "its process list could not be read" + (f" ({err.name})" if err else "")
        elif not procs:
            who = ("no compute process is visible from here: the memory is held by processes in other containers "
                   "or PID namespaces, or by graphics processes")
        else:
            who = "held by " + ", ".join(holders)
        out.append(
            finding(
                "gpu-memory-exhausted",
                Severity.BLOCKER if len(short) == judged else Severity.DEGRADED,
                summary=(
                    f"{label(gpu)} has {gib(gpu.memory.free)} free of {gib(gpu.memory.total)}, below the "
                    f"{gib(need)} asked for (--gpucheck-min-free-memory={spec}); {who}."
                ),
                cause=(
                    f"Other processes hold {gib(gpu.memory.used)} of the GPU's memory; TensorFlow would start with "
                    f"{gib(gpu.memory.free)} and fail to allocate (ResourceExhaustedError / CUDA_ERROR_OUT_OF_MEMORY)."
                ),
                remedy=(
                    "Stop or move the processes that hold the memory (`nvidia-smi --query-compute-apps="
                    "pid,process_name,used_memory --format=csv`, then end them), pick a free GPU with "
                    "CUDA_VISIBLE_DEVICES, or lower --gpucheck-min-free-memory if the work needs less."
                ),
                evidence={
                    "gpu": gpu.index,
                    "total": gpu.memory.total,
                    "free": gpu.memory.free,
                    "used": gpu.memory.used,
                    "reserved": gpu.memory.reserved,
                    "required_free": need,
                    "min_free_memory": spec,
                    "setting_from": source,
                    "processes": [{"pid": p.pid, "name": p.name, "used_memory": p.used_memory} for p in procs],
                    "memory_api": gpu.memory.api,
                },
                subject=gpu.id,
            )
        )
    return out


# --- health ---------------------------------------------------------------------------------


def ecc_findings(gpu: NvmlGpu) -> list[Finding]:
    problems: list[str] = []
    severity = Severity.DEGRADED
    rows, pages, ecc = gpu.remapped_rows, gpu.retired_pages, gpu.ecc
    if rows is not None and rows.failure:
        problems.append("row remapping failed: the memory has no spare rows left")
        severity = Severity.BLOCKER
    if rows is not None and rows.pending:
        problems.append(f"a row remap is pending ({rows.uncorrectable} row(s) remapped for uncorrectable errors)")
    if pages is not None and pages.pending:
        problems.append("a page retirement is pending")
    if pages is not None and pages.multiple_sbe + pages.double_bit >= RETIRED_PAGES_RMA:
        problems.append(f"{pages.multiple_sbe + pages.double_bit} pages retired, near the limit of 64")
    if ecc is not None and ecc.volatile_uncorrected:
        problems.append(f"{ecc.volatile_uncorrected} uncorrectable ECC error(s) since the last driver load")
    if not problems:
        return []
    needs_rma = severity is Severity.BLOCKER or (pages is not None and pages.multiple_sbe + pages.double_bit >= RETIRED_PAGES_RMA)
    return [
        finding(
            "ecc-errors",
            severity,
            summary=f"{label(gpu)} has memory errors: {'; '.join(problems)}.",
            cause=(
                "Uncorrectable memory errors kill the CUDA processes that touch the memory (Xid 48/63/64/94/95); "
                "retired pages and remapped rows take effect only after the GPU is reset."
            ),
            remedy=(
                "Drain the GPU and have the board replaced (RMA): run `nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT,ECC` "
                "and the vendor's field diagnostic (`dcgmi diag -r 3`) for the ticket."
                if needs_rma
                else f"Stop the work on the GPU and reset it (`sudo nvidia-smi -r -i {gpu.index}`) or reboot so that the "
                "pending retirement / remap takes effect; if uncorrectable errors recur, run `dcgmi diag -r 3` and RMA the board."
            ),
            evidence={
                "gpu": gpu.index,
                "ecc_enabled": ecc.enabled if ecc else None,
                "volatile_uncorrected": ecc.volatile_uncorrected if ecc else None,
                "aggregate_uncorrected": ecc.aggregate_uncorrected if ecc else None,
                "retired_pages": (
                    {"multiple_sbe": pages.multiple_sbe, "double_bit": pages.double_bit, "pending": pages.pending}
                    if pages
                    else None
                ),
                "remapped_rows": (
                    {"correctable": rows.correctable, "uncorrectable": rows.uncorrectable, "pending": rows.pending,
                     "failure": rows.failure}
                    if rows
                    else None
                ),
            },
            subject=gpu.id,
        )
    ]


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in CLOCK_REASONS.items() if mask & bit]


def _clocks(gpu: NvmlGpu) -> list[Finding]:
    mask = gpu.clocks_event_reasons
    if mask is None or not mask & CLOCK_FAULTS:
        return []
    faults = reason_names(mask & CLOCK_FAULTS)
    if mask & THERMAL:
        remedy = (
            f"The GPU is too hot ({gpu.temperature_c} C): check its fans and the chassis airflow, clean the heatsink, "
            "keep the inlet air cool; `nvidia-smi -q -d TEMPERATURE,PERFORMANCE` shows the slowdown thresholds."
        )
    elif mask & POWER_BRAKE:
        remedy = (
            "The system asserted the GPU's power brake: the PSU or the server's power management (BMC) is limiting "
            "power. Check the PSU capacity and redundancy and the BMC's power capping; `nvidia-smi -q -d PERFORMANCE`."
        )
    else:
        remedy = (
            "Hardware slowdown halves the clocks or worse: check the auxiliary power cables and the PSU, the "
            "temperatures (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`) and `sudo dmesg` for Xid errors."
        )
    return [
        finding(
            "clocks-throttled",
            Severity.DEGRADED,
            summary=f"{label(gpu)} is slowed down: {', '.join(faults)}.",
            cause=(
                f"nvmlDeviceGetCurrentClocksEventReasons = {mask:#x} ({', '.join(reason_names(mask))}): "
                f"{' and '.join(faults)} hold the clocks below what the work asks for, so it runs slower than the "
                "GPU can."
            ),
            remedy=remedy,
            evidence={
                "gpu": gpu.index,
                "reasons": f"{mask:#x}",
                "active": reason_names(mask),
                "temperature_c": gpu.temperature_c,
                "power_usage_w": gpu.power_usage_mw / 1000 if gpu.power_usage_mw is not None else None,
                "power_limit_w": gpu.power_limit_mw / 1000 if gpu.power_limit_mw is not None else None,
            },
            subject=gpu.id,
        )
    ]


def under_load(gpu: NvmlGpu) -> bool:
    """Busy enough that the link must be at its full generation (idle links downshift to save power)."""
    idle = gpu.clocks_event_reasons is not None and bool(gpu.clocks_event_reasons & 0x1)
    return gpu.utilization_gpu is not None and gpu.utilization_gpu >= LOAD_UTILIZATION and not idle


def _pcie(gpu: NvmlGpu) -> list[Finding]:
    p = gpu.pcie
    if p is None:
        return []
    problems = []
    if p.width is not None and p.width_max is not None and p.width < p.width_max:
        problems.append(f"the link trained at x{p.width} of x{p.width_max}")
    if p.gen is not None and p.gen_max is not None and p.gen < p.gen_max and under_load(gpu):
        problems.append(f"it runs at Gen{p.gen} of Gen{p.gen_max} while {gpu.utilization_gpu}% busy")
    if not problems:
        return []
    return [
        finding(
            "pcie-link-degraded",
            Severity.DEGRADED,
            summary=f"{label(gpu)}'s PCIe link is below its maximum: {'; '.join(problems)}.",
            cause=(
                "Host-device copies and multi-GPU traffic over PCIe get a fraction of the bandwidth. A narrower "
                "link than the slot and card support points at the card's seating, a riser or cable, or a dirty "
                "edge connector (a lower generation only at idle is power saving, and not reported)."
            ),
            remedy=(
                "Power down, reseat the card (and its riser or cable), and check the slot's wiring in the board "
                "manual; `sudo lspci -vv -s <bus id>` shows LnkCap against LnkSta; check the BIOS PCIe settings."
            ),
            evidence={
                "gpu": gpu.index,
                "gen": p.gen,
                "gen_max": p.gen_max,
                "gpu_gen_max": p.gpu_gen_max,
                "width": p.width,
                "width_max": p.width_max,
                "utilization_gpu": gpu.utilization_gpu,
                "pstate": gpu.pstate,
            },
            subject=gpu.id,
        )
    ]


def cooperating(nf: NvmlFacts, settings: Settings) -> str | None:
    """Why the GPUs are meant to work together, or None: the user said how many to expect, or the
    machine is built for it (NVLink between GPUs)."""
    if settings.expect_gpus is not None and settings.expect_gpus >= 2:
        return f"--gpucheck-expect-gpus={settings.expect_gpus}"
    if any(link.p2p_nvlink == 0 for link in nf.links):
        return "the GPUs are linked by NVLink"
    return None


def framework_gpus(facts: Facts) -> tuple[frozenset[int] | None, str]:
    """The NVML indices of the GPUs the framework uses, or would once it works, and who says so: those it
    registered (joined to NVML on the PCI bus id), else those the CUDA driver enumerates (after
    CUDA_VISIBLE_DEVICES), else None: every GPU NVML lists (NVML knows nothing of CUDA_VISIBLE_DEVICES)."""
    rows = device_map(facts)
    registered = {r.nvml_index for r in rows if r.nvml_index is not None and any(r.frameworks.values())}
    if registered:
        titles = " and ".join(view.title for view in facts.frameworks.values())
        return frozenset(registered), f"the GPUs {titles} registered"
    cf = facts.cuda.facts
    if cf is not None and cf.devices:
        enumerated = {r.nvml_index for r in rows if r.nvml_index is not None and r.cuda_ordinal is not None}
        return frozenset(enumerated), "the GPUs the CUDA driver enumerates (CUDA_VISIBLE_DEVICES applied)"
    return None, "the GPUs NVML lists"


def _p2p(
    nf: NvmlFacts, settings: Settings, used: tuple[frozenset[int] | None, str] = (None, "the GPUs NVML lists")
) -> list[Finding]:
    """Missing peer-to-peer access: ``p2p-unavailable`` (degraded) where the GPUs are meant to work
    together; else, between two or more GPUs TensorFlow uses (``used``), ``p2p-unavailable-note`` (info),
    which says what it costs. Two ids, since one id is one cause at one severity (DESIGN.md): a fleet
    counting p2p-unavailable counts the machines whose multi-GPU jobs are hurt, not every workstation
    with two GeForce cards."""
    by_index = {g.index: g for g in nf.gpus}

    def ok(i: int) -> bool:
        g = by_index.get(i)
        return g is not None and usable(g)

    bad: list[NvmlLink] = [
        link for link in nf.links if link.p2p_read not in (0, None) and ok(link.a) and ok(link.b)
    ]
    why = cooperating(nf, settings)
    if why is not None:
        return _p2p_unavailable(bad, why) if bad else []
    indices, source = used
    gpus = sorted(i for i in (indices if indices is not None else by_index) if ok(i))
    among = [link for link in bad if link.a in gpus and link.b in gpus]
    if len(gpus) < 2 or not among:
        return []
    return [_p2p_note(among, gpus, source)]


def _p2p_pairs(links: list[NvmlLink]) -> list[dict[str, Any]]:
    return [
        {
            "gpus": [link.a, link.b],
            "p2p_read": P2P_STATUS.get(link.p2p_read or 0, str(link.p2p_read)),
            "nvlink": P2P_STATUS.get(link.p2p_nvlink, str(link.p2p_nvlink)) if link.p2p_nvlink is not None else None,
            "topology": TOPOLOGY.get(link.topology, str(link.topology)) if link.topology is not None else None,
        }
        for link in links
    ]


def _p2p_statuses(links: list[NvmlLink]) -> list[int]:
    return sorted({link.p2p_read for link in links if link.p2p_read is not None})


def _p2p_status_text(statuses: list[int]) -> str:
    return ", ".join(sorted({P2P_STATUS.get(s, str(s)) for s in statuses}))


def _p2p_remedy(statuses: list[int]) -> str:
    if 2 in statuses:
        return (
            "These GPUs do not support peer-to-peer (GeForce cards since the RTX 40 series, for example): multi-GPU "
            "work goes through host memory. Use GPUs with P2P or NVLink for tightly coupled training."
        )
    if 4 in statuses:
        return "A driver registry key disables P2P: remove it (NVreg_RegistryDwords with a P2P key in /etc/modprobe.d) and reload the driver."
    return (
        "The PCIe path between the GPUs blocks P2P: disable ACS on the PCIe switches / root ports and use "
        "`iommu=pt` (or turn the IOMMU off) on bare metal; in a VM, P2P needs the hypervisor's support. "
        "Until then NCCL must fall back to host memory (NCCL_P2P_DISABLE=1) or it hangs."
    )


def _p2p_unavailable(bad: list[NvmlLink], why: str) -> list[Finding]:
    statuses = _p2p_statuses(bad)
    n = len({i for link in bad for i in (link.a, link.b)})
    return [
        finding(
            "p2p-unavailable",
            Severity.DEGRADED,
            summary=(
                f"Peer-to-peer access is unavailable between {len(bad)} pair(s) of {n} GPUs meant to work together "
                f"({why})."
            ),
            cause=(
                "nvmlDeviceGetP2PStatus(read) answers "
                + _p2p_status_text(statuses)
                + ": collectives (NCCL all-reduce in MirroredStrategy) go through host memory, much slower, or hang."
            ),
            remedy=_p2p_remedy(statuses),
            evidence={"why_cooperating": why, "pairs": _p2p_pairs(bad)},
        )
    ]


def _p2p_note(among: list[NvmlLink], gpus: list[int], source: str) -> Finding:
    statuses = _p2p_statuses(among)
    pairs = ", ".join(f"GPU {link.a} and GPU {link.b}" for link in among[:4]) + (
        f" and {len(among) - 4} more pair(s)" if len(among) > 4 else ""
    )
    return finding(
        "p2p-unavailable-note",
        Severity.INFO,
        summary=(
            f"No peer-to-peer access between {pairs}: every all-reduce of MirroredStrategy across them goes "
            "through host memory."
        ),
        cause=(
            f"nvmlDeviceGetP2PStatus(read) answers {_p2p_status_text(statuses)} between {len(among)} pair(s) of the "
            f"{len(gpus)} GPUs TensorFlow uses ({source}). Without P2P, NCCL (the all-reduce of MirroredStrategy) "
            "stages every transfer through host memory: each gradient crosses PCIe twice and the CPU's memory once, "
            "so training on several GPUs scales worse than it could. Nothing says these GPUs must work together "
            "(no --gpucheck-expect-gpus, no NVLink), so this is a note, not the fault p2p-unavailable."
        ),
        remedy=(
            "Nothing is needed for one job per GPU. For training across these GPUs: "
            + _p2p_remedy(statuses)
            + f" To make it a check, run with --gpucheck-expect-gpus={len(gpus)}."
        ),
        evidence={"gpus_used": gpus, "gpus_used_from": source, "pairs": _p2p_pairs(among)},
    )
