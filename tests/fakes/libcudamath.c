/* One fake for the CUDA math libraries (libcublas, libcublasLt, libcufft, libcusolver, libcusparse,
 * libcurand, libnvJitLink), built under each soname: each answers its own *GetProperty.
 *
 * Keys:   <lib>.version   "major.minor.patch" that <lib>GetProperty reports (libraryPropertyType
 *                         MAJOR_VERSION=0, MINOR_VERSION=1, PATCH_LEVEL=2), e.g. cublas.version=12.5.3
 */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "fakecfg.h"

static int property(const char *lib, const char *dflt, int type, int *value) {
    char key[64];
    snprintf(key, sizeof key, "%s.version", lib);
    const char *v = cfg_str(key, dflt);
    int parts[3] = {0, 0, 0};
    sscanf(v, "%d.%d.%d", &parts[0], &parts[1], &parts[2]);
    if (!value || type < 0 || type > 2) return 1;
    *value = parts[type];
    return 0;
}

int cublasGetProperty(int type, int *value) { return property("cublas", "12.5.3", type, value); }
int cublasLtGetProperty(int type, int *value) { return property("cublasLt", "12.5.3", type, value); }
int cufftGetProperty(int type, int *value) { return property("cufft", "11.2.3", type, value); }
int cusolverGetProperty(int type, int *value) { return property("cusolver", "11.6.3", type, value); }
int cusparseGetProperty(int type, int *value) { return property("cusparse", "12.5.1", type, value); }
int curandGetProperty(int type, int *value) { return property("curand", "10.3.6", type, value); }

int nvJitLinkVersion(unsigned *major, unsigned *minor) {
    int a = 0, b = 0;
    property("nvjitlink", "12.5.82", 0, &a);
    property("nvjitlink", "12.5.82", 1, &b);
    *major = (unsigned)a;
    *minor = (unsigned)b;
    return 0;
}
