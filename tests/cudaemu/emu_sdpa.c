/* cuDNN's fused attention on the emulated device: what the emulated backend API refuses,
 * with the status real cuDNN gives, and what the CUDA backend then does.
 *
 *   emu_sdpa PLUGIN.so      (build/tests/cudaemu/plugins/fulgur-backend-cuda.so)
 *
 * graph: plugins/backend-cuda's SDPA graph and plan code against the emulated cuDNN: the
 *   forward and backward plans of a valid shape finalize (backward: the deterministic
 *   engine is picked over the faster non-deterministic one); head size 12 is refused with
 *   CUDNN_STATUS_NOT_SUPPORTED at EXECUTION_PLAN finalize, as cuDNN's engines are; a
 *   head-dim axis with stride 2 likewise; a tensor without a unique id, dims and strides of
 *   different counts and one uid naming two tensors with BAD_PARAM; a variant pack without a
 *   tensor, and a misaligned pointer, at execute.
 * plugin: [backend] attention = auto runs head size 12 on fulgur's kernels (the same bits
 *   as attention = kernel) and logs why, once; attention = cudnn refuses it with
 *   FG_UNAVAILABLE naming the reason; head size 16 runs on cuDNN (the log names the
 *   engine) within bf16 rounding of the kernels; an unknown value is refused at init. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "cuda_sdpa_graph.h"
#include "fake_host.h"
#include "fulgur/backend.h"
#include "plugin_load.h"

/* ---- the graph API -------------------------------------------------------------------------- */

static void graph_plans(void)
{
    for (int backward = 0; backward < 2; backward++) {
        fg_sdpa_shape sh = { 2, 3, 17, 16, CUDNN_DATA_BFLOAT16, 1, backward, 0 };
        fg_sdpa_graph g;
        fg_sdpa_plan p;
        const char *what = "";
        CHECK_EQ(fg_sdpa_graph_build(&g, &sh, NULL, &what), CUDNN_STATUS_SUCCESS);
        cudnnStatus_t st = fg_sdpa_plan_make(&g, NULL, &p, &what);
        CHECK(st == CUDNN_STATUS_SUCCESS, "plan: status %d at %s", (int)st, what);
        CHECK_EQ(p.engine, backward ? 10 : 8);
        CHECK_EQ(p.deterministic, 1);
        CHECK_EQ(p.configs_tried, 1);
        CHECK(backward ? p.workspace > 0 : p.workspace == 0);
        fg_sdpa_plan_destroy(&p);
        fg_sdpa_graph_destroy(&g);
    }
}

static void graph_head_size_12(void)
{
    for (int backward = 0; backward < 2; backward++) {
        fg_sdpa_shape sh = { 1, 2, 9, 12, CUDNN_DATA_HALF, 0, backward, 0 };
        fg_sdpa_graph g;
        fg_sdpa_plan p;
        const char *what = "";
        CHECK_EQ(fg_sdpa_graph_build(&g, &sh, NULL, &what), CUDNN_STATUS_SUCCESS);
        CHECK_EQ(fg_sdpa_plan_make(&g, NULL, &p, &what), CUDNN_STATUS_NOT_SUPPORTED);
        CHECK_CONTAINS(what, "EXECUTION_PLAN");
        CHECK(p.plan == NULL && p.configs_tried == (backward ? 2 : 1));
        fg_sdpa_plan_destroy(&p);
        fg_sdpa_graph_destroy(&g);
    }
}

/* A tensor descriptor; *st gets the first failing status. */
static cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, const int64_t *dims,
                                       const int64_t *strides, int nstrides, bool is_virtual,
                                       int set_uid, cudnnStatus_t *st)
{
    cudnnBackendDescriptor_t d = NULL;
    int64_t align = 16;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                     &type);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nstrides,
                                     strides);
    if (s == CUDNN_STATUS_SUCCESS && set_uid)
        s = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
                                     &align);
    if (s == CUDNN_STATUS_SUCCESS && is_virtual)
        s = cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1,
                                     &is_virtual);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(d);
    if (*st == CUDNN_STATUS_SUCCESS)
        *st = s;
    return d;
}

static cudnnBackendDescriptor_t finalized(cudnnBackendDescriptorType_t type, cudnnStatus_t *st,
                                          int n, const cudnnBackendAttributeName_t *names,
                                          const cudnnBackendAttributeType_t *types,
                                          const void *const *values)
{
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(type, &d);
    for (int i = 0; i < n && s == CUDNN_STATUS_SUCCESS; i++)
        s = cudnnBackendSetAttribute(d, names[i], types[i], 1, values[i]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(d);
    if (*st == CUDNN_STATUS_SUCCESS)
        *st = s;
    return d;
}

static cudnnBackendDescriptor_t matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                                       cudnnBackendDescriptor_t c, cudnnStatus_t *st)
{
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendAttributeName_t dn[] = { CUDNN_ATTR_MATMUL_COMP_TYPE };
    cudnnBackendAttributeType_t dt[] = { CUDNN_TYPE_DATA_TYPE };
    const void *dv[] = { &f };
    cudnnBackendDescriptor_t desc = finalized(CUDNN_BACKEND_MATMUL_DESCRIPTOR, st, 1, dn, dt, dv);
    cudnnBackendAttributeName_t n[] = { CUDNN_ATTR_OPERATION_MATMUL_ADESC,
                                        CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                                        CUDNN_ATTR_OPERATION_MATMUL_CDESC,
                                        CUDNN_ATTR_OPERATION_MATMUL_DESC };
    cudnnBackendAttributeType_t t[4] = { CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR };
    const void *v[] = { &a, &b, &c, &desc };
    return finalized(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, st, 4, n, t, v);
}

static cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                                          cudnnStatus_t *st)
{
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendAttributeName_t dn[] = { CUDNN_ATTR_POINTWISE_MODE,
                                         CUDNN_ATTR_POINTWISE_MATH_PREC };
    cudnnBackendAttributeType_t dt[] = { CUDNN_TYPE_POINTWISE_MODE, CUDNN_TYPE_DATA_TYPE };
    const void *dv[] = { &mode, &f };
    cudnnBackendDescriptor_t desc =
        finalized(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, st, 2, dn, dt, dv);
    cudnnBackendAttributeName_t n[] = { CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                        CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                        CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                                        CUDNN_ATTR_OPERATION_POINTWISE_BDESC };
    cudnnBackendAttributeType_t t[4] = { CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR };
    const void *v[] = { &desc, &x, &y, &b };
    return finalized(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, st, b ? 4 : 3, n, t, v);
}

static cudnnBackendDescriptor_t graph_of(cudnnBackendDescriptor_t *ops, int n, cudnnStatus_t *st)
{
    cudnnBackendDescriptor_t g = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(g);
    *st = s;
    return g;
}

/* O = exp(Q K^T) V, T = 8, D = 16 (the smallest graph the emulator takes for attention);
 * q_inner: the stride of Q's head-dim axis (1, or a layout the engines refuse). The plan's
 * status, and the plan in *plan when it finalized. */
static cudnnStatus_t tiny_attention(int64_t q_inner, cudnnBackendDescriptor_t *plan,
                                    cudnnBackendDescriptor_t *graph)
{
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    cudnnDataType_t h = CUDNN_DATA_HALF, f = CUDNN_DATA_FLOAT;
    int64_t qd[] = { 1, 1, 8, 16 }, qs[] = { 8 * 16 * q_inner, 8 * 16 * q_inner,
                                              16 * q_inner, q_inner };
    int64_t kd[] = { 1, 1, 16, 8 }, ks[] = { 128, 128, 1, 16 };
    int64_t sd[] = { 1, 1, 8, 8 }, ss[] = { 64, 64, 8, 1 };
    int64_t vd[] = { 1, 1, 8, 16 }, vs[] = { 128, 128, 16, 1 };
    cudnnBackendDescriptor_t q = tensor(1, h, qd, qs, 4, false, 1, &st);
    cudnnBackendDescriptor_t kt = tensor(2, h, kd, ks, 4, false, 1, &st);
    cudnnBackendDescriptor_t v = tensor(3, h, vd, vs, 4, false, 1, &st);
    cudnnBackendDescriptor_t o = tensor(4, h, vd, vs, 4, false, 1, &st);
    cudnnBackendDescriptor_t s = tensor(100, f, sd, ss, 4, true, 1, &st);
    cudnnBackendDescriptor_t p = tensor(101, h, sd, ss, 4, true, 1, &st);
    cudnnBackendDescriptor_t ops[3] = { matmul(q, kt, s, &st),
                                        pointwise(CUDNN_POINTWISE_EXP, s, NULL, p, &st),
                                        matmul(p, v, o, &st) };
    CHECK_EQ(st, CUDNN_STATUS_SUCCESS);
    *graph = graph_of(ops, 3, &st);
    CHECK_EQ(st, CUDNN_STATUS_SUCCESS);
    fg_sdpa_graph g = { .graph = *graph };
    fg_sdpa_plan pl;
    const char *what = "";
    st = fg_sdpa_plan_make(&g, NULL, &pl, &what);
    *plan = pl.plan;
    if (pl.config)
        cudnnBackendDestroyDescriptor(pl.config);
    cudnnBackendDescriptor_t all[] = { q, kt, v, o, s, p, ops[0], ops[1], ops[2] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) /* the graph keeps copies */
        cudnnBackendDestroyDescriptor(all[i]);
    return st;
}

static cudnnStatus_t execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, int n,
                             int64_t *uids, void **ptrs)
{
    cudnnBackendDescriptor_t vp = NULL;
    void *ws = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n,
                                     uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                     CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                     1, &ws);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(vp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendExecute(handle, plan, vp);
    if (vp)
        cudnnBackendDestroyDescriptor(vp);
    return s;
}

static void graph_strides_and_packs(void)
{
    cudnnBackendDescriptor_t plan = NULL, graph = NULL;
    CHECK_EQ(tiny_attention(2, &plan, &graph), CUDNN_STATUS_NOT_SUPPORTED);
    CHECK(plan == NULL);
    cudnnBackendDestroyDescriptor(graph);
    CHECK_EQ(tiny_attention(1, &plan, &graph), CUDNN_STATUS_SUCCESS);
    cudnnHandle_t handle = NULL;
    CHECK_EQ(cudnnCreate(&handle), CUDNN_STATUS_SUCCESS);
    CHECK_EQ(cudnnSetStream(handle, 0), CUDNN_STATUS_SUCCESS);
    char *mem = NULL;
    CHECK_EQ(cudaMalloc((void **)&mem, 4 << 10), cudaSuccess);
    int64_t uids[] = { 1, 2, 3, 4 };
    void *ptrs[] = { mem, mem + 1024, mem + 2048, mem + 3072 };
    CHECK_EQ(execute(handle, plan, 4, uids, ptrs), CUDNN_STATUS_SUCCESS);
    CHECK_EQ(execute(handle, plan, 3, uids, ptrs), CUDNN_STATUS_BAD_PARAM); /* no O */
    ptrs[0] = mem + 2;
    CHECK_EQ(execute(handle, plan, 4, uids, ptrs), CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER);
    ptrs[0] = mem + 3968; /* Q's 256 bytes run past the allocation */
    CHECK_EQ(execute(handle, plan, 4, uids, ptrs), CUDNN_STATUS_EXECUTION_FAILED);
    cudaFree(mem);
    cudnnDestroy(handle);
    cudnnBackendDestroyDescriptor(plan);
    cudnnBackendDestroyDescriptor(graph);
}

static void graph_bad_descriptors(void)
{
    int64_t d[] = { 1, 1, 4, 4 }, s[] = { 16, 16, 4, 1 }, one[] = { 1, 1, 1, 1 };
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    cudnnBackendDestroyDescriptor(tensor(1, CUDNN_DATA_HALF, d, s, 4, false, 0, &st));
    CHECK_EQ(st, CUDNN_STATUS_BAD_PARAM); /* no unique id */
    st = CUDNN_STATUS_SUCCESS;
    cudnnBackendDestroyDescriptor(tensor(1, CUDNN_DATA_HALF, d, s, 3, false, 1, &st));
    CHECK_EQ(st, CUDNN_STATUS_BAD_PARAM); /* 4 dimensions, 3 strides */
    st = CUDNN_STATUS_SUCCESS;
    cudnnBackendDescriptor_t x = tensor(1, CUDNN_DATA_FLOAT, d, s, 4, false, 1, &st);
    cudnnBackendDescriptor_t b = tensor(1, CUDNN_DATA_FLOAT, one, one, 4, false, 1, &st);
    cudnnBackendDescriptor_t y = tensor(2, CUDNN_DATA_FLOAT, d, s, 4, false, 1, &st);
    cudnnBackendDescriptor_t op = pointwise(CUDNN_POINTWISE_ADD, x, b, y, &st);
    CHECK_EQ(st, CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t g = graph_of(&op, 1, &st);
    CHECK_EQ(st, CUDNN_STATUS_BAD_PARAM); /* uid 1 names two tensors */
    cudnnBackendDescriptor_t all[] = { x, b, y, op, g };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        cudnnBackendDestroyDescriptor(all[i]);
}

/* ---- through the plugin -------------------------------------------------------------------- */

typedef struct instance {
    fg_fake_host host;
    const fg_backend_vtable *vt;
    void *state, *queue;
} instance;

static const fg_plugin *plugin;

static fg_status open_instance(instance *in, const char *attention, fg_error *err)
{
    memset(in, 0, sizeof *in);
    fg_fake_host_init(&in->host, plugin, NULL);
    fg_fake_host_set(&in->host, "attention", attention);
    in->vt = plugin->vtable;
    fg_status st = plugin->init(&in->host.host, &in->state, err);
    if (st == FG_OK)
        st = in->vt->queue_create(in->state, 0, &in->queue, err);
    return st;
}

static void close_instance(instance *in)
{
    if (in->queue)
        in->vt->queue_destroy(in->state, in->queue);
    if (in->state)
        plugin->deinit(in->state);
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* y (bf16, B*T*C values into host y) from the same qkv on an instance; FG status of the op. */
static fg_status forward(instance *in, const fg_attention_desc *d, const uint16_t *qkv,
                         uint16_t *y, int backward, fg_error *err)
{
    size_t c = (size_t)d->heads * d->head_dim, rows = (size_t)d->batch * d->seq;
    size_t nq = rows * 3 * c * 2, ny = rows * c * 2, nl = rows * d->heads * 4;
    size_t nw = in->vt->attention_workspace(in->state, d);
    void *gq = NULL, *gy = NULL, *gl = NULL, *gw = NULL, *gd = NULL;
    fg_status st = FG_OK;
    void **bufs[] = { &gq, &gy, &gl, &gw, &gd };
    size_t sizes[] = { nq, ny, nl, nw, nq };
    for (int i = 0; i < 5 && st == FG_OK; i++)
        st = in->vt->alloc(in->state, 0, sizes[i], bufs[i], err);
    if (st == FG_OK)
        st = in->vt->copy(in->state, in->queue, gq, 0, qkv, -1, nq, err);
    if (st == FG_OK)
        st = in->vt->attention_forward(in->state, in->queue, FG_BF16, d, gq, gy, gl, gw, err);
    if (st == FG_OK && backward) /* dy = y: dqkv into the qkv-shaped buffer */
        st = in->vt->attention_backward(in->state, in->queue, FG_BF16, d, gq, gy, gl, gy, gd,
                                        gw, err);
    if (st == FG_OK)
        st = in->vt->copy(in->state, in->queue, y, -1, gy, 0, ny, err);
    if (st == FG_OK)
        st = in->vt->queue_sync(in->state, in->queue, err);
    for (int i = 0; i < 5; i++)
        in->vt->free(in->state, 0, *bufs[i]);
    return st;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++)
        n++;
    return n;
}

static void plugin_cases(void)
{
    fg_attention_desc d12 = { sizeof d12, 1, 9, 2, 12, 1, 0.0f, 0, 0, 0 };
    fg_attention_desc d16 = { sizeof d16, 1, 9, 2, 16, 1, 0.0f, 0, 0, 0 };
    uint16_t qkv[9 * 3 * 32], y_auto[9 * 32], y_kernel[9 * 32];
    for (size_t i = 0; i < sizeof qkv / sizeof qkv[0]; i++)
        qkv[i] = to_bf16(sinf((float)i * 0.37f) * 2.0f);
    instance au, ke, cu;
    fg_error err = { 0 };
    CHECK_OK(open_instance(&au, "auto", &err), &err);
    CHECK_OK(open_instance(&ke, "kernel", &err), &err);
    CHECK_OK(open_instance(&cu, "cudnn", &err), &err);

    /* head size 12: the kernels, said once */
    CHECK_OK(forward(&au, &d12, qkv, y_auto, 0, &err), &err);
    CHECK_OK(forward(&au, &d12, qkv, y_auto, 0, &err), &err);
    CHECK_OK(forward(&ke, &d12, qkv, y_kernel, 0, &err), &err);
    CHECK(memcmp(y_auto, y_kernel, 9 * 24 * 2) == 0, "auto and kernel differ at head size 12");
    CHECK_CONTAINS(au.host.log, "attention forward B=1 T=9 H=2 D=12 bf16 causal: kernel: "
                                "head_dim 12 not a multiple of 8");
    CHECK_EQ(count(au.host.log, "D=12"), 1);
    CHECK_EQ(count(ke.host.log, "attention forward"), 0);
    fg_status st = forward(&cu, &d12, qkv, y_auto, 0, &err);
    CHECK_STATUS(st, FG_UNAVAILABLE, err);
    CHECK_CONTAINS(err.message, "attention = cudnn, but cuDNN cannot run B=1 T=9 H=2 D=12 bf16 "
                                "causal: head_dim 12 not a multiple of 8");

    /* head size 16: cuDNN, the deterministic backward engine */
    CHECK_OK(forward(&au, &d16, qkv, y_auto, 1, &err), &err);
    CHECK_OK(forward(&ke, &d16, qkv, y_kernel, 1, &err), &err);
    CHECK_CONTAINS(au.host.log, "attention forward B=1 T=9 H=2 D=16 bf16 causal: cudnn fused "
                                "SDPA (engine 8, deterministic, 1 config tried");
    CHECK_CONTAINS(au.host.log, "attention backward B=1 T=9 H=2 D=16 bf16 causal: cudnn fused "
                                "SDPA (engine 10, deterministic, 1 config tried");
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < 9 * 32; i++) {
        double a = from_bf16(y_auto[i]), b = from_bf16(y_kernel[i]);
        diff += (a - b) * (a - b);
        norm += b * b;
    }
    CHECK(norm > 0.0 && sqrt(diff / norm) < 1e-2, "cuDNN vs kernels: relative error %g",
          sqrt(diff / (norm > 0.0 ? norm : 1.0)));
    close_instance(&au);
    close_instance(&ke);
    close_instance(&cu);

    instance bad;
    st = open_instance(&bad, "sometimes", &err);
    CHECK_STATUS(st, FG_INVALID_ARGUMENT, err);
    close_instance(&bad);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: emu_sdpa PLUGIN.so\n");
        return 2;
    }
    graph_plans();
    graph_head_size_12();
    graph_strides_and_packs();
    graph_bad_descriptors();
    plugin = fg_test_need_plugin(argv[1], FG_KIND_BACKEND, "cuda");
    plugin_cases();
    return fg_test_report("emu_sdpa");
}
