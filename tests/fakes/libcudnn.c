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
