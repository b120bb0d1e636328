/* A fake libcuda.so.1 (CUDA driver API) at the C ABI, driven by a scenario.
 *
 * Keys:   cuda.driver_version  int, e.g. 12040 (as cuDriverGetVersion returns it)
 *         cuda.init            an int CUresult for cuInit, or "hang" / "crash" / "abort"
 *         gpus.count           device count after a successful cuInit
 *         gpus.N.name, gpus.N.cc_major, gpus.N.cc_minor, gpus.N.memory_total (bytes), gpus.N.pci_bus_id
 *         gpus.N.uuid          "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (cuDeviceGetUuid)
 *         gpus.N.memory_reserved  bytes the driver keeps (NVML's "reserved"): cuDeviceTotalMem is
 *                              memory_total - memory_reserved, as on a real GPU (default 0)
 *         gpus.N.memory_used   bytes in use by processes the scenario only describes (static), or
 *         gpus.N.memory_free   bytes free before any process of this machine allocates (instead of
 *                              total - used)
 *         gpus.N.context_memory  bytes a process's context costs on the GPU (a real H100 shows about
 *                              500 MiB a process); default 0, so a context alone costs nothing
 *         gpus.N.cuda_pci_bus_id  what cuDeviceGetPCIBusId answers, when it differs in form from NVML's
 *                              pci_bus_id (a real driver: "0000:00:06.0" here, "00000000:00:06.0" in NVML)
 *         memory_ledger        path of the machine's memory ledger (default: $GPUCHECK_FAKE_SCENARIO.ledger)
 *         gpus.N.ctx           CUresult of cuDevicePrimaryCtxRetain / cuCtxCreate (e.g. 2 = out of memory)
 *         gpus.N.sm_count      multiprocessors (default 80); gpus.N.clock_rate_khz, .memory_clock_khz,
 *                              .memory_bus_width, .l2_cache_bytes (defaults: an A100's); other shape
 *                              attributes are an A100's
 *         kernels.launch       CUresult of cuLaunchKernel (default 0: accepted and not run, see below)
 * GPUCHECK_FAKE_CUINIT_LOG (environment): a file each cuInit appends one line to, "PID CUDA_VISIBLE_DEVICES
 *                              ARGV..." (how the tests count the processes of a run that asked the driver).
 * CUDA ordinal N is the N-th device CUDA_VISIBLE_DEVICES leaves (its index or GPU-uuid names the gpus.M entry).
 *
 * Device memory is shared by the processes of one machine through the ledger (fakeledger.h): what a
 * process holds on gpus.M (cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocPitch_v2, and context_memory
 * while it has a context there) the others no longer see as free, until it frees it, destroys the
 * context or dies. In a context, cuMemGetInfo_v2's free = base free - the ledger's bytes of every live
 * process (this one included) for that GPU, clamped at 0; an allocation (or a context) that does not
 * fit fails with CUDA_ERROR_OUT_OF_MEMORY (2). cuMemHostAlloc is host memory and costs no GPU memory.
 * The virtual memory API (cuMemCreate, cuMemMap) is absent, as TensorFlow 2.21 does not use it by default.
 * Error names and strings follow cuda.h / the CUDA driver API reference.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include <time.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include "fakecfg.h"
#include "fakeledger.h"

typedef int CUresult;
typedef int CUdevice;

static int initialised = 0;

struct errname { int code; const char *name; const char *text; };
static const struct errname ERRORS[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct errname *find_error(int code) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == code) return &ERRORS[i];
    return NULL;
}

CUresult cuGetErrorName(CUresult error, const char **pStr) {
    const struct errname *e = find_error(error);
    if (!e) { *pStr = NULL; return 1; }
    *pStr = e->name;
    return 0;
}

CUresult cuGetErrorString(CUresult error, const char **pStr) {
    const struct errname *e = find_error(error);
    if (!e) { *pStr = NULL; return 1; }
    *pStr = e->text;
    return 0;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return 1;
    *v = (int)cfg_int("cuda.driver_version", 12040);
    return 0;
}

/* How many devices CUDA_VISIBLE_DEVICES leaves, read as the driver reads it: entries up to the first
 * invalid one (not an index below the device count, not a GPU-/MIG- id); unset leaves them all. */
static int visible_devices(int count) {
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (!env) return count;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        long idx = strtol(tok, &end, 10);
        int is_index = end != tok && *end == '\0';
        int is_id = strncmp(tok, "GPU-", 4) == 0 || strncmp(tok, "MIG-", 4) == 0;
        if (!(is_id || (is_index && idx >= 0 && idx < count))) break;
        n++;
    }
    return n;
}

/* One line per cuInit to $GPUCHECK_FAKE_CUINIT_LOG: the pid, CUDA_VISIBLE_DEVICES ("-" unset), the argv. */
static void log_cuinit(void) {
    const char *path = getenv("GPUCHECK_FAKE_CUINIT_LOG");
    if (!path || !*path) return;
    char line[4096], cmd[2048];
    ssize_t got = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        got = read(fd, cmd, sizeof cmd - 1);
        close(fd);
    }
    if (got < 0) got = 0;
    for (ssize_t i = 0; i < got; i++)
        if (cmd[i] == '\0' || cmd[i] == '\n') cmd[i] = ' ';
    cmd[got] = '\0';
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    int n = snprintf(line, sizeof line, "%ld %s %s\n", (long)getpid(), cvd ? cvd : "-", cmd);
    if (n <= 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    /* One write with O_APPEND: lines of concurrent processes do not interleave. */
    if (write(fd, line, (size_t)n) < 0) { /* nothing to do: a trace */ }
    close(fd);
}

CUresult cuInit(unsigned int flags) {
    (void)flags;
    log_cuinit();
    const char *what = cfg_get("cuda.init");
    cfg_misbehave(what);
    int code = what ? atoi(what) : 0;
    if (code == 0 && visible_devices((int)cfg_int("gpus.count", 0)) == 0) code = 100;
    if (code == 0) initialised = 1;
    return code;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialised) return 3;
    *count = visible_devices((int)cfg_int("gpus.count", 0));
    return 0;
}

/* The gpus.M entry behind CUDA ordinal ORDINAL, as CUDA_VISIBLE_DEVICES reorders and filters them; -1 if none. */
static int device_slot(int ordinal) {
    int count = (int)cfg_int("gpus.count", 0);
    if (ordinal < 0 || ordinal >= visible_devices(count)) return -1;
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (!env) return ordinal;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        if (n != ordinal) continue;
        if (strncmp(tok, "GPU-", 4) == 0) {
            for (int m = 0; m < count; m++) {
                const char *u = cfg_getf("gpus.%d.%s", m, "uuid");
                if (u && strncmp(u, tok, strlen(tok)) == 0) return m;
            }
            return ordinal;
        }
        return (int)strtol(tok, NULL, 10);
    }
    return -1;
}

static long long gpu_int(int m, const char *field, long long dflt) {
    const char *v = cfg_getf("gpus.%d.%s", m, field);
    return v && *v ? strtoll(v, NULL, 0) : dflt;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    if (!initialised) return 3;
    if (device_slot(ordinal) < 0) return 101;
    *dev = ordinal;
    return 0;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    const char *v = cfg_getf("gpus.%d.%s", m, "name");
    snprintf(name, (size_t)len, "%s", v ? v : "Fake GPU");
    return 0;
}

/* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76 (cuda.h, CUdevice_attribute);
 * PCI_BUS_ID = 33, PCI_DEVICE_ID = 34, PCI_DOMAIN_ID = 50 come from gpus.N.pci_bus_id. Other attributes of
 * the enum are 0. A number outside CUdevice_attribute (1 to CU_DEVICE_ATTRIBUTE_MAX - 1; 147 is the last in
 * CUDA 13.0's cuda.h) is refused with CUDA_ERROR_INVALID_VALUE, and an ordinal that is no device with
 * CUDA_ERROR_INVALID_DEVICE, as the driver API reference lists for cuDeviceGetAttribute
 * (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html): a probe that asks a wrong
 * number reads an error, not a plausible 0. */
#define FAKE_CU_DEVICE_ATTRIBUTE_MAX 148
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    if (!pi || attrib < 1 || attrib >= FAKE_CU_DEVICE_ATTRIBUTE_MAX) return 1;
    char key[64];
    unsigned dom = 0, bus = 0, slot = 0;
    const char *pci = cfg_getf("gpus.%d.%s", m, "pci_bus_id");
    if (pci) sscanf(pci, "%x:%x:%x", &dom, &bus, &slot);
    switch (attrib) {
    case 75: snprintf(key, sizeof key, "gpus.%d.cc_major", m); *pi = (int)cfg_int(key, 7); break;
    case 76: snprintf(key, sizeof key, "gpus.%d.cc_minor", m); *pi = (int)cfg_int(key, 5); break;
    case 33: *pi = (int)bus; break;
    case 34: *pi = (int)slot; break;
    case 50: *pi = (int)dom; break;
    /* What a CUDA device reports of its shape (CUdevice_attribute numbers from cuda.h). */
    case 16: snprintf(key, sizeof key, "gpus.%d.sm_count", m); *pi = (int)cfg_int(key, 80); break;
    case 1: case 2: case 3: *pi = 1024; break;                 /* max threads per block, block dims x/y */
    case 4: *pi = 64; break;                                   /* max block dim z */
    case 5: *pi = 2147483647; break;                           /* max grid dim x */
    case 6: case 7: *pi = 65535; break;                        /* max grid dims y/z */
    case 8: *pi = 49152; break;                                /* shared memory per block */
    case 10: *pi = 32; break;                                  /* warp size */
    case 12: case 82: *pi = 65536; break;                      /* registers per block / per multiprocessor */
    case 13: *pi = (int)gpu_int(m, "clock_rate_khz", 1410000); break;     /* max SM clock, kHz */
    case 36: *pi = (int)gpu_int(m, "memory_clock_khz", 1215000); break;   /* memory clock rate, kHz */
    case 37: *pi = (int)gpu_int(m, "memory_bus_width", 5120); break;      /* global memory bus width, bits */
    case 38: *pi = (int)gpu_int(m, "l2_cache_bytes", 40 << 20); break;    /* L2 cache size */
    case 39: *pi = 2048; break;                                /* max threads per multiprocessor */
    case 81: *pi = 167936; break;                              /* shared memory per multiprocessor */
    case 97: *pi = 166912; break;                              /* shared memory per block, opt-in */
    case 41: case 15: case 40: case 83: case 89: *pi = 1; break; /* unified addressing, overlap, async engines, managed memory, concurrent managed access */
    default: *pi = 0;
    }
    return 0;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    CUresult r = cuDeviceGetAttribute(major, 75, dev);
    return r ? r : cuDeviceGetAttribute(minor, 76, dev);
}

/* cuDeviceTotalMem: the memory NVML counts, less what the driver reserves. */
static unsigned long long total_memory(int m) {
    long long total = gpu_int(m, "memory_total", 16LL << 30);
    long long reserved = gpu_int(m, "memory_reserved", 0);
    return (unsigned long long)(total > reserved ? total - reserved : 0);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    *bytes = (size_t)total_memory(m);
    return 0;
}

CUresult cuDeviceGetPCIBusId(char *out, int len, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    const char *v = cfg_getf("gpus.%d.%s", m, "cuda_pci_bus_id");
    if (!v || !*v) v = cfg_getf("gpus.%d.%s", m, "pci_bus_id");
    snprintf(out, (size_t)len, "%s", v ? v : "00000000:00:00.0");
    return 0;
}

typedef struct { unsigned char bytes[16]; } CUuuid;

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    const char *v = cfg_getf("gpus.%d.%s", m, "uuid");
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    if (!v) { uuid->bytes[15] = (unsigned char)m; return 0; }
    if (strncmp(v, "GPU-", 4) == 0) v += 4;
    int i = 0;
    for (const char *c = v; *c && i < 32; c++) {
        int d;
        if (*c >= '0' && *c <= '9') d = *c - '0';
        else if (*c >= 'a' && *c <= 'f') d = *c - 'a' + 10;
        else if (*c >= 'A' && *c <= 'F') d = *c - 'A' + 10;
        else continue;
        uuid->bytes[i / 2] |= (unsigned char)(i % 2 ? d : d << 4);
        i++;
    }
    return 0;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

/* ---- GPU memory of this process, kept in the machine's ledger ----------------------------------- */
#define MAX_SLOTS 64
static pthread_mutex_t memory_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long held[MAX_SLOTS]; /* this process's bytes per gpus.M: allocations + context */
static int held_pid = 0;                  /* a forked child starts with nothing */

/* Free memory of gpus.M before the processes of this machine take their share. */
static unsigned long long base_free(int m) {
    long long free_b = gpu_int(m, "memory_free", -1);
    if (free_b >= 0) return (unsigned long long)free_b;
    unsigned long long total = total_memory(m);
    unsigned long long used = (unsigned long long)gpu_int(m, "memory_used", 0);
    return total > used ? total - used : 0;
}

/* Change this process's bytes on gpus.M by DELTA (memory_lock held); growing fails with 2 (out of
 * memory) if it does not fit. */
static CUresult charge_locked(int m, long long delta) {
    if (m < 0 || m >= MAX_SLOTS) return 1;
    if (held_pid != (int)getpid()) {
        memset(held, 0, sizeof held);
        held_pid = (int)getpid();
    }
    if (delta == 0) return 0;
    unsigned long long old = held[m];
    unsigned long long now = delta > 0 ? old + (unsigned long long)delta
                                       : (old > (unsigned long long)-delta ? old + (unsigned long long)delta : 0);
    CUresult r = (CUresult)ledger_set(m, old, now, base_free(m));
    if (r == 0) held[m] = now;
    return r;
}

static CUresult charge(int m, long long delta) {
    pthread_mutex_lock(&memory_lock);
    CUresult r = charge_locked(m, delta);
    pthread_mutex_unlock(&memory_lock);
    return r;
}

/* What this process holds on gpus.M. */
static unsigned long long held_on(int m) {
    pthread_mutex_lock(&memory_lock);
    unsigned long long v = held_pid == (int)getpid() ? held[m] : 0;
    pthread_mutex_unlock(&memory_lock);
    return v;
}

/* Contexts: one primary context per device; the current one is what cuMemGetInfo answers about. A
 * context holds gpus.N.context_memory while it lives (retains and creations counted, released at 0). */
typedef struct { int slot; int ordinal; } FakeCtx;
static FakeCtx contexts[MAX_SLOTS];
static int context_refs[MAX_SLOTS];
static __thread FakeCtx *current = NULL; /* per thread, as the driver keeps it */
static void release_slot_blocks(int m);

static CUresult make_context(void **ctx, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0 || m >= MAX_SLOTS) return 101;
    const char *err = cfg_getf("gpus.%d.%s", m, "ctx");
    cfg_misbehave(err);
    if (err && atoi(err) != 0) return atoi(err);
    pthread_mutex_lock(&memory_lock);
    if (context_refs[m] == 0) {
        CUresult r = charge_locked(m, gpu_int(m, "context_memory", 0));
        if (r) { /* no room for the context itself: CUDA_ERROR_OUT_OF_MEMORY */
            pthread_mutex_unlock(&memory_lock);
            return r;
        }
    }
    context_refs[m]++;
    pthread_mutex_unlock(&memory_lock);
    contexts[m].slot = m;
    contexts[m].ordinal = dev;
    *ctx = &contexts[m];
    return 0;
}

/* One reference fewer on gpus.M's context; the last one destroys it, and with it its memory. */
static CUresult drop_context(int m) {
    if (m < 0 || m >= MAX_SLOTS) return 101;
    pthread_mutex_lock(&memory_lock);
    int last = context_refs[m] == 1;
    if (context_refs[m] > 0) context_refs[m]--;
    if (last) {
        release_slot_blocks(m); /* memory_lock, then blocks_lock: nothing takes them the other way round */
        charge_locked(m, -(long long)(held_pid == (int)getpid() ? held[m] : 0));
    }
    pthread_mutex_unlock(&memory_lock);
    if (last && current == &contexts[m]) current = NULL; /* this thread's; others keep a stale handle, as with a real driver */
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice dev) { return make_context(ctx, dev); }
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    return drop_context(m);
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return cuDevicePrimaryCtxRelease(dev); }

CUresult cuCtxCreate_v2(void **ctx, unsigned int flags, CUdevice dev) {
    (void)flags;
    CUresult r = make_context(ctx, dev);
    if (r == 0) current = (FakeCtx *)*ctx;
    return r;
}

CUresult cuCtxDestroy_v2(void *ctx) {
    if (!ctx) return 201;
    if (current == ctx) current = NULL;
    return drop_context(((FakeCtx *)ctx)->slot);
}

CUresult cuCtxSetCurrent(void *ctx) { current = (FakeCtx *)ctx; return 0; }
CUresult cuCtxPushCurrent_v2(void *ctx) { current = (FakeCtx *)ctx; return 0; }
CUresult cuCtxPopCurrent_v2(void **ctx) { if (ctx) *ctx = current; current = NULL; return 0; }

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    if (!free_bytes || !total_bytes) return 1;
    int m = current->slot;
    /* The others' bytes from the ledger, this process's own from memory (also without a ledger). */
    unsigned long long used = ledger_used(m, 1) + held_on(m);
    unsigned long long base = base_free(m);
    *free_bytes = (size_t)(base > used ? base - used : 0);
    *total_bytes = (size_t)total_memory(m);
    return 0;
}

/* ---- A device that does not execute kernels ----------------------------------------------------
 * Enough of the driver API for TensorFlow to create its GPU device and run ops on it: device memory
 * is host memory (mmap, reserved lazily), streams and events complete at once, copies and memsets
 * are done on the spot, host callbacks run inline, and kernel launches are accepted and do nothing
 * (kernels.launch = an int CUresult makes them fail instead). A kernel that does not run leaves its
 * output as it was: this models a GPU whose results are silently wrong.
 */
typedef unsigned long long CUdeviceptr;

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    if (!initialised) return 3;
    if (device_slot(dev) < 0) return 101;
    if (flags) *flags = 0;
    if (active) *active = 0;
    return 0;
}
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) { (void)flags; return device_slot(dev) < 0 ? 101 : 0; }
CUresult cuCtxGetCurrent(void **ctx) { if (ctx) *ctx = current; return 0; }
CUresult cuCtxGetDevice(CUdevice *dev) {
    if (!current) return 201;
    if (dev) *dev = current->ordinal;
    return 0;
}
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) { if (least) *least = 0; if (greatest) *greatest = -5; return 0; }
CUresult cuCtxSetLimit(int limit, size_t value) { (void)limit; (void)value; return 0; }
CUresult cuCtxGetLimit(size_t *value, int limit) { (void)limit; if (value) *value = 0; return 0; }
CUresult cuCtxEnablePeerAccess(void *peer, unsigned int flags) { (void)peer; (void)flags; return 0; }
CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) { (void)a; (void)b; if (can) *can = 0; return 0; }

static void *host_block(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
/* Live blocks: their size, so cuMemFree can unmap them, and the gpus.M whose memory they hold
 * (-1: host memory; -2: device memory whose context was destroyed, given back already). */
#define MAX_BLOCKS 4096
static struct { void *p; size_t n; int slot; } blocks[MAX_BLOCKS];
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static CUresult alloc_block(CUdeviceptr *out, size_t bytes, int slot) {
    if (!out) return 1;
    if (slot >= 0) {
        CUresult r = charge(slot, (long long)bytes);
        if (r) return r;
    }
    void *p = host_block(bytes);
    int kept = 0;
    if (p) {
        pthread_mutex_lock(&blocks_lock);
        for (int i = 0; i < MAX_BLOCKS && !kept; i++)
            if (!blocks[i].p) { blocks[i].p = p; blocks[i].n = bytes; blocks[i].slot = slot; kept = 1; }
        pthread_mutex_unlock(&blocks_lock);
        if (!kept) munmap(p, bytes ? bytes : 1); /* the table is full: out of memory */
    }
    if (!kept) {
        if (slot >= 0) charge(slot, -(long long)bytes);
        return 2;
    }
    *out = (CUdeviceptr)(uintptr_t)p;
    return 0;
}
static CUresult free_block(void *p) {
    int slot = -1;
    size_t n = 0;
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p == p) {
            munmap(p, blocks[i].n ? blocks[i].n : 1);
            blocks[i].p = NULL;
            slot = blocks[i].slot;
            n = blocks[i].n;
            break;
        }
    pthread_mutex_unlock(&blocks_lock);
    if (slot >= 0) charge(slot, -(long long)n);
    return 0;
}
/* A destroyed context takes its device memory with it (the blocks stay mapped: a stale pointer reads
 * what it read, it does not crash the fake); the caller drops the bytes from the ledger. */
static void release_slot_blocks(int m) {
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p && blocks[i].slot == m) blocks[i].slot = -2;
    pthread_mutex_unlock(&blocks_lock);
}
/* Device allocations need a current context (CUDA_ERROR_INVALID_CONTEXT otherwise), whose GPU pays. */
static CUresult alloc_device(CUdeviceptr *dptr, size_t bytes) {
    if (!current) return 201;
    if (!dptr) return 1;
    return alloc_block(dptr, bytes, current->slot);
}
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) { return alloc_device(dptr, bytes); }
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags) { (void)flags; return alloc_device(dptr, bytes); }
/* Rows padded to 512 bytes (the pitch a real driver picks varies by GPU; callers must use the one returned). */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem) {
    if (!pitch || (elem != 4 && elem != 8 && elem != 16) || width == 0 || height == 0) return 1;
    size_t p = (width + 511) / 512 * 512;
    CUresult r = alloc_device(dptr, p * height);
    if (r == 0) *pitch = p;
    return r;
}
CUresult cuMemFree_v2(CUdeviceptr dptr) { return free_block((void *)(uintptr_t)dptr); }
CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    (void)flags;
    CUdeviceptr d;
    CUresult r = alloc_block(&d, bytes, -1);
    if (r == 0) *pp = (void *)(uintptr_t)d;
    return r;
}
CUresult cuMemAllocHost_v2(void **pp, size_t bytes) { return cuMemHostAlloc(pp, bytes, 0); }
CUresult cuMemFreeHost(void *p) { return free_block(p); }
CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) { (void)p; (void)bytes; (void)flags; return 0; }
CUresult cuMemHostUnregister(void *p) { (void)p; return 0; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags) { (void)flags; *d = (CUdeviceptr)(uintptr_t)p; return 0; }
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr) {
    CUresult r = 1;
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < MAX_BLOCKS && r; i++) {
        uintptr_t b = (uintptr_t)blocks[i].p;
        if (b && dptr >= b && dptr < b + blocks[i].n) {
            if (base) *base = b;
            if (size) *size = blocks[i].n;
            r = 0;
        }
    }
    pthread_mutex_unlock(&blocks_lock);
    return r;
}
/* CUpointer_attribute: CONTEXT = 1 (a CUcontext), MEMORY_TYPE = 2 (unsigned int, 2 = device),
 * DEVICE_POINTER = 3 (CUdeviceptr), HOST_POINTER = 4 (void *), IS_MANAGED = 8 (a boolean, read as an
 * unsigned int by XLA's CudaExecutor::GetPointerMemorySpace, which TensorFlow 2.21 asks first when it
 * frees a buffer: xla/stream_executor/cuda/cuda_executor.cc), DEVICE_ORDINAL = 9 (int); others are
 * refused rather than answered with a value of the wrong size. The fake keeps no managed memory apart
 * (cuMemAllocManaged is device memory here), so nothing is managed. */
CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr) {
    if (!data) return 1;
    switch (attribute) {
    case 1: *(void **)data = current; return 0;
    case 2: *(unsigned int *)data = 2; return 0;
    case 3: *(CUdeviceptr *)data = ptr; return 0;
    case 4: *(void **)data = (void *)(uintptr_t)ptr; return 0;
    case 8: *(unsigned int *)data = 0; return 0;
    case 9: *(int *)data = current ? current->ordinal : 0; return 0;
    default: return 1;
    }
}

/* Copies and memsets: done when asked (every stream is synchronous). */
#define COPY(name, ...) CUresult name(__VA_ARGS__)
COPY(cuMemcpy, CUdeviceptr dst, CUdeviceptr src, size_t n) { memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n); return 0; }
COPY(cuMemcpyAsync, CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) { (void)s; return cuMemcpy(dst, src, n); }
COPY(cuMemcpyHtoD_v2, CUdeviceptr dst, const void *src, size_t n) { memmove((void *)(uintptr_t)dst, src, n); return 0; }
COPY(cuMemcpyDtoH_v2, void *dst, CUdeviceptr src, size_t n) { memmove(dst, (void *)(uintptr_t)src, n); return 0; }
COPY(cuMemcpyDtoD_v2, CUdeviceptr dst, CUdeviceptr src, size_t n) { return cuMemcpy(dst, src, n); }
COPY(cuMemcpyHtoDAsync_v2, CUdeviceptr dst, const void *src, size_t n, void *s) { (void)s; return cuMemcpyHtoD_v2(dst, src, n); }
COPY(cuMemcpyDtoHAsync_v2, void *dst, CUdeviceptr src, size_t n, void *s) { (void)s; return cuMemcpyDtoH_v2(dst, src, n); }
COPY(cuMemcpyDtoDAsync_v2, CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) { (void)s; return cuMemcpy(dst, src, n); }
COPY(cuMemsetD8_v2, CUdeviceptr d, unsigned char v, size_t n) { memset((void *)(uintptr_t)d, v, n); return 0; }
COPY(cuMemsetD8Async, CUdeviceptr d, unsigned char v, size_t n, void *s) { (void)s; return cuMemsetD8_v2(d, v, n); }
COPY(cuMemsetD16_v2, CUdeviceptr d, unsigned short v, size_t n) { unsigned short *p = (unsigned short *)(uintptr_t)d; for (size_t i = 0; i < n; i++) p[i] = v; return 0; }
COPY(cuMemsetD16Async, CUdeviceptr d, unsigned short v, size_t n, void *s) { (void)s; return cuMemsetD16_v2(d, v, n); }
COPY(cuMemsetD32_v2, CUdeviceptr d, unsigned int v, size_t n) { unsigned int *p = (unsigned int *)(uintptr_t)d; for (size_t i = 0; i < n; i++) p[i] = v; return 0; }
COPY(cuMemsetD32Async, CUdeviceptr d, unsigned int v, size_t n, void *s) { (void)s; return cuMemsetD32_v2(d, v, n); }

/* Streams and events: everything has completed by the time it is asked about. */
static int handles[1];
CUresult cuStreamCreate(void **s, unsigned int flags) { (void)flags; *s = &handles[0]; return 0; }
CUresult cuStreamCreateWithPriority(void **s, unsigned int flags, int prio) { (void)prio; return cuStreamCreate(s, flags); }
CUresult cuStreamDestroy_v2(void *s) { (void)s; return 0; }
CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }
CUresult cuStreamQuery(void *s) { (void)s; return 0; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned int flags) { (void)s; (void)e; (void)flags; return 0; }
CUresult cuStreamGetPriority(void *s, int *prio) { (void)s; if (prio) *prio = 0; return 0; }
CUresult cuStreamIsCapturing(void *s, int *status) { (void)s; if (status) *status = 0; return 0; }
CUresult cuStreamGetFlags(void *s, unsigned int *flags) { (void)s; if (flags) *flags = 0; return 0; }
CUresult cuEventCreate(void **e, unsigned int flags) { (void)flags; *e = &handles[0]; return 0; }
CUresult cuEventDestroy_v2(void *e) { (void)e; return 0; }
CUresult cuEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
CUresult cuEventQuery(void *e) { (void)e; return 0; }
CUresult cuEventSynchronize(void *e) { (void)e; return 0; }
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { (void)a; (void)b; if (ms) *ms = 0.0f; return 0; }
typedef void (*host_fn)(void *);
CUresult cuLaunchHostFunc(void *s, host_fn fn, void *data) { (void)s; if (fn) fn(data); return 0; }
typedef void (*stream_cb)(void *, CUresult, void *);
CUresult cuStreamAddCallback(void *s, stream_cb fn, void *data, unsigned int flags) { (void)flags; if (fn) fn(s, 0, data); return 0; }

/* Modules and kernels: loaded as opaque handles; a launch is accepted and does nothing. */
static int modules[1];
static CUresult launch_result(void) { return (CUresult)cfg_int("kernels.launch", 0); }
CUresult cuModuleLoadData(void **m, const void *image) { (void)image; *m = &modules[0]; return 0; }
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned int n, void *o, void **v) { (void)n; (void)o; (void)v; return cuModuleLoadData(m, image); }
CUresult cuModuleLoadFatBinary(void **m, const void *image) { return cuModuleLoadData(m, image); }
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { (void)m; (void)name; *f = &modules[0]; return 0; }
CUresult cuModuleGetGlobal_v2(CUdeviceptr *d, size_t *n, void *m, const char *name) {
    (void)m; (void)name;
    static char globals[1 << 16];
    if (d) *d = (CUdeviceptr)(uintptr_t)globals;
    if (n) *n = sizeof globals;
    return 0;
}
CUresult cuFuncGetAttribute(int *v, int attrib, void *f) { (void)f; if (v) *v = attrib == 0 ? 1024 : 0; return 0; }
CUresult cuFuncSetAttribute(void *f, int attrib, int v) { (void)f; (void)attrib; (void)v; return 0; }
CUresult cuFuncSetCacheConfig(void *f, int c) { (void)f; (void)c; return 0; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int block, size_t smem) { (void)f; (void)block; (void)smem; if (n) *n = 1; return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *s, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)s; (void)params; (void)extra;
    return launch_result();
}
/* A TMA tensor map (compute capability >= 9.0) is a 128-byte descriptor the driver encodes on the host
 * (cuda.h: CUtensorMap, CU_TENSOR_MAP_NUM_QWORDS = 16 cuuint64_t aligned to 128 bytes; cuTensorMapEncodeTiled). XLA's autotuner
 * tries TMA configurations of its Triton kernels on an H100 (xla/stream_executor/cuda/cuda_executor.cc,
 * CreateTensorMap): the fake encodes an empty one, as launches are accepted and not run. */
CUresult cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *address, const unsigned long long *dims,
                                const unsigned long long *strides, const unsigned *box, const unsigned *element_strides,
                                int interleave, int swizzle, int l2_promotion, int oob_fill) {
    (void)dtype; (void)address; (void)strides; (void)element_strides; (void)interleave; (void)swizzle; (void)l2_promotion; (void)oob_fill;
    if (!map || rank < 1 || rank > 5 || !dims || !box) return 1;
    memset(map, 0, 128);
    return 0;
}
CUresult cuLaunchKernelEx(const void *config, void *f, void **params, void **extra) {
    (void)config; (void)f; (void)params; (void)extra;
    return launch_result();
}

/* CUmoduleLoadingMode (cuda.h): CU_MODULE_EAGER_LOADING = 1, CU_MODULE_LAZY_LOADING = 2, as CUDA_MODULE_LOADING
 * chooses it (lazy by default since CUDA 12.2). The CUDA 13 runtime asks it while it initialises and takes its
 * absence for a driver too old ("The NVIDIA driver on your system is too old (found version 13000)"). */
CUresult cuModuleGetLoadingMode(int *mode) {
    if (!mode) return 1;
    const char *env = getenv("CUDA_MODULE_LOADING");
    *mode = env && strcmp(env, "EAGER") == 0 ? 1 : 2;
    return 0;
}

/* ---- Entry points by name, as the CUDA runtime gets them --------------------------------------------
 * The CUDA 12 and 13 runtimes (libcudart.so.12/.13 of the nvidia-cuda-runtime wheels) dlsym only cuGetProcAddress_v2,
 * cuGetProcAddress, cuInit, cuDriverGetVersion and cuGetExportTable, and ask cuGetProcAddress_v2 for every other
 * entry point by its base name and the CUDA version of the ABI they were built against ("cuMemAlloc", 3020 ->
 * cuMemAlloc_v2; "cuCtxGetDevice", 13000 -> cuCtxGetDevice_v2, whose signature differs from 2000's). FAKE_PROCS lists,
 * per base name, the version from which each ABI holds; the newest at or below the version asked is handed out, and
 * a NULL one is an ABI this fake does not implement. Found: CUDA_SUCCESS, *symbolStatus =
 * CU_GET_PROC_ADDRESS_SUCCESS (0); unknown name: CUDA_ERROR_NOT_FOUND (500) and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
 * (1); a name known only from a later version: 500 and CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT (2) (driver API
 * reference, cuGetProcAddress). The flag CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (2) asks for the _ptds/_ptsz
 * variant: the same function here, where every stream completes at once.
 *
 * cuGetExportTable: the runtime's private tables (their layouts are not published) are refused with
 * CUDA_ERROR_NOT_FOUND. What the CUDA 13 runtime asks past them is in docs/PITFALLS.md ("PyTorch's CUDA build on
 * the fakes"): it stops at an integrity check no fake can answer.
 *
 * GPUCHECK_FAKE_CUDA_TRACE (environment): a file each cuGetProcAddress and cuGetExportTable call appends a line to
 * ("proc cuMemAlloc 3020 0 found", "export a094798c-2e74-2e74-93f2-0800200c0a66 refused"). */
#include <stdarg.h>

static void fake_trace(const char *fmt, ...) {
    const char *path = getenv("GPUCHECK_FAKE_CUDA_TRACE");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
CUresult cuGetExportTable(const void **table, const CUuuid *id);

struct fake_proc { const char *name; int since; void *fn; };
#define P(name, since, fn) {name, since, (void *)(fn)}
#define SAME(name, since) P(#name, since, name)
#define V2(name, since) P(#name, since, name##_v2)
#define NEWER(name, since) P(#name, since, NULL)
static const struct fake_proc FAKE_PROCS[] = {
    SAME(cuGetErrorName, 6000), SAME(cuGetErrorString, 6000), SAME(cuInit, 2000), SAME(cuDriverGetVersion, 2020),
    SAME(cuGetProcAddress, 11030), P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    SAME(cuGetExportTable, 3000),
    SAME(cuDeviceGet, 2000), SAME(cuDeviceGetCount, 2000), SAME(cuDeviceGetName, 2000),
    SAME(cuDeviceGetAttribute, 2000), SAME(cuDeviceComputeCapability, 2000), V2(cuDeviceTotalMem, 3020),
    SAME(cuDeviceGetPCIBusId, 4010), SAME(cuDeviceGetUuid, 9020), V2(cuDeviceGetUuid, 11040),
    SAME(cuDeviceCanAccessPeer, 4000),
    SAME(cuDevicePrimaryCtxRetain, 7000), SAME(cuDevicePrimaryCtxRelease, 7000), V2(cuDevicePrimaryCtxRelease, 11000),
    SAME(cuDevicePrimaryCtxGetState, 7000), V2(cuDevicePrimaryCtxSetFlags, 11000),
    V2(cuCtxCreate, 3020), NEWER(cuCtxCreate, 11040), V2(cuCtxDestroy, 4000), SAME(cuCtxSetCurrent, 4000),
    SAME(cuCtxGetCurrent, 4000), V2(cuCtxPushCurrent, 4000), V2(cuCtxPopCurrent, 4000),
    SAME(cuCtxGetDevice, 2000), NEWER(cuCtxGetDevice, 13000), SAME(cuCtxSynchronize, 2000),
    NEWER(cuCtxSynchronize, 13000), SAME(cuCtxGetStreamPriorityRange, 5050), SAME(cuCtxSetLimit, 3010),
    SAME(cuCtxGetLimit, 3010), SAME(cuCtxEnablePeerAccess, 4000),
    V2(cuMemGetInfo, 3020), V2(cuMemAlloc, 3020), SAME(cuMemAllocManaged, 6000), V2(cuMemAllocPitch, 3020),
    V2(cuMemFree, 3020), SAME(cuMemHostAlloc, 2020), V2(cuMemAllocHost, 3020), SAME(cuMemFreeHost, 2000),
    V2(cuMemHostRegister, 6050), SAME(cuMemHostUnregister, 4000), V2(cuMemHostGetDevicePointer, 3020),
    V2(cuMemGetAddressRange, 3020), SAME(cuPointerGetAttribute, 4000),
    SAME(cuMemcpy, 4000), SAME(cuMemcpyAsync, 4000), V2(cuMemcpyHtoD, 3020), V2(cuMemcpyDtoH, 3020),
    V2(cuMemcpyDtoD, 3020), V2(cuMemcpyHtoDAsync, 3020), V2(cuMemcpyDtoHAsync, 3020), V2(cuMemcpyDtoDAsync, 3020),
    V2(cuMemsetD8, 3020), SAME(cuMemsetD8Async, 3020), V2(cuMemsetD16, 3020), SAME(cuMemsetD16Async, 3020),
    V2(cuMemsetD32, 3020), SAME(cuMemsetD32Async, 3020),
    SAME(cuStreamCreate, 2000), SAME(cuStreamCreateWithPriority, 5050), V2(cuStreamDestroy, 4000),
    SAME(cuStreamSynchronize, 2000), SAME(cuStreamQuery, 2000), SAME(cuStreamWaitEvent, 3020),
    SAME(cuStreamGetPriority, 5050), SAME(cuStreamGetFlags, 5050), SAME(cuStreamIsCapturing, 10000),
    SAME(cuStreamAddCallback, 5000), SAME(cuLaunchHostFunc, 10000),
    SAME(cuEventCreate, 2000), V2(cuEventDestroy, 4000), SAME(cuEventRecord, 2000), SAME(cuEventQuery, 2000),
    SAME(cuEventSynchronize, 2000), SAME(cuEventElapsedTime, 2000), NEWER(cuEventElapsedTime, 12080),
    SAME(cuModuleLoadData, 2000), SAME(cuModuleLoadDataEx, 2010), SAME(cuModuleLoadFatBinary, 2000),
    SAME(cuModuleUnload, 2000), SAME(cuModuleGetFunction, 2000), V2(cuModuleGetGlobal, 3020),
    SAME(cuModuleGetLoadingMode, 11070),
    SAME(cuFuncGetAttribute, 2020), SAME(cuFuncSetAttribute, 9000), SAME(cuFuncSetCacheConfig, 3000),
    SAME(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050), SAME(cuLaunchKernel, 4000),
    SAME(cuLaunchKernelEx, 11060), SAME(cuTensorMapEncodeTiled, 12000),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    const struct fake_proc *best = NULL;
    int known = 0;
    if (!symbol || !pfn) return 1;
    for (size_t i = 0; i < sizeof FAKE_PROCS / sizeof FAKE_PROCS[0]; i++) {
        if (strcmp(FAKE_PROCS[i].name, symbol) != 0) continue;
        known = 1;
        if (FAKE_PROCS[i].since <= version && (!best || FAKE_PROCS[i].since >= best->since)) best = &FAKE_PROCS[i];
    }
    void *fn = best ? best->fn : NULL;
    fake_trace("proc %s %d %llu %s\n", symbol, version, flags, fn ? "found" : known && !best ? "later" : "missing");
    *pfn = fn;
    if (status) *status = fn ? 0 : known && !best ? 2 : 1;
    return fn ? 0 : 500;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

CUresult cuGetExportTable(const void **table, const CUuuid *id) {
    if (!table || !id) return 1;
    const unsigned char *b = id->bytes;
    fake_trace("export %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x refused\n", b[0], b[1], b[2],
               b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    *table = NULL;
    return 500;
}
