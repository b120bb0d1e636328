/* A fake libcuda.so.1 (CUDA driver API) at the C ABI, driven by a scenario.
 *
 * Keys:   cuda.driver_version  int, e.g. 12040 (as cuDriverGetVersion returns it)
 *         cuda.init            an int CUresult for cuInit, or "hang" / "crash" / "abort"
 *         gpus.count           device count after a successful cuInit
 *         gpus.N.name, gpus.N.cc_major, gpus.N.cc_minor, gpus.N.memory_total (bytes), gpus.N.pci_bus_id
 *         gpus.N.uuid          "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (cuDeviceGetUuid)
 *         gpus.N.memory_used   bytes in use by others (cuMemGetInfo's free = total - used), or
 *         gpus.N.memory_free   bytes free, as cuMemGetInfo reports it in a context
 *         gpus.N.ctx           CUresult of cuDevicePrimaryCtxRetain / cuCtxCreate (e.g. 2 = out of memory)
 * CUDA ordinal N is the N-th device CUDA_VISIBLE_DEVICES leaves (its index or GPU-uuid names the gpus.M entry).
 * Error names and strings follow cuda.h / the CUDA driver API reference.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "fakecfg.h"

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

CUresult cuInit(unsigned int flags) {
    (void)flags;
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
 * PCI_BUS_ID = 33, PCI_DEVICE_ID = 34, PCI_DOMAIN_ID = 50 come from gpus.N.pci_bus_id. Others are 0. */
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0) return 101;
    if (!pi) return 1;
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
    default: *pi = 0;
    }
    return 0;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    CUresult r = cuDeviceGetAttribute(major, 75, dev);
    return r ? r : cuDeviceGetAttribute(minor, 76, dev);
}

static unsigned long long total_memory(int m) {
    char key[64];
    snprintf(key, sizeof key, "gpus.%d.memory_total", m);
    return (unsigned long long)cfg_int(key, 16LL << 30);
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
    const char *v = cfg_getf("gpus.%d.%s", m, "pci_bus_id");
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

/* Contexts: one primary context per device; the current one is what cuMemGetInfo answers about. */
typedef struct { int slot; } FakeCtx;
static FakeCtx contexts[64];
static FakeCtx *current = NULL;

static CUresult make_context(void **ctx, CUdevice dev) {
    if (!initialised) return 3;
    int m = device_slot(dev);
    if (m < 0 || m >= 64) return 101;
    const char *err = cfg_getf("gpus.%d.%s", m, "ctx");
    cfg_misbehave(err);
    if (err && atoi(err) != 0) return atoi(err);
    contexts[m].slot = m;
    *ctx = &contexts[m];
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice dev) { return make_context(ctx, dev); }
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { (void)dev; return initialised ? 0 : 3; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return cuDevicePrimaryCtxRelease(dev); }

CUresult cuCtxCreate_v2(void **ctx, unsigned int flags, CUdevice dev) {
    (void)flags;
    CUresult r = make_context(ctx, dev);
    if (r == 0) current = (FakeCtx *)*ctx;
    return r;
}

CUresult cuCtxDestroy_v2(void *ctx) {
    if (current == ctx) current = NULL;
    return 0;
}

CUresult cuCtxSetCurrent(void *ctx) { current = (FakeCtx *)ctx; return 0; }
CUresult cuCtxPushCurrent_v2(void *ctx) { current = (FakeCtx *)ctx; return 0; }
CUresult cuCtxPopCurrent_v2(void **ctx) { if (ctx) *ctx = current; current = NULL; return 0; }

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    int m = current->slot;
    unsigned long long total = total_memory(m);
    char key[64];
    snprintf(key, sizeof key, "gpus.%d.memory_free", m);
    long long free_b = cfg_int(key, -1);
    if (free_b < 0) {
        snprintf(key, sizeof key, "gpus.%d.memory_used", m);
        free_b = (long long)total - cfg_int(key, 0);
    }
    *free_bytes = (size_t)free_b;
    *total_bytes = (size_t)total;
    return 0;
}
