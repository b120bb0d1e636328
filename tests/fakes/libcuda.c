/* A fake libcuda.so.1 (CUDA driver API) at the C ABI, driven by a scenario.
 *
 * Keys:   cuda.driver_version  int, e.g. 12040 (as cuDriverGetVersion returns it)
 *         cuda.init            an int CUresult for cuInit, or "hang" / "crash" / "abort"
 *         gpus.count           device count after a successful cuInit
 *         gpus.N.name, gpus.N.cc_major, gpus.N.cc_minor, gpus.N.memory_total (bytes), gpus.N.pci_bus_id
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
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
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

CUresult cuInit(unsigned int flags) {
    (void)flags;
    const char *what = cfg_get("cuda.init");
    cfg_misbehave(what);
    int code = what ? atoi(what) : 0;
    if (code == 0) initialised = 1;
    return code;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialised) return 3;
    *count = (int)cfg_int("gpus.count", 0);
    return 0;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    if (!initialised) return 3;
    if (ordinal < 0 || ordinal >= cfg_int("gpus.count", 0)) return 101;
    *dev = ordinal;
    return 0;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!initialised) return 3;
    const char *v = cfg_getf("gpus.%d.%s", dev, "name");
    snprintf(name, (size_t)len, "%s", v ? v : "Fake GPU");
    return 0;
}
