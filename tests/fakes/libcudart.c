/* A fake libcudart.so.<major> (CUDA runtime API) at the C ABI, driven by a scenario.
 *
 * Keys:   cudart.version   int as cudaRuntimeGetVersion returns it (1000*major + 10*minor), default 12050
 *         cudart.load      "crash" / "abort" to misbehave when the library is loaded
 *         cudart.get_device  an int cudaError_t for cudaGetDevice (TensorFlow's device creation fails on it)
 *         kernels.launch_runtime  an int cudaError_t for cudaLaunchKernel (default 0: accepted, not run)
 * cudaDriverGetVersion answers cuda.driver_version, like the real runtime asks the driver.
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "fakecfg.h"

typedef int cudaError_t;

__attribute__((constructor)) static void on_load(void) { cfg_misbehave(cfg_get("cudart.load")); }

cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return 1;
    *v = (int)cfg_int("cudart.version", 12050);
    return 0;
}

cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return 1;
    *v = (int)cfg_int("cuda.driver_version", 0);
    return 0;
}

const char *cudaGetErrorString(cudaError_t e) { return e == 0 ? "no error" : "fake CUDA runtime error"; }

/* ---- what TensorFlow's GPU device needs of the runtime (kernel registration, current device) ---- */
#include <stddef.h>
static __thread int current_device = 0;
static void *fatbin_handle;
void **__cudaRegisterFatBinary(void *fat) { (void)fat; return &fatbin_handle; }
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __cudaRegisterFunction(void **h, const char *host_fun, char *device_fun, const char *device_name,
                            int thread_limit, void *tid, void *bid, void *bdim, void *gdim, int *wsize) {
    (void)h; (void)host_fun; (void)device_fun; (void)device_name; (void)thread_limit;
    (void)tid; (void)bid; (void)bdim; (void)gdim; (void)wsize;
}
void __cudaRegisterVar(void **h, char *host_var, char *device_address, const char *device_name, int ext,
                       size_t size, int constant, int global) {
    (void)h; (void)host_var; (void)device_address; (void)device_name; (void)ext; (void)size; (void)constant; (void)global;
}
/* cudart.get_device = an int cudaError_t makes cudaGetDevice fail, as it does where runtime and driver disagree. */
cudaError_t cudaGetDevice(int *d) {
    int r = (int)cfg_int("cudart.get_device", 0);
    if (r) return r;
    if (!d) return 1;
    *d = current_device;
    return 0;
}
/* cudaSetDevice: an ordinal that is no device of this process (0 <= d < cudaGetDeviceCount) is refused with
 * cudaErrorInvalidDevice (101), as the runtime API reference lists (cuda_runtime_api.h, cudaSetDevice). */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int d) {
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r) return r;
    if (d < 0 || d >= count) return 101; /* cudaErrorInvalidDevice */
    current_device = d;
    return 0;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { if (least) *least = 0; if (greatest) *greatest = -5; return 0; }
cudaError_t cudaGetLastError(void) { return 0; }
cudaError_t cudaPeekAtLastError(void) { return 0; }
/* Kernels compiled into TensorFlow are launched through the runtime: accepted, not run (see libcuda.c). */
typedef struct { unsigned x, y, z; } dim3;
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t smem, void *stream) {
    (void)f; (void)grid; (void)block; (void)args; (void)smem; (void)stream;
    return (cudaError_t)cfg_int("kernels.launch_runtime", 0);
}
const char *cudaGetErrorName(cudaError_t e) { return e == 0 ? "cudaSuccess" : "cudaErrorUnknown"; }
/* The runtime asks the driver, as the real one does: the same CUDA_VISIBLE_DEVICES view. */
#include <dlfcn.h>
cudaError_t cudaGetDeviceCount(int *count) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!driver) return 35; /* cudaErrorInsufficientDriver */
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(driver, "cuInit");
    int (*get_count)(int *) = (int (*)(int *))dlsym(driver, "cuDeviceGetCount");
    if (!init || !get_count) return 35;
    int r = init(0);
    if (r == 100) return 100; /* cudaErrorNoDevice */
    if (r != 0) return 999;
    return get_count(count) == 0 ? 0 : 999;
}

/* cudaDeviceProp of CUDA 12 (driver_types.h), its leading fields up to maxThreadsPerMultiProcessor:
 * only these are written, so a caller's larger struct is never overrun; the fields after them are left as
 * the caller had them (nothing TensorFlow's device creation reads). Values come from the driver. */
struct fake_device_prop {
    char name[256];
    unsigned char uuid[16];
    char luid[8];
    unsigned int luidDeviceNodeMask;
    size_t totalGlobalMem, sharedMemPerBlock;
    int regsPerBlock, warpSize;
    size_t memPitch;
    int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
    size_t totalConstMem;
    int major, minor;
    size_t textureAlignment, texturePitchAlignment;
    int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated, canMapHostMemory, computeMode;
    int maxTexture1D, maxTexture1DMipmap, maxTexture1DLinear, maxTexture2D[2], maxTexture2DMipmap[2];
    int maxTexture2DLinear[3], maxTexture2DGather[2], maxTexture3D[3], maxTexture3DAlt[3], maxTextureCubemap;
    int maxTexture1DLayered[2], maxTexture2DLayered[3], maxTextureCubemapLayered[2], maxSurface1D, maxSurface2D[2];
    int maxSurface3D[3], maxSurface1DLayered[2], maxSurface2DLayered[3], maxSurfaceCubemap, maxSurfaceCubemapLayered[2];
    size_t surfaceAlignment;
    int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, pciDomainID, tccDriver, asyncEngineCount;
    int unifiedAddressing, memoryClockRate, memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
};

static void *driver_symbol(const char *name) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    return driver ? dlsym(driver, name) : NULL;
}

cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device) {
    int (*get)(int *, int, int) = (int (*)(int *, int, int))driver_symbol("cuDeviceGetAttribute");
    if (!get) return 35;
    /* The driver's CUDA_ERROR_INVALID_VALUE (an attribute outside the enum) is cudaErrorInvalidValue (1),
     * any other refusal cudaErrorInvalidDevice (101), as cudaDeviceGetAttribute's reference lists both. */
    int r = get(value, attr, device);
    return r == 0 ? 0 : r == 1 ? 1 : 101;
}

cudaError_t cudaGetDeviceProperties_v2(struct fake_device_prop *p, int device) {
    int (*get_name)(char *, int, int) = (int (*)(char *, int, int))driver_symbol("cuDeviceGetName");
    int (*total_mem)(size_t *, int) = (int (*)(size_t *, int))driver_symbol("cuDeviceTotalMem_v2");
    if (!p || !get_name || !total_mem) return 35;
    memset(p, 0, sizeof *p);
    if (get_name(p->name, sizeof p->name, device) != 0) return 101;
    total_mem(&p->totalGlobalMem, device);
    int v = 0;
#define ATTR(field, number) (cudaDeviceGetAttribute(&v, number, device), p->field = v)
    ATTR(maxThreadsPerBlock, 1); ATTR(maxThreadsDim[0], 2); ATTR(maxThreadsDim[1], 3); ATTR(maxThreadsDim[2], 4);
    ATTR(maxGridSize[0], 5); ATTR(maxGridSize[1], 6); ATTR(maxGridSize[2], 7); ATTR(sharedMemPerBlock, 8);
    ATTR(warpSize, 10); ATTR(regsPerBlock, 12); ATTR(clockRate, 13); ATTR(multiProcessorCount, 16);
    ATTR(pciBusID, 33); ATTR(pciDeviceID, 34); ATTR(memoryClockRate, 36); ATTR(memoryBusWidth, 37);
    ATTR(l2CacheSize, 38); ATTR(maxThreadsPerMultiProcessor, 39); ATTR(unifiedAddressing, 41); ATTR(pciDomainID, 50);
    ATTR(major, 75); ATTR(minor, 76); ATTR(asyncEngineCount, 40); ATTR(concurrentKernels, 31);
#undef ATTR
    p->totalConstMem = 65536;
    p->memPitch = 2147483647;
    p->textureAlignment = 512;
    return 0;
}
cudaError_t cudaGetDeviceProperties(struct fake_device_prop *p, int device) { return cudaGetDeviceProperties_v2(p, device); }
/* The <<<grid, block, shmem, stream>>> launch syntax: nvcc's stubs push the configuration, pop it
 * back in the kernel's host stub and call cudaLaunchKernel. */
static __thread struct { dim3 grid, block; size_t shmem; void *stream; } call_config;
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream) {
    call_config.grid = grid; call_config.block = block; call_config.shmem = shmem; call_config.stream = stream;
    return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void **stream) {
    if (grid) *grid = call_config.grid;
    if (block) *block = call_config.block;
    if (shmem) *shmem = call_config.shmem;
    if (stream) *stream = call_config.stream;
    return 0;
}
/* cudaFuncAttributes of CUDA 12, its leading fields (what launch-configuration helpers read). */
struct fake_func_attributes {
    size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
    int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes,
        preferredShmemCarveout;
};
cudaError_t cudaFuncGetAttributes(struct fake_func_attributes *attr, const void *f) {
    (void)f;
    if (!attr) return 1;
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = attr->binaryVersion = 80;
    attr->maxDynamicSharedSizeBytes = 49152;
    attr->preferredShmemCarveout = -1;
    return 0;
}
/* XLA launches the kernels compiled into TensorFlow (its buffer comparator, redzone checker, ...) through
 * the driver API, with the function cudaGetFuncBySymbol gives for their host stub
 * (xla/stream_executor/cuda/cuda_executor.cc, CudaExecutor::LoadKernel of an in-process symbol; CUDA
 * runtime API reference, "Interactions with the CUDA Driver API"; cudaErrorInvalidDeviceFunction = 98 in
 * driver_types.h). Every kernel is accepted, as launches are (the fake driver runs none). */
static int runtime_function;
cudaError_t cudaGetFuncBySymbol(void **function, const void *symbol) {
    if (!function || !symbol) return 98; /* cudaErrorInvalidDeviceFunction */
    *function = &runtime_function;
    return 0;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int block, size_t smem) {
    (void)f; (void)block; (void)smem; if (n) *n = 1; return 0;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *f, int block, size_t smem, unsigned flags) {
    (void)flags; return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, f, block, smem);
}
/* Streams, events, copies and memsets of the runtime: the fake device completes everything at once. */
typedef void (*stream_callback)(void *stream, cudaError_t status, void *data);
cudaError_t cudaStreamAddCallback(void *s, stream_callback fn, void *data, unsigned flags) { (void)flags; if (fn) fn(s, 0, data); return 0; }
typedef void (*host_function)(void *data);
cudaError_t cudaLaunchHostFunc(void *s, host_function fn, void *data) { (void)s; if (fn) fn(data); return 0; }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, void *s) { (void)s; memset(p, v, n); return 0; }
cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return 0; }
cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, int kind, void *s) { (void)kind; (void)s; memmove(d, src, n); return 0; }
cudaError_t cudaMemcpy(void *d, const void *src, size_t n, int kind) { (void)kind; memmove(d, src, n); return 0; }
cudaError_t cudaStreamSynchronize(void *s) { (void)s; return 0; }
cudaError_t cudaStreamQuery(void *s) { (void)s; return 0; }
cudaError_t cudaStreamWaitEvent(void *s, void *e, unsigned flags) { (void)s; (void)e; (void)flags; return 0; }
cudaError_t cudaDeviceSynchronize(void) { return 0; }
static int runtime_handles[1];
cudaError_t cudaEventCreateWithFlags(void **e, unsigned flags) { (void)flags; *e = &runtime_handles[0]; return 0; }
cudaError_t cudaEventCreate(void **e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
cudaError_t cudaEventSynchronize(void *e) { (void)e; return 0; }
cudaError_t cudaEventQuery(void *e) { (void)e; return 0; }
cudaError_t cudaEventDestroy(void *e) { (void)e; return 0; }
cudaError_t cudaFuncSetAttribute(const void *f, int attr, int v) { (void)f; (void)attr; (void)v; return 0; }
cudaError_t cudaFuncSetCacheConfig(const void *f, int c) { (void)f; (void)c; return 0; }
/* The runtime allocates in the current device's primary context, making it current if none is (as the
 * real runtime does): the driver charges the allocation to that GPU (tests/fakes/fakeledger.h). */
static void ensure_context(void) {
    int (*get)(void **) = (int (*)(void **))driver_symbol("cuCtxGetCurrent");
    int (*retain)(void **, int) = (int (*)(void **, int))driver_symbol("cuDevicePrimaryCtxRetain");
    int (*set)(void *) = (int (*)(void *))driver_symbol("cuCtxSetCurrent");
    void *ctx = NULL;
    if (!get || !retain || !set || (get(&ctx) == 0 && ctx)) return;
    if (retain(&ctx, current_device) == 0) set(ctx);
}
cudaError_t cudaMalloc(void **p, size_t n) {
    int (*alloc)(unsigned long long *, size_t) = (int (*)(unsigned long long *, size_t))driver_symbol("cuMemAlloc_v2");
    unsigned long long d = 0;
    ensure_context();
    if (!alloc || alloc(&d, n) != 0) return 2; /* cudaErrorMemoryAllocation */
    *p = (void *)(size_t)d;
    return 0;
}
cudaError_t cudaFree(void *p) {
    int (*release)(unsigned long long) = (int (*)(unsigned long long))driver_symbol("cuMemFree_v2");
    if (release) release((unsigned long long)(size_t)p);
    return 0;
}
