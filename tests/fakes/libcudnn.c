/* A fake libcudnn.so.<major> at the C ABI, driven by a scenario.
 *
 * Keys:   cudnn.version   int as cudnnGetVersion returns it (cuDNN 9: 10000*major + 100*minor + patch), default 90300
 *         cudnn.cudart    int cudnnGetCudartVersion returns, default 12050
 *         cudnn.create    an int cudnnStatus_t for cudnnCreate (default 0; where the driver has no usable
 *                         device cudnnCreate answers CUDNN_STATUS_NOT_INITIALIZED on its own, as the real one)
 *
 * Enough of cuDNN 9 for TensorFlow 2.21 (built against cuDNN 9.3 and CUDA 12.5.1) to create its DNN
 * support on a fake GPU, run tf.nn.conv2d and its gradients, and initialise XLA's GPU backend (which
 * creates the DNN support too, and plans XLA's convolutions through it). What TensorFlow 2.21 calls,
 * read off a gdb trace of conv2d, its gradients and jit_compile functions on the fake H100:
 * cudnnGetVersion, cudnnGetProperty (the loaded version, compared with the 9.3.0 it was built with),
 * cudnnGraphVersionCheck and cudnnOpsVersionCheck (sub-library preloading), cudnnCreate, cudnnSetStream,
 * and the backend ("graph") API through the cudnn-frontend 1.13 it vendors:
 * cudnnBackendCreateDescriptor, cudnnBackendSetAttribute, cudnnBackendFinalize, cudnnBackendGetAttribute,
 * cudnnBackendExecute, cudnnBackendDestroyDescriptor. No legacy convolution call: that API is here for
 * direct callers only. Like the other fakes' kernels, the work is accepted and not done: output
 * buffers keep what they held.
 *
 * Where the behaviour comes from:
 *  - the cuDNN 9.3 headers TensorFlow is built with, shipped in the wheel at
 *    tensorflow/include/third_party/gpus/cudnn/include/ (cudnn_graph_v9.h: statuses, backend enums,
 *    attribute types and names; cudnn_ops_v9.h, cudnn_cnn_v9.h: the legacy calls);
 *  - the cuDNN API reference, https://docs.nvidia.com/deeplearning/cudnn/latest/api/cudnn-graph-library.html
 *    (cudnnCreate, cudnnBackend*), .../cudnn-ops-library.html and .../cudnn-cnn-library.html;
 *  - TensorFlow's side: xla/stream_executor/cuda/cuda_dnn.cc (CudnnSupport::Init: cudnnCreate, then
 *    cudnnGetProperty; CudnnAccess::GetHandle: cudnnSetStream), the entry points its lazy stub resolves
 *    (tensorflow/include/xla/tsl/cuda/cudnn.inc in the wheel), and cudnn-frontend's builders in the wheel
 *    (tensorflow/include/external/cudnn_frontend_archive/include: cudnn_frontend_Heuristics.h,
 *    cudnn_frontend_ExecutionPlan.h, cudnn_frontend_Engine.h), whose queries cudnnBackendGetAttribute
 *    answers below.
 * Set GPUCHECK_FAKE_TRACE=cudnn in the environment to have the calls written to stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include "fakecfg.h"

typedef int cudnnStatus_t;
/* cudnn_graph_v9.h, cudnnStatus_t. */
enum {
    ST_SUCCESS = 0,
    ST_NOT_INITIALIZED = 1001,
    ST_BAD_PARAM = 2000,
    ST_BAD_PARAM_NULL_POINTER = 2002,
    ST_BAD_PARAM_NOT_FINALIZED = 2004,
    ST_BAD_PARAM_ATTRIBUTE_TYPE = 2010,
    ST_NOT_SUPPORTED = 3000,
    ST_INTERNAL_ERROR = 4000,
    ST_ALLOC_FAILED = 4003,
    ST_EXECUTION_FAILED = 5000,
};

static int trace_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *t = getenv("GPUCHECK_FAKE_TRACE");
        on = t && strstr(t, "cudnn") != NULL;
    }
    return on;
}

__attribute__((format(printf, 1, 2))) static void trace(const char *fmt, ...) {
    if (!trace_on()) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("fake cudnn: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- version and errors ------------------------------------------------------------------------ */

size_t cudnnGetVersion(void) { return (size_t)cfg_int("cudnn.version", 90300); }
size_t cudnnGetCudartVersion(void) { return (size_t)cfg_int("cudnn.cudart", 12050); }
/* cudnn_graph_v9.h: the highest device version the library supports, 100*major + 10*minor (9.0 for 9.3). */
size_t cudnnGetMaxDeviceVersion(void) { return 900; }

static const char *status_name(cudnnStatus_t s) {
    switch (s) {
    case ST_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case ST_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case ST_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case ST_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case ST_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case ST_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case ST_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case ST_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case ST_ALLOC_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case ST_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}
const char *cudnnGetErrorString(cudnnStatus_t status) { return status_name(status); }

/* cuDNN 9 keeps the last error's message per thread (cudnnGetLastErrorString, cudnn_graph_v9.h). */
static __thread char last_error[256];
static cudnnStatus_t fail(cudnnStatus_t s, const char *what) {
    snprintf(last_error, sizeof last_error, "%s: %s (fake cuDNN)", status_name(s), what);
    trace("%s", last_error);
    return s;
}
void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (!message || !max_size) return;
    snprintf(message, max_size, "%s", last_error);
    last_error[0] = '\0';
}

/* libraryPropertyType MAJOR_VERSION=0, MINOR_VERSION=1, PATCH_LEVEL=2, from cudnn.version. */
cudnnStatus_t cudnnGetProperty(int type, int *value) {
    long long v = cfg_int("cudnn.version", 90300);
    if (!value) return ST_BAD_PARAM;
    if (type == 0) *value = (int)(v / 10000);
    else if (type == 1) *value = (int)(v / 100 % 100);
    else if (type == 2) *value = (int)(v % 100);
    else return ST_BAD_PARAM;
    return ST_SUCCESS;
}

/* cuDNN 9 loads its sub-libraries lazily; TensorFlow preloads them through these checks (cuda_dnn.cc,
 * PreloadCudnnSubLibs). All of the fake is one library, so they always succeed. */
cudnnStatus_t cudnnGraphVersionCheck(void) { return ST_SUCCESS; }
cudnnStatus_t cudnnOpsVersionCheck(void) { return ST_SUCCESS; }
cudnnStatus_t cudnnCnnVersionCheck(void) { return ST_SUCCESS; }
cudnnStatus_t cudnnAdvVersionCheck(void) { return ST_SUCCESS; }

/* ---- the handle -------------------------------------------------------------------------------- */

/* cudnnCreate initialises the CUDA runtime on the current device and fails with
 * CUDNN_STATUS_NOT_INITIALIZED where that fails (cudnn-graph-library.html, cudnnCreate). The fake asks
 * the fake driver, as the fake runtime does (libcudart.c, cudaGetDeviceCount). */
static int driver_has_device(void) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!driver) return 0;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(driver, "cuInit");
    int (*get_count)(int *) = (int (*)(int *))dlsym(driver, "cuDeviceGetCount");
    int count = 0;
    return init && get_count && init(0) == 0 && get_count(&count) == 0 && count > 0;
}

#define HANDLE_MAGIC 0x636e6e68u /* "hnnc" */
typedef struct {
    unsigned magic;
    void *stream;
} FakeHandle;

static int valid_handle(const void *h) { return h && ((const FakeHandle *)h)->magic == HANDLE_MAGIC; }

cudnnStatus_t cudnnCreate(void **handle) {
    trace("cudnnCreate");
    if (!handle) return fail(ST_BAD_PARAM_NULL_POINTER, "cudnnCreate: handle is NULL");
    cudnnStatus_t forced = (cudnnStatus_t)cfg_int("cudnn.create", 0);
    if (forced) return fail(forced, "cudnnCreate (scenario cudnn.create)");
    if (!driver_has_device()) return fail(ST_NOT_INITIALIZED, "cudnnCreate: the CUDA driver has no usable device");
    FakeHandle *h = calloc(1, sizeof *h);
    if (!h) return fail(ST_ALLOC_FAILED, "cudnnCreate");
    h->magic = HANDLE_MAGIC;
    *handle = h;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnDestroy(void *handle) {
    trace("cudnnDestroy");
    if (!valid_handle(handle)) return fail(ST_BAD_PARAM, "cudnnDestroy: not a handle");
    ((FakeHandle *)handle)->magic = 0;
    free(handle);
    return ST_SUCCESS;
}
cudnnStatus_t cudnnSetStream(void *handle, void *stream) {
    trace("cudnnSetStream(%p)", stream);
    if (!valid_handle(handle)) return fail(ST_BAD_PARAM, "cudnnSetStream: not a handle");
    ((FakeHandle *)handle)->stream = stream;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnGetStream(void *handle, void **stream) {
    if (!valid_handle(handle) || !stream) return fail(ST_BAD_PARAM, "cudnnGetStream");
    *stream = ((FakeHandle *)handle)->stream;
    return ST_SUCCESS;
}

/* ---- the legacy convolution API (cudnn_ops_v9.h, cudnn_cnn_v9.h; cudnn-cnn-library.html) ----------
 * TensorFlow 2.21 calls none of it: it plans convolutions, forward and backward, eager and under XLA,
 * through the backend API below (read off a gdb trace of conv2d, its gradients and jit_compile on the
 * fake H100). The forward path stays for direct callers (tests/test_fake_cudnn.py), with the shapes
 * checked and one algorithm offered, as the documented API behaves. */

#define MAX_DIMS 8
typedef struct {
    int kind;
    int dtype, format, nb;
    int dims[MAX_DIMS], strides[MAX_DIMS];
    /* convolution: pads, filter strides, dilations, mode; dtype is its compute type */
    int pads[MAX_DIMS], fstrides[MAX_DIMS], dilations[MAX_DIMS];
    int mode, math, groups;
} LegacyDesc;
enum { D_TENSOR = 1, D_FILTER, D_CONV };

static cudnnStatus_t create_legacy(void **out, int kind, const char *name) {
    trace("cudnnCreate%sDescriptor", name);
    if (!out) return fail(ST_BAD_PARAM_NULL_POINTER, name);
    LegacyDesc *d = calloc(1, sizeof *d);
    if (!d) return fail(ST_ALLOC_FAILED, name);
    d->kind = kind;
    d->groups = 1;
    *out = d;
    return ST_SUCCESS;
}
static LegacyDesc *as_kind(void *d, int kind) {
    LegacyDesc *l = d;
    return l && l->kind == kind ? l : NULL;
}
static cudnnStatus_t destroy_legacy(void *d, int kind) {
    LegacyDesc *l = as_kind(d, kind);
    if (!l) return fail(ST_BAD_PARAM, "cudnnDestroy*Descriptor: not such a descriptor");
    l->kind = 0;
    free(l);
    return ST_SUCCESS;
}

#define LEGACY(Name, kind)                                                                              \
    cudnnStatus_t cudnnCreate##Name##Descriptor(void **d) { return create_legacy(d, kind, #Name); }       \
    cudnnStatus_t cudnnDestroy##Name##Descriptor(void *d) { return destroy_legacy(d, kind); }
LEGACY(Tensor, D_TENSOR)
LEGACY(Filter, D_FILTER)
LEGACY(Convolution, D_CONV)

cudnnStatus_t cudnnSetTensorNdDescriptor(void *desc, int dtype, int nb, const int dims[], const int strides[]) {
    LegacyDesc *d = as_kind(desc, D_TENSOR);
    if (!d || nb < 1 || nb > MAX_DIMS || !dims || !strides) return fail(ST_BAD_PARAM, "cudnnSetTensorNdDescriptor");
    for (int i = 0; i < nb; i++)
        if (dims[i] <= 0 || strides[i] <= 0) return fail(ST_BAD_PARAM, "cudnnSetTensorNdDescriptor: dims and strides must be positive");
    d->dtype = dtype;
    d->nb = nb;
    memcpy(d->dims, dims, (size_t)nb * sizeof *dims);
    memcpy(d->strides, strides, (size_t)nb * sizeof *strides);
    return ST_SUCCESS;
}
/* cudnnTensorFormat_t NCHW = 0, NHWC = 1 (cudnn_graph_v9.h): the strides of a packed tensor whose
 * dimensions are given as N, C, H, W in either layout. */
cudnnStatus_t cudnnSetTensor4dDescriptor(void *desc, int format, int dtype, int n, int c, int h, int w) {
    int dims[4] = {n, c, h, w};
    int nchw[4] = {c * h * w, h * w, w, 1}, nhwc[4] = {h * w * c, 1, w * c, c};
    if (format != 0 && format != 1) return fail(ST_BAD_PARAM, "cudnnSetTensor4dDescriptor: format");
    cudnnStatus_t s = cudnnSetTensorNdDescriptor(desc, dtype, 4, dims, format == 1 ? nhwc : nchw);
    if (s == ST_SUCCESS) ((LegacyDesc *)desc)->format = format;
    return s;
}
cudnnStatus_t cudnnSetFilterNdDescriptor(void *desc, int dtype, int format, int nb, const int dims[]) {
    LegacyDesc *d = as_kind(desc, D_FILTER);
    if (!d || nb < 3 || nb > MAX_DIMS || !dims) return fail(ST_BAD_PARAM, "cudnnSetFilterNdDescriptor");
    for (int i = 0; i < nb; i++)
        if (dims[i] <= 0) return fail(ST_BAD_PARAM, "cudnnSetFilterNdDescriptor: dims must be positive");
    d->dtype = dtype;
    d->format = format;
    d->nb = nb;
    memcpy(d->dims, dims, (size_t)nb * sizeof *dims);
    return ST_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(void *desc, int dtype, int format, int k, int c, int h, int w) {
    int dims[4] = {k, c, h, w};
    return cudnnSetFilterNdDescriptor(desc, dtype, format, 4, dims);
}
cudnnStatus_t cudnnSetConvolutionNdDescriptor(void *desc, int nb, const int pads[], const int fstrides[],
                                              const int dilations[], int mode, int compute_type) {
    LegacyDesc *d = as_kind(desc, D_CONV);
    if (!d || nb < 1 || nb > MAX_DIMS || !pads || !fstrides || !dilations) return fail(ST_BAD_PARAM, "cudnnSetConvolutionNdDescriptor");
    for (int i = 0; i < nb; i++)
        if (pads[i] < 0 || fstrides[i] <= 0 || dilations[i] <= 0) return fail(ST_BAD_PARAM, "cudnnSetConvolutionNdDescriptor");
    memcpy(d->pads, pads, (size_t)nb * sizeof *pads);
    memcpy(d->fstrides, fstrides, (size_t)nb * sizeof *fstrides);
    memcpy(d->dilations, dilations, (size_t)nb * sizeof *dilations);
    d->nb = nb;
    d->mode = mode;
    d->dtype = compute_type;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(void *desc, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w, int mode, int compute_type) {
    int pads[2] = {pad_h, pad_w}, strides[2] = {u, v}, dil[2] = {dil_h, dil_w};
    return cudnnSetConvolutionNdDescriptor(desc, 2, pads, strides, dil, mode, compute_type);
}
cudnnStatus_t cudnnSetConvolutionMathType(void *desc, int math) {
    LegacyDesc *d = as_kind(desc, D_CONV);
    if (!d) return fail(ST_BAD_PARAM, "cudnnSetConvolutionMathType");
    d->math = math;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(void *desc, int groups) {
    LegacyDesc *d = as_kind(desc, D_CONV);
    if (!d || groups < 1) return fail(ST_BAD_PARAM, "cudnnSetConvolutionGroupCount");
    d->groups = groups;
    return ST_SUCCESS;
}
/* The output of a convolution, dimension by dimension (cudnn-cnn-library.html,
 * cudnnGetConvolutionNdForwardOutputDim): 1 + (in + 2*pad - ((filter - 1)*dilation + 1)) / stride. */
cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(void *conv, void *input, void *filter, int nb, int out[]) {
    LegacyDesc *c = as_kind(conv, D_CONV), *x = as_kind(input, D_TENSOR), *w = as_kind(filter, D_FILTER);
    if (!c || !x || !w || !out || nb != x->nb || x->nb != w->nb || c->nb != nb - 2)
        return fail(ST_BAD_PARAM, "cudnnGetConvolutionNdForwardOutputDim");
    if (x->dims[1] != w->dims[1] * c->groups) return fail(ST_BAD_PARAM, "cudnnGetConvolutionNdForwardOutputDim: channels");
    out[0] = x->dims[0];
    out[1] = w->dims[0];
    for (int i = 2; i < nb; i++) {
        int span = (w->dims[i] - 1) * c->dilations[i - 2] + 1;
        out[i] = 1 + (x->dims[i] + 2 * c->pads[i - 2] - span) / c->fstrides[i - 2];
        if (out[i] <= 0) return fail(ST_BAD_PARAM, "cudnnGetConvolutionNdForwardOutputDim: empty output");
    }
    return ST_SUCCESS;
}
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(void *conv, void *input, void *filter, int *n, int *c, int *h, int *w) {
    int out[4];
    if (!n || !c || !h || !w) return fail(ST_BAD_PARAM_NULL_POINTER, "cudnnGetConvolution2dForwardOutputDim");
    cudnnStatus_t s = cudnnGetConvolutionNdForwardOutputDim(conv, input, filter, 4, out);
    if (s != ST_SUCCESS) return s;
    *n = out[0];
    *c = out[1];
    *h = out[2];
    *w = out[3];
    return ST_SUCCESS;
}

/* cudnnConvolutionFwdAlgoPerf_t (cudnn_cnn_v9.h): algo, status, time, memory, determinism, mathType,
 * reserved[3]. The fake offers one: CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM (1), deterministic,
 * no workspace, in the descriptor's math type. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
} AlgoPerf;

/* The descriptors of one forward convolution agree: y is what x, w and conv give. */
static cudnnStatus_t check_forward(const char *what, void *handle, void *xd, void *wd, void *conv, void *yd) {
    LegacyDesc *y = as_kind(yd, D_TENSOR);
    int out[MAX_DIMS];
    if (!valid_handle(handle)) return fail(ST_BAD_PARAM, what);
    cudnnStatus_t s = y ? cudnnGetConvolutionNdForwardOutputDim(conv, xd, wd, y->nb, out) : ST_BAD_PARAM;
    if (s != ST_SUCCESS) return fail(s, what);
    for (int i = 0; i < y->nb; i++)
        if (out[i] != y->dims[i]) return fail(ST_BAD_PARAM, what);
    return ST_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(void *handle, int *count) {
    if (!valid_handle(handle) || !count) return fail(ST_BAD_PARAM, "cudnnGetConvolutionForwardAlgorithmMaxCount");
    *count = 1;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(void *handle, void *xd, void *wd, void *conv, void *yd, int requested,
                                                     int *returned, AlgoPerf *perf) {
    static const char what[] = "cudnnGetConvolutionForwardAlgorithm_v7";
    trace("%s", what);
    if (!returned || !perf || requested < 1) return fail(ST_BAD_PARAM, what);
    cudnnStatus_t s = check_forward(what, handle, xd, wd, conv, yd);
    if (s != ST_SUCCESS) return s;
    memset(perf, 0, sizeof *perf);
    perf->algo = 1;
    perf->status = ST_SUCCESS;
    perf->time = 0.0f; /* nothing was measured */
    perf->memory = 0;
    perf->determinism = 1; /* CUDNN_DETERMINISTIC */
    perf->math_type = as_kind(conv, D_CONV)->math;
    *returned = 1;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(void *handle, void *xd, void *wd, void *conv, void *yd, int algo, size_t *size) {
    static const char what[] = "cudnnGetConvolutionForwardWorkspaceSize";
    trace("%s", what);
    if (!size || algo < 0 || algo > 7) return fail(ST_BAD_PARAM, what); /* cudnnConvolutionFwdAlgo_t has 8 */
    cudnnStatus_t s = check_forward(what, handle, xd, wd, conv, yd);
    if (s == ST_SUCCESS) *size = 0;
    return s;
}
/* Accepted and not run, like every fake kernel: y keeps what it held. */
cudnnStatus_t cudnnConvolutionForward(void *handle, const void *alpha, void *xd, const void *x, void *wd, const void *w, void *conv,
                                      int algo, void *workspace, size_t workspace_size, const void *beta, void *yd, void *y) {
    static const char what[] = "cudnnConvolutionForward";
    (void)workspace; (void)workspace_size;
    trace("%s", what);
    if (!alpha || !beta || !x || !w || !y || algo < 0 || algo > 7) return fail(ST_BAD_PARAM, what);
    return check_forward(what, handle, xd, wd, conv, yd);
}

/* ---- the backend ("graph") API: cudnn_graph_v9.h, cudnn-graph-library.html --------------------- */

/* cudnnBackendDescriptorType_t values the fake answers for (cudnn_graph_v9.h). */
enum {
    B_ENGINE = 2,
    B_ENGINECFG = 3,
    B_ENGINEHEUR = 4,
    B_EXECUTION_PLAN = 5,
    B_VARIANT_PACK = 16,
    B_DESCRIPTOR_TYPES = 34,
};
/* cudnnBackendAttributeType_t (cudnn_graph_v9.h), in order from CUDNN_TYPE_HANDLE = 0. */
enum {
    T_HANDLE, T_DATA_TYPE, T_BOOLEAN, T_INT64, T_FLOAT, T_DOUBLE, T_VOID_PTR, T_CONVOLUTION_MODE, T_HEUR_MODE,
    T_KNOB_TYPE, T_NAN_PROPOGATION, T_NUMERICAL_NOTE, T_LAYOUT_TYPE, T_ATTRIB_NAME, T_POINTWISE_MODE,
    T_BACKEND_DESCRIPTOR, T_GENSTATS_MODE, T_BN_FINALIZE_STATS_MODE, T_REDUCTION_OPERATOR_TYPE, T_BEHAVIOR_NOTE,
    T_TENSOR_REORDERING_MODE, T_RESAMPLE_MODE, T_PADDING_MODE, T_INT32, T_CHAR, T_SIGNAL_MODE, T_FRACTION,
    T_NORM_MODE, T_NORM_FWD_PHASE, T_RNG_DISTRIBUTION, T_TYPES
};
/* cudnnBackendAttributeName_t values the fake synthesises (cudnn_graph_v9.h). */
enum {
    A_ENGINEHEUR_OPERATION_GRAPH = 201,
    A_ENGINEHEUR_RESULTS = 202,
    A_ENGINECFG_ENGINE = 300,
    A_ENGINECFG_INTERMEDIATE_INFO = 301,
    A_ENGINECFG_KNOB_CHOICES = 302,
    A_ENGINECFG_WORKSPACE_SIZE = 303,
    A_ENGINECFG_SHARED_MEMORY_USED = 304,
    A_EXECUTION_PLAN_HANDLE = 400,
    A_EXECUTION_PLAN_ENGINE_CONFIG = 401,
    A_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
    A_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS = 403,
    A_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS = 404,
    A_EXECUTION_PLAN_JSON_REPRESENTATION = 405,
    A_OPERATIONGRAPH_HANDLE = 800,
    A_OPERATIONGRAPH_OPS = 801,
    A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT = 802,
    A_ENGINE_OPERATION_GRAPH = 1300,
    A_ENGINE_GLOBAL_INDEX = 1301,
    A_ENGINE_KNOB_INFO = 1302,
    A_ENGINE_NUMERICAL_NOTE = 1303,
    A_ENGINE_LAYOUT_INFO = 1304,
    A_ENGINE_BEHAVIOR_NOTE = 1305,
    A_ENGINE_SM_COUNT_TARGET = 1306,
};

static size_t attr_type_size(int type) {
    switch (type) {
    case T_HANDLE: case T_VOID_PTR: case T_BACKEND_DESCRIPTOR: return sizeof(void *);
    case T_BOOLEAN: case T_CHAR: return 1;
    case T_INT64: case T_DOUBLE: return 8;
    case T_FRACTION: return 16; /* cudnnFraction_t: two int64_t */
    default: return 4;          /* float, int32 and the enums */
    }
}

typedef struct BackendDesc BackendDesc;
typedef struct {
    int name, type;
    int64_t count;
    void *data; /* count elements; for T_BACKEND_DESCRIPTOR the fake's own copies (BackendDesc *) */
} Attr;
#define BACKEND_MAGIC 0x646e6b62u /* "bknd" */
struct BackendDesc {
    unsigned magic;
    int type, finalized;
    int nattrs, cap;
    Attr *attrs;
};

static int valid_backend(const BackendDesc *d) { return d && d->magic == BACKEND_MAGIC; }

static BackendDesc *backend_new(int type) {
    BackendDesc *d = calloc(1, sizeof *d);
    if (d) {
        d->magic = BACKEND_MAGIC;
        d->type = type;
    }
    return d;
}
static void backend_clear(BackendDesc *d);
static void backend_free(BackendDesc *d) {
    if (!d) return;
    backend_clear(d);
    d->magic = 0;
    free(d);
}
static void attr_free(Attr *a) {
    if (a->type == T_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < a->count; i++) backend_free(((BackendDesc **)a->data)[i]);
    free(a->data);
    a->data = NULL;
    a->count = 0;
}
static void backend_clear(BackendDesc *d) {
    for (int i = 0; i < d->nattrs; i++) attr_free(&d->attrs[i]);
    free(d->attrs);
    d->attrs = NULL;
    d->nattrs = d->cap = 0;
    d->finalized = 0;
}
static Attr *attr_find(const BackendDesc *d, int name) {
    for (int i = 0; i < d->nattrs; i++)
        if (d->attrs[i].name == name) return &d->attrs[i];
    return NULL;
}
static BackendDesc *backend_clone(const BackendDesc *src);
/* Store a copy of COUNT elements (descriptors are deep-copied: the caller may destroy its own). */
static cudnnStatus_t attr_store(BackendDesc *d, int name, int type, int64_t count, const void *elements) {
    Attr *a = attr_find(d, name);
    if (!a) {
        if (d->nattrs == d->cap) {
            int cap = d->cap ? 2 * d->cap : 8;
            Attr *grown = realloc(d->attrs, (size_t)cap * sizeof *grown);
            if (!grown) return ST_ALLOC_FAILED;
            d->attrs = grown;
            d->cap = cap;
        }
        a = &d->attrs[d->nattrs++];
        memset(a, 0, sizeof *a);
        a->name = name;
    } else {
        attr_free(a);
    }
    a->type = type;
    size_t bytes = (size_t)count * attr_type_size(type);
    a->data = calloc(1, bytes ? bytes : 1);
    if (!a->data) return ST_ALLOC_FAILED;
    if (type == T_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < count; i++) {
            const BackendDesc *e = ((BackendDesc *const *)elements)[i];
            BackendDesc *copy = valid_backend(e) ? backend_clone(e) : NULL;
            if (!copy) {
                a->count = i;
                return ST_BAD_PARAM;
            }
            ((BackendDesc **)a->data)[i] = copy;
        }
    } else if (bytes) {
        memcpy(a->data, elements, bytes);
    }
    a->count = count;
    return ST_SUCCESS;
}
/* Make DST (the caller's descriptor) hold what SRC holds, as cuDNN fills descriptors it returns. */
static cudnnStatus_t backend_assign(BackendDesc *dst, const BackendDesc *src) {
    if (dst == src) return ST_SUCCESS;
    backend_clear(dst);
    dst->type = src->type;
    for (int i = 0; i < src->nattrs; i++) {
        const Attr *a = &src->attrs[i];
        cudnnStatus_t s = attr_store(dst, a->name, a->type, a->count, a->data);
        if (s != ST_SUCCESS) return s;
    }
    dst->finalized = src->finalized;
    return ST_SUCCESS;
}
static BackendDesc *backend_clone(const BackendDesc *src) {
    BackendDesc *d = backend_new(src->type);
    if (d && backend_assign(d, src) != ST_SUCCESS) {
        backend_free(d);
        return NULL;
    }
    return d;
}

/* The one engine the fake offers for every operation graph: global index 0, no knobs, no numerical or
 * behaviour notes (so no filter of cudnn_frontend_Filters.h or of TensorFlow's drops it), a finalized
 * engine config of it with no workspace. */
static BackendDesc *the_engine(const BackendDesc *graph) {
    BackendDesc *engine = backend_new(B_ENGINE);
    int64_t index = 0;
    if (!engine) return NULL;
    if ((graph && attr_store(engine, A_ENGINE_OPERATION_GRAPH, T_BACKEND_DESCRIPTOR, 1, &graph) != ST_SUCCESS) ||
        attr_store(engine, A_ENGINE_GLOBAL_INDEX, T_INT64, 1, &index) != ST_SUCCESS) {
        backend_free(engine);
        return NULL;
    }
    engine->finalized = 1;
    return engine;
}
static BackendDesc *the_engine_config(const BackendDesc *graph) {
    BackendDesc *engine = the_engine(graph), *cfg = backend_new(B_ENGINECFG);
    cudnnStatus_t s = engine && cfg ? attr_store(cfg, A_ENGINECFG_ENGINE, T_BACKEND_DESCRIPTOR, 1, &engine) : ST_ALLOC_FAILED;
    backend_free(engine);
    if (s != ST_SUCCESS) {
        backend_free(cfg);
        return NULL;
    }
    cfg->finalized = 1;
    return cfg;
}

cudnnStatus_t cudnnBackendCreateDescriptor(int type, void **descriptor) {
    trace("cudnnBackendCreateDescriptor(type %d)", type);
    if (!descriptor) return fail(ST_BAD_PARAM_NULL_POINTER, "cudnnBackendCreateDescriptor: descriptor is NULL");
    if (type < 0 || type >= B_DESCRIPTOR_TYPES) return fail(ST_BAD_PARAM, "cudnnBackendCreateDescriptor: unknown descriptor type");
    BackendDesc *d = backend_new(type);
    if (!d) return fail(ST_ALLOC_FAILED, "cudnnBackendCreateDescriptor");
    *descriptor = d;
    return ST_SUCCESS;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(void *descriptor) {
    trace("cudnnBackendDestroyDescriptor(type %d)", valid_backend(descriptor) ? ((BackendDesc *)descriptor)->type : -1);
    if (!valid_backend(descriptor)) return fail(ST_BAD_PARAM, "cudnnBackendDestroyDescriptor: not a descriptor");
    backend_free(descriptor);
    return ST_SUCCESS;
}
cudnnStatus_t cudnnBackendInitialize(void *descriptor) {
    if (!valid_backend(descriptor)) return fail(ST_BAD_PARAM, "cudnnBackendInitialize: not a descriptor");
    backend_clear(descriptor);
    return ST_SUCCESS;
}
cudnnStatus_t cudnnBackendSetAttribute(void *descriptor, int name, int type, int64_t count, const void *elements) {
    BackendDesc *d = descriptor;
    trace("cudnnBackendSetAttribute(type %d, attr %d, attr type %d, count %lld)", valid_backend(d) ? d->type : -1, name, type,
          (long long)count);
    if (!valid_backend(d)) return fail(ST_BAD_PARAM, "cudnnBackendSetAttribute: not a descriptor");
    if (d->finalized) return fail(ST_BAD_PARAM, "cudnnBackendSetAttribute: the descriptor is finalized");
    if (type < 0 || type >= T_TYPES) return fail(ST_BAD_PARAM_ATTRIBUTE_TYPE, "cudnnBackendSetAttribute: unknown attribute type");
    if (count < 0 || (count > 0 && !elements)) return fail(ST_BAD_PARAM_NULL_POINTER, "cudnnBackendSetAttribute: no elements");
    cudnnStatus_t s = attr_store(d, name, type, count, elements);
    return s == ST_SUCCESS ? s : fail(s, "cudnnBackendSetAttribute");
}
cudnnStatus_t cudnnBackendFinalize(void *descriptor) {
    BackendDesc *d = descriptor;
    trace("cudnnBackendFinalize(type %d)", valid_backend(d) ? d->type : -1);
    if (!valid_backend(d)) return fail(ST_BAD_PARAM, "cudnnBackendFinalize: not a descriptor");
    /* A plan is made from an engine config, or loaded from its JSON with a handle (cudnn-frontend's
     * ExecutionPlanBuilder_v8::build and loadFromJson: "the handle ... required for plan deserialization only"). */
    if (d->type == B_EXECUTION_PLAN && !attr_find(d, A_EXECUTION_PLAN_ENGINE_CONFIG)) {
        const Attr *handle = attr_find(d, A_EXECUTION_PLAN_HANDLE);
        if (!attr_find(d, A_EXECUTION_PLAN_JSON_REPRESENTATION) || !handle || handle->count != 1 || !valid_handle(*(void **)handle->data))
            return fail(ST_BAD_PARAM, "cudnnBackendFinalize: execution plan without an engine config");
    }
    d->finalized = 1;
    return ST_SUCCESS;
}

/* Answer with COUNT elements at ELEMENTS of TYPE: copy up to REQUESTED of them (descriptors are filled
 * into the caller's), set *ELEMENT_COUNT to how many there are (written, when an array was given). */
static cudnnStatus_t answer(int type, int64_t count, const void *elements, int wanted_type, int64_t requested,
                            int64_t *element_count, void *out) {
    if (type != wanted_type) return fail(ST_BAD_PARAM_ATTRIBUTE_TYPE, "cudnnBackendGetAttribute: wrong attribute type");
    int64_t n = out ? (count < requested ? count : requested) : 0;
    if (element_count) *element_count = out ? n : count;
    if (n <= 0) return ST_SUCCESS;
    if (type == T_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < n; i++) {
            BackendDesc *dst = ((BackendDesc **)out)[i];
            if (!valid_backend(dst)) return fail(ST_BAD_PARAM, "cudnnBackendGetAttribute: not a descriptor to fill");
            cudnnStatus_t s = backend_assign(dst, ((BackendDesc *const *)elements)[i]);
            if (s != ST_SUCCESS) return fail(s, "cudnnBackendGetAttribute");
        }
    } else {
        memcpy(out, elements, (size_t)n * attr_type_size(type));
    }
    return ST_SUCCESS;
}

static const char plan_json[] = "{\"fake\":\"gpucheck fake cuDNN\",\"engineId\":0,\"knobs\":{}}";

cudnnStatus_t cudnnBackendGetAttribute(void *const descriptor, int name, int type, int64_t requested, int64_t *element_count, void *out) {
    const BackendDesc *d = descriptor;
    trace("cudnnBackendGetAttribute(type %d, attr %d, attr type %d, requested %lld)", valid_backend(d) ? d->type : -1, name, type,
          (long long)requested);
    if (!valid_backend(d)) return fail(ST_BAD_PARAM, "cudnnBackendGetAttribute: not a descriptor");
    if (requested < 0 || (!out && !element_count)) return fail(ST_BAD_PARAM_NULL_POINTER, "cudnnBackendGetAttribute");
    const Attr *a = attr_find(d, name);
    if (a) return answer(a->type, a->count, a->data, type, requested, element_count, out);
    int64_t zero = 0, one = 1;
    switch (name) {
    case A_ENGINEHEUR_RESULTS: { /* one engine config, for the heuristics' operation graph */
        if (!d->finalized) return fail(ST_BAD_PARAM_NOT_FINALIZED, "cudnnBackendGetAttribute: heuristics not finalized");
        const Attr *g = attr_find(d, A_ENGINEHEUR_OPERATION_GRAPH);
        BackendDesc *cfg = the_engine_config(g && g->count == 1 ? ((BackendDesc **)g->data)[0] : NULL);
        if (!cfg) return fail(ST_ALLOC_FAILED, "cudnnBackendGetAttribute");
        cudnnStatus_t s = answer(T_BACKEND_DESCRIPTOR, 1, &cfg, type, requested, element_count, out);
        backend_free(cfg);
        return s;
    }
    case A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
        return answer(T_INT64, 1, &one, type, requested, element_count, out);
    case A_ENGINE_GLOBAL_INDEX:
    case A_ENGINECFG_WORKSPACE_SIZE:
    case A_ENGINECFG_SHARED_MEMORY_USED:
    case A_EXECUTION_PLAN_WORKSPACE_SIZE:
        return answer(T_INT64, 1, &zero, type, requested, element_count, out);
    case A_EXECUTION_PLAN_JSON_REPRESENTATION:
        return answer(T_CHAR, (int64_t)strlen(plan_json), plan_json, type, requested, element_count, out);
    case A_ENGINECFG_ENGINE: { /* an engine config made by the caller without one: the fake's engine */
        BackendDesc *engine = the_engine(NULL);
        if (!engine) return fail(ST_ALLOC_FAILED, "cudnnBackendGetAttribute");
        cudnnStatus_t s = answer(T_BACKEND_DESCRIPTOR, 1, &engine, type, requested, element_count, out);
        backend_free(engine);
        return s;
    }
    default: /* knob choices and infos, notes, intermediates, layouts, ...: none */
        if (element_count) *element_count = 0;
        return ST_SUCCESS;
    }
}

/* Execution is accepted and nothing is computed: the variant pack's outputs keep what they held. */
cudnnStatus_t cudnnBackendExecute(void *handle, void *plan, void *variant_pack) {
    trace("cudnnBackendExecute");
    if (!valid_handle(handle)) return fail(ST_BAD_PARAM, "cudnnBackendExecute: not a handle");
    if (!valid_backend(plan) || ((BackendDesc *)plan)->type != B_EXECUTION_PLAN)
        return fail(ST_BAD_PARAM, "cudnnBackendExecute: not an execution plan");
    if (!valid_backend(variant_pack) || ((BackendDesc *)variant_pack)->type != B_VARIANT_PACK)
        return fail(ST_BAD_PARAM, "cudnnBackendExecute: not a variant pack");
    /* CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED (cudnn_graph_v9.h): a descriptor used before cudnnBackendFinalize. */
    if (!((BackendDesc *)plan)->finalized || !((BackendDesc *)variant_pack)->finalized)
        return fail(ST_BAD_PARAM_NOT_FINALIZED, "cudnnBackendExecute: the plan or the variant pack is not finalized");
    return ST_SUCCESS;
}
