/* One fake for the CUDA math libraries (libcublas, libcublasLt, libcufft, libcusolver, libcusparse,
 * libcurand, libnvJitLink), built under each soname: each answers its own *GetProperty.
 *
 * Keys:   <lib>.version   "major.minor.patch" that <lib>GetProperty reports (libraryPropertyType
 *                         MAJOR_VERSION=0, MINOR_VERSION=1, PATCH_LEVEL=2), e.g. cublas.version=12.5.3
 *         blas.create     an int cublasStatus_t for cublasCreate (e.g. 3 = CUBLAS_STATUS_ALLOC_FAILED)
 *         blas.gemm       an int cublasStatus_t every GEMM and cublasLtMatmul returns (default 0)
 *         blas.tflops     the fake GPU's GEMM speed in TFLOP/s (a float; absent or 0: instant). A GEMM
 *                         that succeeds sleeps in the calling thread for flops / (tflops * 1e12) s
 *                         before it returns: flops = 2*m*n*k (8*m*n*k for complex types) times the
 *                         batch count of the batched calls. The thread is the one that enqueues the
 *                         kernel, so a benchmark that synchronises at its end measures this speed.
 *         blas.tflops.<dtype>  the same for one dtype, overriding blas.tflops: float32, tf32, float16,
 *                         bfloat16 (also float64, complex64, complex128). In a JSON scenario:
 *                         {"blas": {"tflops": 150, "tflops.float32": 20}}.
 *                         A call's dtype: cublasS* float32, or tf32 when the handle's math mode
 *                         (cublasSetMathMode) is CUBLAS_TF32_TENSOR_OP_MATH (3, low 4 bits);
 *                         cublasH* float16, cublasD* float64, cublasC* / cublasZ* complex64 / complex128.
 *                         cublasGemmEx, cublasGemmBatchedEx, cublasGemmStridedBatchedEx, cublasSgemmEx and
 *                         cublasLtMatmul: from Atype (cudaDataType CUDA_R_32F=0, CUDA_R_64F=1,
 *                         CUDA_R_16F=2, CUDA_C_32F=4, CUDA_C_64F=5, CUDA_R_16BF=14; other types only
 *                         follow blas.tflops); float32 inputs are tf32 with computeType
 *                         CUBLAS_COMPUTE_32F_FAST_TF32 (77) or the handle's TF32 math mode, float16 with
 *                         CUBLAS_COMPUTE_32F_FAST_16F (74), bfloat16 with CUBLAS_COMPUTE_32F_FAST_16BF (75).
 *                         NVIDIA_TF32_OVERRIDE=0 in the environment makes tf32 float32 again, as it
 *                         does in the real libraries.
 *         blas.serial     1: the GEMMs of all the process's GPUs run one at a time (a process-wide lock
 *                         held while a GEMM takes its time), as GPUs time-sliced onto one device do (the
 *                         Kubernetes device plugin's timeSlicing replicas): several GPUs then train no
 *                         faster than one where GEMMs dominate the step. Default 0: GPUs run at once.
 * Environment: GPUCHECK_FAKE_TRACE (any value) makes every GEMM write one line to stderr,
 *         "fake-blas: <function> <dtype> m=.. n=.. k=.. batch=.. sleep_us=..".
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <errno.h>
#include <stdint.h>
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
 * Handles are created (each remembers its math mode); GEMMs are accepted and, like every kernel of
 * the fake device (libcuda.c), not executed: the output keeps what it held. They take the time the
 * scenario's speed gives (blas.tflops, see the top of this file). Signatures and enum values: the
 * cublas_api.h, cublasLt.h and library_types.h of CUDA 12.5 (the TensorFlow 2.21 wheel ships them).
 */
static double blas_tflops(const char *dtype) {
    char key[64];
    snprintf(key, sizeof key, "blas.tflops.%s", dtype);
    const char *v = cfg_get(key);
    if (!v || !*v) v = cfg_get("blas.tflops");
    return v && *v ? strtod(v, NULL) : 0.0;
}

static int tf32_allowed(void) {
    const char *o = getenv("NVIDIA_TF32_OVERRIDE");
    return !(o && strcmp(o, "0") == 0);
}

/* What every GEMM entry point returns: the scenario's status, after the time the scenario's speed gives. */
static int gemm_done(const char *fn, const char *dtype, long long m, long long n, long long k, long long batch) {
    int status = (int)cfg_int("blas.gemm", 0);
    double tflops = blas_tflops(dtype);
    double seconds = 0.0;
    if (status == 0 && tflops > 0 && m > 0 && n > 0 && k > 0 && batch > 0) {
        double per_mac = strncmp(dtype, "complex", 7) == 0 ? 8.0 : 2.0;
        seconds = per_mac * (double)m * (double)n * (double)k * (double)batch / (tflops * 1e12);
    }
    if (getenv("GPUCHECK_FAKE_TRACE"))
        fprintf(stderr, "fake-blas: %s %s m=%lld n=%lld k=%lld batch=%lld sleep_us=%.0f\n", fn, dtype, m, n, k, batch,
                seconds * 1e6);
    if (seconds > 0) {
        static pthread_mutex_t serial = PTHREAD_MUTEX_INITIALIZER;
        int one_at_a_time = cfg_int("blas.serial", 0) != 0;
        if (one_at_a_time) pthread_mutex_lock(&serial);
        struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
        if (one_at_a_time) pthread_mutex_unlock(&serial);
    }
    return status;
}

struct blas_handle { int math_mode; };
#define TF32_MATH(h) (((h) && (((struct blas_handle *)(h))->math_mode & 0xf) == 3) && tf32_allowed())

static const char *ex_dtype(void *h, int atype, int compute) {
    switch (atype) {
    case 0:
        if ((compute == 77 && tf32_allowed()) || TF32_MATH(h)) return "tf32";
        if (compute == 74) return "float16";
        if (compute == 75) return "bfloat16";
        return "float32";
    case 1: return "float64";
    case 2: return "float16";
    case 4: return "complex64";
    case 5: return "complex128";
    case 14: return "bfloat16";
    default: return "other";
    }
}
#define S_DTYPE(h) (TF32_MATH(h) ? "tf32" : "float32")

int cublasCreate_v2(void **handle) {
    int r = (int)cfg_int("blas.create", 0);
    if (r) return r;
    struct blas_handle *h = calloc(1, sizeof *h);
    if (!h) return 3;
    *handle = h;
    return 0;
}
int cublasDestroy_v2(void *h) { free(h); return 0; }
int cublasSetStream_v2(void *h, void *s) { (void)h; (void)s; return 0; }
int cublasGetStream_v2(void *h, void **s) { (void)h; if (s) *s = NULL; return 0; }
int cublasSetMathMode(void *h, int mode) { if (!h) return 1; ((struct blas_handle *)h)->math_mode = mode; return 0; }
int cublasGetMathMode(void *h, int *mode) { if (!h) return 1; if (mode) *mode = ((struct blas_handle *)h)->math_mode; return 0; }
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

/* cublas<T>gemm: (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc). */
#define GEMM(name, dtype)                                                                                        \
    int name(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int lda,          \
             const void *B, int ldb, const void *beta, void *C, int ldc) {                                      \
        (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)B; (void)ldb; (void)beta; (void)C; (void)ldc; \
        return gemm_done(#name, dtype, m, n, k, 1);                                                             \
    }
/* cublas<T>gemmBatched: (..., alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, batchCount). */
#define GEMM_BATCHED(name, dtype)                                                                                \
    int name(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int lda,          \
             const void *B, int ldb, const void *beta, void *C, int ldc, int batch) {                           \
        (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)B; (void)ldb; (void)beta; (void)C; (void)ldc; \
        return gemm_done(#name, dtype, m, n, k, batch);                                                         \
    }
/* cublas<T>gemmStridedBatched: (..., alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount). */
#define GEMM_STRIDED(name, dtype)                                                                                \
    int name(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int lda,          \
             long long sa, const void *B, int ldb, long long sb, const void *beta, void *C, int ldc,           \
             long long sc, int batch) {                                                                         \
        (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)sa; (void)B; (void)ldb; (void)sb; (void)beta; \
        (void)C; (void)ldc; (void)sc;                                                                           \
        return gemm_done(#name, dtype, m, n, k, batch);                                                         \
    }
GEMM(cublasSgemm_v2, S_DTYPE(h)) GEMM(cublasDgemm_v2, "float64") GEMM(cublasHgemm, "float16")
GEMM(cublasCgemm_v2, "complex64") GEMM(cublasZgemm_v2, "complex128")
GEMM_BATCHED(cublasSgemmBatched, S_DTYPE(h)) GEMM_BATCHED(cublasDgemmBatched, "float64")
GEMM_BATCHED(cublasHgemmBatched, "float16")
GEMM_STRIDED(cublasSgemmStridedBatched, S_DTYPE(h)) GEMM_STRIDED(cublasDgemmStridedBatched, "float64")
GEMM_STRIDED(cublasHgemmStridedBatched, "float16")

int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int atype, int lda,
                 const void *B, int btype, int ldb, const void *beta, void *C, int ctype, int ldc, int compute,
                 int algo) {
    (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)B; (void)btype; (void)ldb; (void)beta; (void)C;
    (void)ctype; (void)ldc; (void)algo;
    return gemm_done("cublasGemmEx", ex_dtype(h, atype, compute), m, n, k, 1);
}
/* cublasSgemmEx: float32 arithmetic on inputs of Atype (CUBLAS_COMPUTE_32F = 68). */
int cublasSgemmEx(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const void *A, int atype, int lda,
                  const void *B, int btype, int ldb, const float *beta, void *C, int ctype, int ldc) {
    (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)B; (void)btype; (void)ldb; (void)beta; (void)C;
    (void)ctype; (void)ldc;
    return gemm_done("cublasSgemmEx", ex_dtype(h, atype, 68), m, n, k, 1);
}
int cublasGemmBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *const A[],
                        int atype, int lda, const void *const B[], int btype, int ldb, const void *beta,
                        void *const C[], int ctype, int ldc, int batch, int compute, int algo) {
    (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)B; (void)btype; (void)ldb; (void)beta; (void)C;
    (void)ctype; (void)ldc; (void)algo;
    return gemm_done("cublasGemmBatchedEx", ex_dtype(h, atype, compute), m, n, k, batch);
}
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                               int atype, int lda, long long sa, const void *B, int btype, int ldb, long long sb,
                               const void *beta, void *C, int ctype, int ldc, long long sc, int batch, int compute,
                               int algo) {
    (void)ta; (void)tb; (void)alpha; (void)A; (void)lda; (void)sa; (void)B; (void)btype; (void)ldb; (void)sb;
    (void)beta; (void)C; (void)ctype; (void)ldc; (void)sc; (void)algo;
    return gemm_done("cublasGemmStridedBatchedEx", ex_dtype(h, atype, compute), m, n, k, batch);
}
#define BLAS_OK(name) int name() { return (int)cfg_int("blas.gemm", 0); }
BLAS_OK(cublasSgemv_v2) BLAS_OK(cublasDgemv_v2)

/* ---- cuBLASLt (libcublasLt.so.12), which TensorFlow's BLAS support creates beside cuBLAS ------------
 * Descriptors remember what cublasLtMatmul needs to time a call: a matmul descriptor its compute type
 * and transposes (cublasLtMatmulDescCreate, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE=0, _TRANSA=3, _TRANSB=4),
 * a layout its type, rows and columns (cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld)) and
 * batch count (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT=5). m, n = D's rows, columns; k = A's columns, or its
 * rows when A is transposed; batch = D's batch count; dtype from A's type and the compute type as above.
 */
struct lt_desc { int compute, transa, transb; };
struct lt_layout { int type; long long rows, cols, batch; };
static int lt_handle;
int cublasLtCreate(void **h) { *h = &lt_handle; return 0; }
int cublasLtDestroy(void *h) { (void)h; return 0; }
size_t cublasLtGetVersion(void) { int a = 0, b = 0, c = 0; property("cublasLt", "12.5.3", 0, &a); property("cublasLt", "12.5.3", 1, &b); property("cublasLt", "12.5.3", 2, &c); return (size_t)(a * 10000 + b * 100 + c); }
const char *cublasLtGetStatusString(int s) { return cublasGetStatusString(s); }
const char *cublasLtGetStatusName(int s) { return cublasGetStatusName(s); }

int cublasLtMatmulDescCreate(void **out, int compute, int scale_type) {
    (void)scale_type;
    struct lt_desc *d = calloc(1, sizeof *d);
    if (!d) return 3;
    d->compute = compute;
    *out = d;
    return 0;
}
int cublasLtMatmulDescDestroy(void *d) { free(d); return 0; }
/* Attribute values are int32 (compute type, transposes, batch count, type) or uint64 (rows, columns). */
static long long lt_get(const void *buf, size_t size) {
    if (size == sizeof(int64_t)) return (long long)*(const int64_t *)buf;
    return size == sizeof(int32_t) ? *(const int32_t *)buf : 0;
}
static int lt_put(long long value, void *buf, size_t size, size_t *written) {
    if (written) *written = size == sizeof(int64_t) ? sizeof(int64_t) : sizeof(int32_t);
    if (!buf || size == 0) return 0;
    if (size == sizeof(int64_t)) *(int64_t *)buf = value;
    else if (size == sizeof(int32_t)) *(int32_t *)buf = (int32_t)value;
    else return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    return 0;
}
int cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf, size_t size) {
    struct lt_desc *d = desc;
    if (!d || !buf) return 7;
    if (attr == 0) d->compute = (int)lt_get(buf, size);
    if (attr == 3) d->transa = (int)lt_get(buf, size);
    if (attr == 4) d->transb = (int)lt_get(buf, size);
    return 0;
}
int cublasLtMatmulDescGetAttribute(void *desc, int attr, void *buf, size_t size, size_t *written) {
    const struct lt_desc *d = desc;
    if (!d) return 7;
    return lt_put(attr == 0 ? d->compute : attr == 3 ? d->transa : attr == 4 ? d->transb : 0, buf, size, written);
}
int cublasLtMatrixLayoutCreate(void **out, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    (void)ld;
    struct lt_layout *l = calloc(1, sizeof *l);
    if (!l) return 3;
    *l = (struct lt_layout){type, (long long)rows, (long long)cols, 1};
    *out = l;
    return 0;
}
int cublasLtMatrixLayoutDestroy(void *l) { free(l); return 0; }
int cublasLtMatrixLayoutSetAttribute(void *layout, int attr, const void *buf, size_t size) {
    struct lt_layout *l = layout;
    if (!l || !buf) return 7;
    if (attr == 0) l->type = (int)lt_get(buf, size);
    if (attr == 2) l->rows = lt_get(buf, size);
    if (attr == 3) l->cols = lt_get(buf, size);
    if (attr == 5) l->batch = lt_get(buf, size);
    return 0;
}
int cublasLtMatrixLayoutGetAttribute(void *layout, int attr, void *buf, size_t size, size_t *written) {
    const struct lt_layout *l = layout;
    if (!l) return 7;
    long long v = attr == 0 ? l->type : attr == 2 ? l->rows : attr == 3 ? l->cols : attr == 5 ? l->batch : 0;
    return lt_put(v, buf, size, written);
}
static int lt_preference;
int cublasLtMatmulPreferenceCreate(void **out) { *out = &lt_preference; return 0; }
int cublasLtMatmulPreferenceDestroy(void *p) { (void)p; return 0; }
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t size) {
    (void)p; (void)attr; (void)buf; (void)size;
    return 0;
}
/* cublasLtMatmulHeuristicResult_t (cublasLt.h): one algorithm, no workspace, fills the GPU once. */
struct lt_heuristic { uint64_t algo[8]; size_t workspace; int state; float waves; int reserved[4]; };
int cublasLtMatmulAlgoGetHeuristic(void *h, void *desc, void *adesc, void *bdesc, void *cdesc, void *ddesc, void *pref,
                                   int requested, struct lt_heuristic *results, int *returned) {
    (void)h; (void)desc; (void)adesc; (void)bdesc; (void)cdesc; (void)ddesc; (void)pref;
    if (requested <= 0 || !results || !returned) return 7;
    memset(&results[0], 0, sizeof results[0]);
    results[0].waves = 1.0f;
    *returned = 1;
    return 0;
}
int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *A, void *adesc, const void *B, void *bdesc,
                   const void *beta, const void *C, void *cdesc, void *D, void *ddesc, const void *algo,
                   void *workspace, size_t workspace_size, void *stream) {
    (void)h; (void)alpha; (void)A; (void)B; (void)bdesc; (void)beta; (void)C; (void)cdesc; (void)D; (void)algo;
    (void)workspace; (void)workspace_size; (void)stream;
    const struct lt_desc *d = desc;
    const struct lt_layout *a = adesc, *out = ddesc;
    if (!d || !a || !out) return 7;
    long long k = d->transa ? a->rows : a->cols;
    return gemm_done("cublasLtMatmul", ex_dtype(NULL, a->type, d->compute), out->rows, out->cols, k, out->batch);
}
