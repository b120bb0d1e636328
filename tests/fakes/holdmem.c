/* holdmem ORDINAL BYTES: hold BYTES of GPU memory on CUDA device ORDINAL until killed.
 * holdmem ORDINAL free-LEAVE: hold all the device has free but LEAVE bytes (free as cuMemGetInfo_v2
 * answers in the helper's own context, so after the helper's context cost).
 *
 * A test helper (tests/fakelibs.py: hold_gpu_memory): it loads libcuda.so.1 the way an application
 * does (dlopen, so LD_LIBRARY_PATH picks the fake driver), calls cuInit, retains and makes current the
 * primary context of the device, and cuMemAlloc_v2(BYTES). On success it prints "held <pid> <bytes>"
 * and sleeps until a signal ends it; the fake driver's memory ledger gives the memory back when it
 * is gone, as a real driver does when a process dies. On failure it prints
 * "failed <function> <CUresult>" and exits with status 1 (2: bad arguments, 3: no libcuda.so.1).
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*cu_init_t)(unsigned int);
typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_retain_t)(void **, int);
typedef int (*cu_set_current_t)(void *);
typedef int (*cu_alloc_t)(unsigned long long *, size_t);
typedef int (*cu_mem_get_info_t)(size_t *, size_t *);

static int fail(const char *function, int code) {
    printf("failed %s %d\n", function, code);
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ORDINAL BYTES\n", argv[0]);
        return 2;
    }
    int ordinal = atoi(argv[1]);
    int leave = strncmp(argv[2], "free-", 5) == 0;
    size_t bytes = (size_t)strtoull(argv[2] + (leave ? 5 : 0), NULL, 0);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cuda) {
        printf("failed dlopen %s\n", dlerror());
        return 3;
    }
    cu_init_t cu_init = (cu_init_t)dlsym(cuda, "cuInit");
    cu_device_get_t cu_device_get = (cu_device_get_t)dlsym(cuda, "cuDeviceGet");
    cu_retain_t cu_retain = (cu_retain_t)dlsym(cuda, "cuDevicePrimaryCtxRetain");
    cu_set_current_t cu_set_current = (cu_set_current_t)dlsym(cuda, "cuCtxSetCurrent");
    cu_alloc_t cu_alloc = (cu_alloc_t)dlsym(cuda, "cuMemAlloc_v2");
    cu_mem_get_info_t cu_mem_get_info = (cu_mem_get_info_t)dlsym(cuda, "cuMemGetInfo_v2");
    if (!cu_init || !cu_device_get || !cu_retain || !cu_set_current || !cu_alloc || !cu_mem_get_info)
        return fail("dlsym", -1);
    int r, dev = 0;
    void *ctx = NULL;
    unsigned long long ptr = 0;
    if ((r = cu_init(0))) return fail("cuInit", r);
    if ((r = cu_device_get(&dev, ordinal))) return fail("cuDeviceGet", r);
    if ((r = cu_retain(&ctx, dev))) return fail("cuDevicePrimaryCtxRetain", r);
    if ((r = cu_set_current(ctx))) return fail("cuCtxSetCurrent", r);
    if (leave) {
        size_t free_b = 0, total_b = 0;
        if ((r = cu_mem_get_info(&free_b, &total_b))) return fail("cuMemGetInfo_v2", r);
        if (free_b < bytes) return fail("cuMemGetInfo_v2", 2); /* less free than it should leave */
        bytes = free_b - bytes;
    }
    if ((r = cu_alloc(&ptr, bytes))) return fail("cuMemAlloc_v2", r);
    printf("held %ld %zu\n", (long)getpid(), bytes);
    fflush(stdout);
    for (;;) pause();
}
