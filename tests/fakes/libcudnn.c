/* A fake libcudnn.so.<major> at the C ABI, driven by a scenario.
 *
 * Keys:   cudnn.version   int as cudnnGetVersion returns it (cuDNN 9: 10000*major + 100*minor + patch), default 90300
 *         cudnn.cudart    int cudnnGetCudartVersion returns, default 12050
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "fakecfg.h"

size_t cudnnGetVersion(void) { return (size_t)cfg_int("cudnn.version", 90300); }
size_t cudnnGetCudartVersion(void) { return (size_t)cfg_int("cudnn.cudart", 12050); }
const char *cudnnGetErrorString(int status) { return status == 0 ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_NOT_INITIALIZED"; }
/* libraryPropertyType MAJOR_VERSION=0, MINOR_VERSION=1, PATCH_LEVEL=2, from cudnn.version. */
int cudnnGetProperty(int type, int *value) {
    long long v = cfg_int("cudnn.version", 90300);
    if (!value) return 3;
    if (type == 0) *value = (int)(v / 10000);
    else if (type == 1) *value = (int)(v / 100 % 100);
    else if (type == 2) *value = (int)(v % 100);
    else return 3;
    return 0;
}

