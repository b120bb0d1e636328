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

/* ---- cuBLAS as TensorFlow's GPU matmul uses it (libcublas.so.12) --------------------------------
 * Handles are created; GEMMs are accepted and, like every kernel of the fake device (libcuda.c),
 * not executed: the output keeps what it held. blas.create = an int cublasStatus_t makes
 * cublasCreate fail instead (e.g. 3 = CUBLAS_STATUS_ALLOC_FAILED).
 */
static int blas_handle;
int cublasCreate_v2(void **handle) {
    int r = (int)cfg_int("blas.create", 0);
    if (r) return r;
    *handle = &blas_handle;
    return 0;
}
int cublasDestroy_v2(void *h) { (void)h; return 0; }
int cublasSetStream_v2(void *h, void *s) { (void)h; (void)s; return 0; }
int cublasGetStream_v2(void *h, void **s) { (void)h; if (s) *s = NULL; return 0; }
int cublasSetMathMode(void *h, int mode) { (void)h; (void)mode; return 0; }
int cublasGetMathMode(void *h, int *mode) { (void)h; if (mode) *mode = 0; return 0; }
int cublasSetPointerMode_v2(void *h, int mode) { (void)h; (void)mode; return 0; }
int cublasGetPointerMode_v2(void *h, int *mode) { (void)h; if (mode) *mode = 0; return 0; }
int cublasSetWorkspace_v2(void *h, void *w, size_t n) { (void)h; (void)w; (void)n; return 0; }
int cublasSetAtomicsMode(void *h, int mode) { (void)h; (void)mode; return 0; }
int cublasGetVersion_v2(void *h, int *v) {
    (void)h;
    int major = 0, minor = 0, patch = 0;
    property("cublas", "12.5.3", 0, &major);
    property("cublas", "12.5.3", 1, &minor);
    property("cublas", "12.5.3", 2, &patch);
    if (v) *v = major * 10000 + minor * 100 + patch;
    return 0;
}
const char *cublasGetStatusString(int s) { return s == 0 ? "the operation completed successfully" : "the resource allocation failed"; }
const char *cublasGetStatusName(int s) { return s == 0 ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_ALLOC_FAILED"; }
#define GEMM(name) int name() { return (int)cfg_int("blas.gemm", 0); }
GEMM(cublasSgemm_v2) GEMM(cublasDgemm_v2) GEMM(cublasHgemm) GEMM(cublasCgemm_v2) GEMM(cublasZgemm_v2)
GEMM(cublasGemmEx) GEMM(cublasSgemmEx) GEMM(cublasGemmBatchedEx) GEMM(cublasGemmStridedBatchedEx)
GEMM(cublasSgemmStridedBatched) GEMM(cublasDgemmStridedBatched) GEMM(cublasHgemmStridedBatched)
GEMM(cublasSgemmBatched) GEMM(cublasDgemmBatched) GEMM(cublasHgemmBatched)
GEMM(cublasSgemv_v2) GEMM(cublasDgemv_v2)

/* cuBLASLt (libcublasLt.so.12), which TensorFlow's BLAS support creates beside cuBLAS. */
static int lt_objects[64];
int cublasLtCreate(void **h) { *h = &lt_objects[0]; return 0; }
int cublasLtDestroy(void *h) { (void)h; return 0; }
size_t cublasLtGetVersion(void) { int a = 0, b = 0, c = 0; property("cublasLt", "12.5.3", 0, &a); property("cublasLt", "12.5.3", 1, &b); property("cublasLt", "12.5.3", 2, &c); return (size_t)(a * 10000 + b * 100 + c); }
const char *cublasLtGetStatusString(int s) { return cublasGetStatusString(s); }
const char *cublasLtGetStatusName(int s) { return cublasGetStatusName(s); }
#define LT_CREATE(name) int name(void **out) { *out = &lt_objects[1]; return 0; }
#define LT_OK(name) int name() { return 0; }
LT_CREATE(cublasLtMatmulDescCreate) LT_CREATE(cublasLtMatrixLayoutCreate) LT_CREATE(cublasLtMatmulPreferenceCreate)
LT_OK(cublasLtMatmulDescDestroy) LT_OK(cublasLtMatrixLayoutDestroy) LT_OK(cublasLtMatmulPreferenceDestroy)
LT_OK(cublasLtMatmulDescSetAttribute) LT_OK(cublasLtMatrixLayoutSetAttribute) LT_OK(cublasLtMatmulPreferenceSetAttribute)
LT_OK(cublasLtMatmulDescGetAttribute) LT_OK(cublasLtMatrixLayoutGetAttribute)
int cublasLtMatmul() { return (int)cfg_int("blas.gemm", 0); }
