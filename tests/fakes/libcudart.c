/* A fake libcudart.so.<major> (CUDA runtime API) at the C ABI, driven by a scenario.
 *
 * Keys:   cudart.version   int as cudaRuntimeGetVersion returns it (1000*major + 10*minor), default 12050
 *         cudart.load      "crash" / "abort" to misbehave when the library is loaded
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
