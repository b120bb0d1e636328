/* A fake libnvidia-ml.so.1 (NVML) at the C ABI, driven by a scenario.
 *
 * It implements the entry points nvidia-ml-py (pynvml.py) and gpucheck's ctypes probe call, with
 * the struct layouts and version fields of nvml.h as pynvml.py declares them (nvmlMemory_v2_t with
 * its version word, nvmlPciInfo_t with busIdLegacy and busId, nvmlProcessInfo_v2_t, ...).
 *
 * System keys:
 *   driver_version              user-space driver version (the top-level scenario key; the file is named after it too)
 *   nvml.init                   an int nvmlReturn_t for nvmlInit / nvmlInit_v2 / nvmlInitWithFlags, or "hang" / "crash" / "abort"
 *   nvml.nvml_version           default "12.<driver_version>"
 *   nvml.cuda_driver_version    int, default cuda.driver_version or 12040
 *   nvml.fn.<entry point>       behaviour hook for any entry point: an int nvmlReturn_t it returns, or hang / crash / abort
 * Per GPU N (the "gpus" list is shared with the fake libcuda):
 *   gpus.N.name, .uuid, .pci_bus_id, .pci_device_id (e.g. 0x233010de), .cc_major, .cc_minor
 *   gpus.N.memory_total, .memory_reserved, .memory_used   bytes; free = total - reserved - used, where used is
 *                               memory_used (processes the scenario only describes) plus what live processes
 *                               of this machine hold through the fake libcuda (the memory ledger, fakeledger.h)
 *   gpus.N.lost                 1: nvmlDeviceGetHandleByIndex returns NVML_ERROR_GPU_IS_LOST (Xid 79, fallen off the bus)
 *   gpus.N.fn.<entry point>     behaviour hook for this GPU only (checked before nvml.fn.*)
 *   gpus.N.processes.K.pid, .used_memory, .name   compute processes (a process without name: NVML_ERROR_NOT_FOUND,
 *                               as for a process in another PID namespace). After them, every live process of
 *                               the ledger that holds bytes on the GPU, usedGpuMemory = those bytes (its
 *                               allocations plus the scenario's context_memory, default 0), named after its
 *                               /proc/<pid>/cmdline (argv[0]) as nvmlSystemGetProcessName answers
 *   gpus.N.mig.current, .pending   MIG mode (absent "mig": NVML_ERROR_NOT_SUPPORTED, a GPU without MIG)
 *   gpus.N.mig.max_devices      default 7
 *   gpus.N.mig.instances.K.uuid, .profile, .memory_total   MIG devices (GPU instance + compute instance)
 *   gpus.N.compute_mode         0 default, 2 prohibited, 3 exclusive process
 *   gpus.N.persistence          0 / 1
 *   gpus.N.ecc.current, .pending, .volatile_uncorrected, .aggregate_uncorrected   (absent "ecc": not supported)
 *   gpus.N.retired_pages.sbe, .dbe, .pending   (absent: not supported, as on Ampere and later)
 *   gpus.N.remapped_rows.correctable, .uncorrectable, .pending, .failure   (absent: not supported, before Ampere)
 *   gpus.N.clocks_event_reasons  bit mask (nvmlClocksEventReason*), default 0x1 (GPU idle)
 *   gpus.N.temperature (C), .power_usage (mW), .power_limit (mW), .pstate, .utilization_gpu, .utilization_memory (%)
 *   gpus.N.pcie.gen, .gen_max, .gpu_gen_max, .width, .width_max
 *   gpus.N.nvlink.state          one character per link index the GPU has: 0 inactive, 1 active, 2 asleep (absent
 *                               "nvlink": a GPU without NVLink, NOT_SUPPORTED); an index past the last is refused
 *                               with NVML_ERROR_INVALID_ARGUMENT, as the real library does
 *   gpus.N.nvlink.errors.L.replay, .recovery, .crc_flit, .crc_data, .ecc_data   error counters (default 0);
 *                               gpus.N.nvlink.counters=0: NOT_SUPPORTED
 *   gpus.N.fabric.state, .status, .clique_id, .cluster_uuid, .health_mask, .health_summary   fabric registration
 *                               (absent "fabric": NOT_SUPPORTED)
 * Pairs (I < J):
 *   links.I-J.p2p_read, .p2p_write, .p2p_nvlink, .p2p_atomics, .p2p_prop (nvmlGpuP2PStatus_t, one per
 *                               capability index), .topology (nvmlGpuTopologyLevel_t); links.default.* otherwise
 *
 * Build variants (scenario-independent, -D flags): FAKE_NVML_NO_MEMORY_V2 (drivers before R510 lack
 * nvmlDeviceGetMemoryInfo_v2), FAKE_NVML_NO_PROCESSES_V3 (before R510: no nvmlDeviceGetComputeRunningProcesses_v3),
 * FAKE_NVML_NO_CLOCKS_EVENT (before R535: only the ...ClocksThrottleReasons names, and no
 * nvmlDeviceGetGpuMaxPcieLinkGeneration). Absent means absent from the .so.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <time.h>
#include <strings.h>
#include "fakecfg.h"
#include "fakeledger.h"

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7, NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct fake_device { int gpu; int mig; } fake_device;
typedef fake_device *nvmlDevice_t;

#define MAX_GPUS 64
#define MAX_MIG 8
static fake_device devices[MAX_GPUS];
static fake_device mig_devices[MAX_GPUS][MAX_MIG];
static int initialised = 0;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24U)))
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } nvmlProcessInfo_v1_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_v2_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

struct errtext { int code; const char *text; };
static const struct errtext ERRORS[] = {
    {0, "Success"}, {1, "Uninitialized"}, {2, "Invalid Argument"}, {3, "Not Supported"},
    {4, "Insufficient Permissions"}, {5, "Already Initialized"}, {6, "Not Found"}, {7, "Insufficient Size"},
    {8, "Insufficient External Power"}, {9, "Driver Not Loaded"}, {10, "Timeout"}, {11, "Interrupt Request Issue"},
    {12, "NVML Shared Library Not Found"}, {13, "Function Not Found"}, {14, "Corrupted infoROM"},
    {15, "GPU is lost"}, {16, "GPU requires restart"}, {17, "The operating system has blocked the request."},
    {18, "RM has detected an NVML/RM version mismatch."}, {19, "In use by another client"},
    {20, "Insufficient Memory"}, {23, "Insufficient Resources"}, {25, "Argument version mismatch"},
    {999, "Unknown Error"},
};

const char *nvmlErrorString(nvmlReturn_t result) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == result) return ERRORS[i].text;
    return "Unknown Error";
}

/* The behaviour hook of entry point FN (for GPU GPU, or -1): 0 to go on, else the code to return. */
static int hook(const char *fn, int gpu) {
    char key[128];
    const char *v = NULL;
    if (gpu >= 0) {
        snprintf(key, sizeof key, "gpus.%d.fn.%s", gpu, fn);
        v = cfg_get(key);
    }
    if (!v) {
        snprintf(key, sizeof key, "nvml.fn.%s", fn);
        v = cfg_get(key);
    }
    if (!v) return 0;
    cfg_misbehave(v);
    return atoi(v);
}

static const char *gstr(int gpu, const char *field) { return cfg_getf("gpus.%d.%s", gpu, field); }

static long long gint(int gpu, const char *field, long long dflt) {
    const char *v = gstr(gpu, field);
    return v && *v ? strtoll(v, NULL, 0) : dflt;
}

static int gpu_count(void) {
    int n = (int)cfg_int("gpus.count", 0);
    return n > MAX_GPUS ? MAX_GPUS : n;
}

/* Start of every device entry point: initialised, a valid handle, the hook. */
#define DEVICE_ENTRY(dev)                                              \
    do {                                                               \
        if (!initialised) return NVML_ERROR_UNINITIALIZED;             \
        if (!(dev)) return NVML_ERROR_INVALID_ARGUMENT;                \
        int hook_code_ = hook(__func__, (dev)->gpu);                   \
        if (hook_code_) return hook_code_;                             \
    } while (0)

#define SYSTEM_ENTRY()                                                 \
    do {                                                               \
        if (!initialised) return NVML_ERROR_UNINITIALIZED;             \
        int hook_code_ = hook(__func__, -1);                           \
        if (hook_code_) return hook_code_;                             \
    } while (0)

static const char *driver_version(void) { return cfg_str("driver_version", "550.54.15"); }

/* --- init ------------------------------------------------------------------------------ */

static nvmlReturn_t do_init(void) {
    const char *what = cfg_get("nvml.init");
    cfg_misbehave(what);
    int code = what && *what ? atoi(what) : 0;
    if (code == 0) {
        initialised = 1;
        for (int i = 0; i < MAX_GPUS; i++) {
            devices[i].gpu = i;
            devices[i].mig = -1;
            for (int k = 0; k < MAX_MIG; k++) {
                mig_devices[i][k].gpu = i;
                mig_devices[i][k].mig = k;
            }
        }
    }
    return code;
}

nvmlReturn_t nvmlInit(void) { return do_init(); }
nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    int h = hook(__func__, -1);
    if (h) return h;
    initialised = 0;
    return NVML_SUCCESS;
}

/* --- system ---------------------------------------------------------------------------- */

static nvmlReturn_t copy_string(char *out, unsigned int len, const char *value) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(out, len, "%s", value);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    SYSTEM_ENTRY();
    return copy_string(version, length, driver_version());
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    SYSTEM_ENTRY();
    char buf[96];
    snprintf(buf, sizeof buf, "12.%s", driver_version());
    return copy_string(version, length, cfg_str("nvml.nvml_version", buf));
}

static nvmlReturn_t cuda_version(int *v) {
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = (int)cfg_int("nvml.cuda_driver_version", cfg_int("cuda.driver_version", 12040));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { SYSTEM_ENTRY(); return cuda_version(v); }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { SYSTEM_ENTRY(); return cuda_version(v); }

/* argv[0] of a live process of this machine (or its comm), as the real NVML names a process it sees. */
static int process_name(unsigned int pid, char *out, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    FILE *f = fopen(path, "r");
    size_t n = 0;
    if (f) {
        n = fread(out, 1, len - 1, f);
        fclose(f);
    }
    out[n] = '\0'; /* argv[0] ends at its NUL */
    if (out[0]) return 1;
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    f = fopen(path, "r");
    if (!f) return 0;
    if (!fgets(out, (int)len, f)) out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
    return out[0] != '\0';
}

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    SYSTEM_ENTRY();
    for (int g = 0; g < gpu_count(); g++) {
        int n = (int)gint(g, "processes.count", 0);
        for (int k = 0; k < n; k++) {
            char field[64];
            snprintf(field, sizeof field, "processes.%d.pid", k);
            if (gint(g, field, -1) != (long long)pid) continue;
            snprintf(field, sizeof field, "processes.%d.name", k);
            const char *v = gstr(g, field);
            if (!v || !*v) return NVML_ERROR_NOT_FOUND;
            return copy_string(name, length, v);
        }
    }
    char buf[256];
    if (ledger_has_pid((int)pid) && process_name(pid, buf, sizeof buf)) return copy_string(name, length, buf);
    return NVML_ERROR_NOT_FOUND;
}

/* --- enumeration ----------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    SYSTEM_ENTRY();
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)gpu_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned int)gpu_count()) return NVML_ERROR_INVALID_ARGUMENT;
    int h = hook(__func__, (int)index);
    if (h) return h;
    if (gint((int)index, "lost", 0)) return NVML_ERROR_GPU_IS_LOST;
    *device = &devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* By PCI bus id, compared without case and without leading zeros of the domain ("0000:18:00.0"
 * and "00000000:18:00.0" are the same device), as TensorFlow asks with cuDeviceGetPCIBusId's form. */
static const char *skip_domain_zeros(const char *s) {
    while (*s == '0' && s[1] && s[1] != ':') s++;
    return s;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < gpu_count(); i++) {
        const char *mine = gstr(i, "pci_bus_id");
        if (mine && strcasecmp(skip_domain_zeros(mine), skip_domain_zeros(bus_id)) == 0) {
            if (gint(i, "lost", 0)) return NVML_ERROR_GPU_IS_LOST;
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

/* --- NVLink and the NVLink fabric -------------------------------------------------------- */

/* A GPU's links are the characters of gpus.N.nvlink.state, one per link index (0 inactive, 1 active, 2 asleep):
 * as the real library, every index the GPU has answers (trained or not), the next one and beyond are refused with
 * NVML_ERROR_INVALID_ARGUMENT (a GB200 refuses 18..35: NVIDIA/TensorRT-LLM#17060), and a GPU without NVLink (no
 * "nvlink" in the scenario) refuses link 0 with NVML_ERROR_NOT_SUPPORTED. */
static int nvlink_count(nvmlDevice_t dev) {
    const char *states = gstr(dev->gpu, "nvlink.state");
    return states ? (int)strlen(states) : -1;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link, unsigned int *active) {
    DEVICE_ENTRY(dev);
    if (!active) return NVML_ERROR_INVALID_ARGUMENT;
    int n = nvlink_count(dev);
    if (n < 0) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned int)n) return NVML_ERROR_INVALID_ARGUMENT;
    char c = gstr(dev->gpu, "nvlink.state")[link];
    if (c < '0' || c > '2') return NVML_ERROR_UNKNOWN;
    *active = (unsigned int)(c - '0');
    return NVML_SUCCESS;
}

/* nvmlNvLinkErrorCounter_t 0..4 (DL replay, DL recovery, CRC flit, CRC data, ECC data), each from
 * gpus.N.nvlink.errors.<link>.<name> (default 0); gpus.N.nvlink.counters=0: the GPU gives none (NOT_SUPPORTED). */
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t dev, unsigned int link, int counter, unsigned long long *value) {
    static const char *const names[] = {"replay", "recovery", "crc_flit", "crc_data", "ecc_data"};
    DEVICE_ENTRY(dev);
    if (!value) return NVML_ERROR_INVALID_ARGUMENT;
    int n = nvlink_count(dev);
    if (n < 0 || !gint(dev->gpu, "nvlink.counters", 1)) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned int)n || counter < 0 || counter > 4) return NVML_ERROR_INVALID_ARGUMENT;
    char field[64];
    snprintf(field, sizeof field, "nvlink.errors.%u.%s", link, names[counter]);
    *value = (unsigned long long)gint(dev->gpu, field, 0);
    return NVML_SUCCESS;
}

/* The GPU's fabric registration: gpus.N.fabric.state (nvmlGpuFabricState_t), .status (an nvmlReturn_t), .clique_id,
 * .cluster_uuid (32 hex digits), .health_mask; no "fabric": NVML_ERROR_NOT_SUPPORTED, the answer off NVSwitch systems.
 * The V call reads the caller's version word, as nvml.h's versioned structs are: v2 (0x02000024) and v3 (0x03000028,
 * plus healthSummary) are known, any other is NVML_ERROR_ARGUMENT_VERSION_MISMATCH. */
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH_ 25
typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned int state;
} nvmlGpuFabricInfo_t;
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned int state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;

static int fabric_fill(nvmlDevice_t dev, unsigned char *uuid, nvmlReturn_t *status, unsigned int *clique,
                       unsigned int *state) {
    if (!gstr(dev->gpu, "fabric.state")) return 0;
    *state = (unsigned int)gint(dev->gpu, "fabric.state", 0);
    *status = (nvmlReturn_t)gint(dev->gpu, "fabric.status", 0);
    *clique = (unsigned int)gint(dev->gpu, "fabric.clique_id", 0);
    const char *hex = gstr(dev->gpu, "fabric.cluster_uuid");
    memset(uuid, 0, 16);
    for (int i = 0; hex && i < 16 && hex[2 * i] && hex[2 * i + 1]; i++) {
        char byte[3] = {hex[2 * i], hex[2 * i + 1], 0};
        uuid[i] = (unsigned char)strtoul(byte, NULL, 16);
    }
    return 1;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t dev, nvmlGpuFabricInfo_t *info) {
    DEVICE_ENTRY(dev);
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    if (!fabric_fill(dev, info->clusterUuid, &info->status, &info->cliqueId, &info->state))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, nvmlGpuFabricInfo_v3_t *info) {
    DEVICE_ENTRY(dev);
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != 0x02000024u && info->version != 0x03000028u) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH_;
    if (!fabric_fill(dev, info->clusterUuid, &info->status, &info->cliqueId, &info->state))
        return NVML_ERROR_NOT_SUPPORTED;
    info->healthMask = (unsigned int)gint(dev->gpu, "fabric.health_mask", 0);
    if (info->version == 0x03000028u) info->healthSummary = (unsigned char)gint(dev->gpu, "fabric.health_summary", 0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index) {
    DEVICE_ENTRY(dev);
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)dev->gpu;
    return NVML_SUCCESS;
}

/* --- identity -------------------------------------------------------------------------- */

static const char *mig_str(nvmlDevice_t dev, const char *field) {
    char key[128];
    snprintf(key, sizeof key, "gpus.%d.mig.instances.%d.%s", dev->gpu, dev->mig, field);
    return cfg_get(key);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length) {
    DEVICE_ENTRY(dev);
    const char *base = gstr(dev->gpu, "name");
    if (dev->mig >= 0) {
        char buf[160];
        const char *profile = mig_str(dev, "profile");
        snprintf(buf, sizeof buf, "%s MIG %s", base ? base : "NVIDIA Fake GPU", profile ? profile : "1g.10gb");
        return copy_string(name, length, buf);
    }
    return copy_string(name, length, base ? base : "NVIDIA Fake GPU");
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length) {
    DEVICE_ENTRY(dev);
    char buf[96];
    if (dev->mig >= 0) {
        const char *v = mig_str(dev, "uuid");
        if (!v) {
            snprintf(buf, sizeof buf, "MIG-00000000-0000-4000-8000-%012d", dev->gpu * 100 + dev->mig);
            v = buf;
        }
        return copy_string(uuid, length, v);
    }
    const char *v = gstr(dev->gpu, "uuid");
    if (!v) {
        snprintf(buf, sizeof buf, "GPU-00000000-0000-4000-8000-%012d", dev->gpu);
        v = buf;
    }
    return copy_string(uuid, length, v);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    DEVICE_ENTRY(dev);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    char buf[32];
    snprintf(buf, sizeof buf, "00000000:%02X:00.0", 0x10 + dev->gpu);
    const char *bus_id = gstr(dev->gpu, "pci_bus_id");
    if (!bus_id) bus_id = buf;
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", bus_id + (strlen(bus_id) > 12 ? 4 : 0));
    unsigned int domain = 0, bus = 0, device = 0, function = 0;
    if (sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4) {
        pci->domain = domain;
        pci->bus = bus;
        pci->device = device;
    }
    pci->pciDeviceId = (unsigned int)gint(dev->gpu, "pci_device_id", 0x233010de);
    pci->pciSubSystemId = (unsigned int)gint(dev->gpu, "pci_subsystem_id", 0x16c110de);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t dev, int *major, int *minor) {
    DEVICE_ENTRY(dev);
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = (int)gint(dev->gpu, "cc_major", 8);
    *minor = (int)gint(dev->gpu, "cc_minor", 0);
    return NVML_SUCCESS;
}

/* --- memory and processes -------------------------------------------------------------- */

static void memory_of(nvmlDevice_t dev, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used) {
    if (dev->mig >= 0) {
        const char *v = mig_str(dev, "memory_total");
        *total = v ? strtoull(v, NULL, 0) : 10ULL << 30;
        *reserved = 0;
        *used = 0;
        return;
    }
    *total = (unsigned long long)gint(dev->gpu, "memory_total", 16LL << 30);
    *reserved = (unsigned long long)gint(dev->gpu, "memory_reserved", 0);
    *used = (unsigned long long)gint(dev->gpu, "memory_used", 0) + ledger_used(dev->gpu, 0);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *memory) {
    DEVICE_ENTRY(dev);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total, reserved, used;
    memory_of(dev, &total, &reserved, &used);
    /* v1 counts the driver's reservation as used. */
    memory->total = total;
    memory->used = used + reserved;
    memory->free = total > used + reserved ? total - used - reserved : 0;
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_MEMORY_V2
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *memory) {
    DEVICE_ENTRY(dev);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    unsigned long long total, reserved, used;
    memory_of(dev, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total > used + reserved ? total - used - reserved : 0;
    return NVML_SUCCESS;
}
#endif

/* Fill up to *count entries (v1 or v2 layout) with the GPU's compute processes: the scenario's, then
 * the live processes of the ledger. */
static nvmlReturn_t processes(nvmlDevice_t dev, unsigned int *count, void *infos, int v2) {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int fixed = dev->mig >= 0 ? 0 : (unsigned int)gint(dev->gpu, "processes.count", 0);
    struct ledger_entry live[LEDGER_MAX];
    int n_live = dev->mig >= 0 ? 0 : ledger_list(dev->gpu, live, LEDGER_MAX);
    unsigned int n = fixed + (unsigned int)n_live;
    if (n == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if (!infos || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int k = 0; k < n; k++) {
        unsigned int pid;
        unsigned long long mem;
        if (k < fixed) {
            char field[64];
            snprintf(field, sizeof field, "processes.%u.pid", k);
            pid = (unsigned int)gint(dev->gpu, field, 1000 + k);
            snprintf(field, sizeof field, "processes.%u.used_memory", k);
            mem = (unsigned long long)gint(dev->gpu, field, 0);
        } else {
            pid = (unsigned int)live[k - fixed].pid;
            mem = live[k - fixed].bytes;
        }
        if (v2) {
            nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)infos + k;
            p->pid = pid;
            p->usedGpuMemory = mem;
            p->gpuInstanceId = 0xFFFFFFFFU;
            p->computeInstanceId = 0xFFFFFFFFU;
        } else {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + k;
            p->pid = pid;
            p->usedGpuMemory = mem;
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_v1_t *infos) {
    DEVICE_ENTRY(dev);
    return processes(dev, count, infos, 0);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_v2_t *infos) {
    DEVICE_ENTRY(dev);
    return processes(dev, count, infos, 1);
}

#ifndef FAKE_NVML_NO_PROCESSES_V3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_v2_t *infos) {
    DEVICE_ENTRY(dev);
    return processes(dev, count, infos, 1);
}
#endif

/* --- modes ----------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
    DEVICE_ENTRY(dev);
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    if (!gstr(dev->gpu, "mig.current")) return NVML_ERROR_NOT_SUPPORTED;
    *current = (unsigned int)gint(dev->gpu, "mig.current", 0);
    *pending = (unsigned int)gint(dev->gpu, "mig.pending", *current);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count) {
    DEVICE_ENTRY(dev);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "mig.current")) return NVML_ERROR_NOT_SUPPORTED;
    *count = (unsigned int)gint(dev->gpu, "mig.max_devices", 7);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index, nvmlDevice_t *mig) {
    DEVICE_ENTRY(dev);
    if (!mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "mig.current")) return NVML_ERROR_NOT_SUPPORTED;
    if (!gint(dev->gpu, "mig.current", 0)) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= MAX_MIG || (long long)index >= gint(dev->gpu, "mig.instances.count", 0)) return NVML_ERROR_NOT_FOUND;
    *mig = &mig_devices[dev->gpu][index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t dev, int *mode) {
    DEVICE_ENTRY(dev);
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = (int)gint(dev->gpu, "compute_mode", 0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, int *mode) {
    DEVICE_ENTRY(dev);
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = (int)gint(dev->gpu, "persistence", 0);
    return NVML_SUCCESS;
}

/* --- ECC, retired pages, row remapping ------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t dev, int *current, int *pending) {
    DEVICE_ENTRY(dev);
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "ecc.current")) return NVML_ERROR_NOT_SUPPORTED;
    *current = (int)gint(dev->gpu, "ecc.current", 0);
    *pending = (int)gint(dev->gpu, "ecc.pending", *current);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type, int counter_type, unsigned long long *count) {
    DEVICE_ENTRY(dev);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "ecc.current") || !gint(dev->gpu, "ecc.current", 0)) return NVML_ERROR_NOT_SUPPORTED;
    if (error_type != 1) { /* corrected errors: not modelled */
        *count = 0;
        return NVML_SUCCESS;
    }
    *count = (unsigned long long)gint(dev->gpu, counter_type == 0 ? "ecc.volatile_uncorrected" : "ecc.aggregate_uncorrected", 0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned int *count, unsigned long long *addresses) {
    DEVICE_ENTRY(dev);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "retired_pages.pending")) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int n = (unsigned int)gint(dev->gpu, cause == 0 ? "retired_pages.sbe" : "retired_pages.dbe", 0);
    if (!addresses || *count < n) {
        *count = n;
        return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned int k = 0; k < n; k++) addresses[k] = 0x1000ULL * (k + 1) + (unsigned long long)cause;
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending) {
    DEVICE_ENTRY(dev);
    if (!pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "retired_pages.pending")) return NVML_ERROR_NOT_SUPPORTED;
    *pending = (int)gint(dev->gpu, "retired_pages.pending", 0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                                       unsigned int *failure) {
    DEVICE_ENTRY(dev);
    if (!corr || !unc || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gstr(dev->gpu, "remapped_rows.pending")) return NVML_ERROR_NOT_SUPPORTED;
    *corr = (unsigned int)gint(dev->gpu, "remapped_rows.correctable", 0);
    *unc = (unsigned int)gint(dev->gpu, "remapped_rows.uncorrectable", 0);
    *pending = (unsigned int)gint(dev->gpu, "remapped_rows.pending", 0);
    *failure = (unsigned int)gint(dev->gpu, "remapped_rows.failure", 0);
    return NVML_SUCCESS;
}

/* --- clocks, thermals, power, utilisation ---------------------------------------------- */

static nvmlReturn_t reasons(nvmlDevice_t dev, unsigned long long *out) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = (unsigned long long)gint(dev->gpu, "clocks_event_reasons", 0x1);
    return NVML_SUCCESS;
}

#ifndef FAKE_NVML_NO_CLOCKS_EVENT
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *r) {
    DEVICE_ENTRY(dev);
    return reasons(dev, r);
}
#endif

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *r) {
    DEVICE_ENTRY(dev);
    return reasons(dev, r);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *temp) {
    DEVICE_ENTRY(dev);
    if (!temp || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = (unsigned int)gint(dev->gpu, "temperature", 35);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw) {
    DEVICE_ENTRY(dev);
    if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
    *mw = (unsigned int)gint(dev->gpu, "power_usage", 60000);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw) {
    DEVICE_ENTRY(dev);
    if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
    *mw = (unsigned int)gint(dev->gpu, "power_limit", 300000);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t dev, int *pstate) {
    DEVICE_ENTRY(dev);
    if (!pstate) return NVML_ERROR_INVALID_ARGUMENT;
    *pstate = (int)gint(dev->gpu, "pstate", 8);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util) {
    DEVICE_ENTRY(dev);
    if (!util) return NVML_ERROR_INVALID_ARGUMENT;
    util->gpu = (unsigned int)gint(dev->gpu, "utilization_gpu", 0);
    util->memory = (unsigned int)gint(dev->gpu, "utilization_memory", 0);
    return NVML_SUCCESS;
}

/* --- PCIe ------------------------------------------------------------------------------ */

static nvmlReturn_t pcie(nvmlDevice_t dev, const char *field, long long dflt, unsigned int *out) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = (unsigned int)gint(dev->gpu, field, dflt);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t dev, unsigned int *v) {
    DEVICE_ENTRY(dev);
    return pcie(dev, "pcie.gen", gint(dev->gpu, "pcie.gen_max", 4), v);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t dev, unsigned int *v) {
    DEVICE_ENTRY(dev);
    return pcie(dev, "pcie.gen_max", 4, v);
}

#ifndef FAKE_NVML_NO_CLOCKS_EVENT
nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t dev, unsigned int *v) {
    DEVICE_ENTRY(dev);
    return pcie(dev, "pcie.gpu_gen_max", gint(dev->gpu, "pcie.gen_max", 4), v);
}
#endif

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t dev, unsigned int *v) {
    DEVICE_ENTRY(dev);
    return pcie(dev, "pcie.width", gint(dev->gpu, "pcie.width_max", 16), v);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t dev, unsigned int *v) {
    DEVICE_ENTRY(dev);
    return pcie(dev, "pcie.width_max", 16, v);
}

/* --- pairs ----------------------------------------------------------------------------- */

static long long link_value(int a, int b, const char *field, long long dflt) {
    char key[128];
    int lo = a < b ? a : b, hi = a < b ? b : a;
    snprintf(key, sizeof key, "links.%d-%d.%s", lo, hi, field);
    const char *v = cfg_get(key);
    if (!v) {
        snprintf(key, sizeof key, "links.default.%s", field);
        v = cfg_get(key);
    }
    return v && *v ? strtoll(v, NULL, 0) : dflt;
}

/* One status per capability index (nvmlGpuP2PCapsIndex_t, nvml.h): READ 0, WRITE 1, NVLINK 2, ATOMICS 3,
 * PROP (PCI) 4, each read from its own field. An index the scenario does not describe answers
 * NVML_P2P_STATUS_UNKNOWN (6), except READ (default OK) and NVLINK (default NOT_SUPPORTED), so a probe that
 * asks the wrong index (the write one for the read one: an easy slip, see probes/nvml.py) reads a status no
 * scenario gave. NVML_P2P_CAPS_INDEX_UNKNOWN (5) answers UNKNOWN; any other index is refused with
 * NVML_ERROR_INVALID_ARGUMENT, as nvml.h documents ("device1 or device2 or p2pIndex is invalid"). */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status) {
    static const char *const fields[] = {"p2p_read", "p2p_write", "p2p_nvlink", "p2p_atomics", "p2p_prop"};
    static const long long defaults[] = {0, 6, 5, 6, 6};
    DEVICE_ENTRY(a);
    if (!b || !status) return NVML_ERROR_INVALID_ARGUMENT;
    if (index < 0 || index > 5) return NVML_ERROR_INVALID_ARGUMENT;
    *status = index == 5 ? 6 : (int)link_value(a->gpu, b->gpu, fields[index], defaults[index]);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) {
    DEVICE_ENTRY(a);
    if (!b || !level) return NVML_ERROR_INVALID_ARGUMENT;
    *level = (int)link_value(a->gpu, b->gpu, "topology", 30);
    return NVML_SUCCESS;
}
