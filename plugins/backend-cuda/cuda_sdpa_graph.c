/* The SDPA operation graph (cuda_sdpa_graph.h says what it computes): tensors, then the
 * forward or backward chain of operations, in cudnn-frontend's composite order. */
#include <stdbool.h>
#include <string.h>

#include "cuda_sdpa_graph.h"

#define FG_SDPA_ALIGN 16

/* A descriptor of `type`, remembered for fg_sdpa_graph_destroy. */
static cudnnStatus_t sdpa_create(fg_sdpa_graph *g, cudnnBackendDescriptorType_t type,
                                 cudnnBackendDescriptor_t *d)
{
    *d = NULL;
    if (g->count == FG_SDPA_MAX_DESCRIPTORS)
        return CUDNN_STATUS_INTERNAL_ERROR;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(type, d);
    if (s == CUDNN_STATUS_SUCCESS)
        g->made[g->count++] = *d;
    return s;
}

void fg_sdpa_graph_destroy(fg_sdpa_graph *g)
{
    for (int i = g->count - 1; i >= 0; i--)
        cudnnBackendDestroyDescriptor(g->made[i]);
    if (g->graph)
        cudnnBackendDestroyDescriptor(g->graph);
    memset(g, 0, sizeof *g);
}

/* ---- tensors ------------------------------------------------------------------------------ */

typedef struct sdpa_tensor_spec {
    int64_t uid;
    cudnnDataType_t type;
    int64_t dims[4], strides[4];
    bool is_virtual, by_value;
} sdpa_tensor_spec;

/* A first failing status is kept: the setters below chain on it. */
#define SDPA_TRY(expr, name)                                                               \
    do {                                                                                   \
        if (s == CUDNN_STATUS_SUCCESS) {                                                   \
            s = (expr);                                                                    \
            if (s != CUDNN_STATUS_SUCCESS)                                                 \
                *what = (name);                                                            \
        }                                                                                  \
    } while (0)

static cudnnStatus_t sdpa_tensor_make(fg_sdpa_graph *g, const sdpa_tensor_spec *t,
                                      cudnnBackendDescriptor_t *out, const char **what)
{
    cudnnBackendDescriptor_t d = NULL;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    int64_t align = FG_SDPA_ALIGN;
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d), "TENSOR_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                      &t->type), "CUDNN_ATTR_TENSOR_DATA_TYPE");
    SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4,
                                      t->dims), "CUDNN_ATTR_TENSOR_DIMENSIONS");
    SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4,
                                      t->strides), "CUDNN_ATTR_TENSOR_STRIDES");
    SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1,
                                      &t->uid), "CUDNN_ATTR_TENSOR_UNIQUE_ID");
    SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
                                      &align), "CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT");
    if (t->is_virtual)
        SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1,
                                          &t->is_virtual), "CUDNN_ATTR_TENSOR_IS_VIRTUAL");
    if (t->by_value)
        SDPA_TRY(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN,
                                          1, &t->by_value), "CUDNN_ATTR_TENSOR_IS_BY_VALUE");
    SDPA_TRY(cudnnBackendFinalize(d), "finalizing a TENSOR_DESCRIPTOR");
    *out = d;
    return s;
}

/* A virtual tensor of `type`: {b, h, rows, cols}, packed row-major. */
static cudnnStatus_t sdpa_virtual(fg_sdpa_graph *g, const fg_sdpa_shape *sh, int64_t rows,
                                  int64_t cols, cudnnDataType_t type,
                                  cudnnBackendDescriptor_t *out, const char **what)
{
    sdpa_tensor_spec t = { g->next_uid++, type, { sh->b, sh->h, rows, cols },
                           { sh->h * rows * cols, rows * cols, cols, 1 }, true, false };
    return sdpa_tensor_make(g, &t, out, what);
}

/* A by-value f32 scalar {1, 1, 1, 1}. */
static cudnnStatus_t sdpa_scalar(fg_sdpa_graph *g, int64_t uid, cudnnBackendDescriptor_t *out,
                                 const char **what)
{
    sdpa_tensor_spec t = { uid, CUDNN_DATA_FLOAT, { 1, 1, 1, 1 }, { 1, 1, 1, 1 }, false, true };
    return sdpa_tensor_make(g, &t, out, what);
}

/* One head's {B, H, T, D} view of fused (B, T, 3C) or plain (B, T, C) rows; `kt` swaps the
 * last two axes ({B, H, D, T}: K^T or V^T for the matmuls). */
static cudnnStatus_t sdpa_io(fg_sdpa_graph *g, const fg_sdpa_shape *sh, int64_t uid,
                             int fused, int kt, cudnnBackendDescriptor_t *out, const char **what)
{
    int64_t c = sh->h * sh->d, row = fused ? 3 * c : c;
    sdpa_tensor_spec t = { uid, sh->io, { sh->b, sh->h, sh->t, sh->d },
                           { sh->t * row, sh->d, row, 1 }, false, false };
    if (kt) {
        t.dims[2] = sh->d;
        t.dims[3] = sh->t;
        t.strides[2] = 1;
        t.strides[3] = row;
    }
    return sdpa_tensor_make(g, &t, out, what);
}

/* An f32 row statistic {B, H, T, 1} (lse, delta): non-virtual. */
static cudnnStatus_t sdpa_rowstat(fg_sdpa_graph *g, const fg_sdpa_shape *sh, int64_t uid,
                                  cudnnBackendDescriptor_t *out, const char **what)
{
    sdpa_tensor_spec t = { uid, CUDNN_DATA_FLOAT, { sh->b, sh->h, sh->t, 1 },
                           { sh->h * sh->t, sh->t, 1, 1 }, false, false };
    return sdpa_tensor_make(g, &t, out, what);
}

/* ---- operations ----------------------------------------------------------------------------- */

static cudnnStatus_t sdpa_add_op(fg_sdpa_graph *g, cudnnBackendDescriptor_t op)
{
    if (g->op_count == (int)(sizeof g->ops / sizeof g->ops[0]))
        return CUDNN_STATUS_INTERNAL_ERROR;
    g->ops[g->op_count++] = op;
    return CUDNN_STATUS_SUCCESS;
}

/* c = a b (batched over B, H), f32 accumulation. */
static cudnnStatus_t sdpa_matmul(fg_sdpa_graph *g, cudnnBackendDescriptor_t a,
                                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                                 const char **what)
{
    cudnnBackendDescriptor_t desc = NULL, op = NULL;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &desc), "MATMUL_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                      &comp), "CUDNN_ATTR_MATMUL_COMP_TYPE");
    SDPA_TRY(cudnnBackendFinalize(desc), "finalizing a MATMUL_DESCRIPTOR");
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &op),
             "OPERATION_MATMUL_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a),
             "CUDNN_ATTR_OPERATION_MATMUL_ADESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b),
             "CUDNN_ATTR_OPERATION_MATMUL_BDESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c),
             "CUDNN_ATTR_OPERATION_MATMUL_CDESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_DESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc),
             "CUDNN_ATTR_OPERATION_MATMUL_DESC");
    SDPA_TRY(cudnnBackendFinalize(op), "finalizing an OPERATION_MATMUL_DESCRIPTOR");
    SDPA_TRY(sdpa_add_op(g, op), "too many operations");
    return s;
}

/* y = mode(x[, b][, t]); axis >= 0 for GEN_INDEX; prec is the math precision. */
static cudnnStatus_t sdpa_pointwise(fg_sdpa_graph *g, cudnnPointwiseMode_t mode,
                                    cudnnDataType_t prec, int64_t axis,
                                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                    cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                                    const char **what)
{
    cudnnBackendDescriptor_t desc = NULL, op = NULL;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &desc), "POINTWISE_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(desc, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE,
                                      1, &mode), "CUDNN_ATTR_POINTWISE_MODE");
    SDPA_TRY(cudnnBackendSetAttribute(desc, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE,
                                      1, &prec), "CUDNN_ATTR_POINTWISE_MATH_PREC");
    if (axis >= 0)
        SDPA_TRY(cudnnBackendSetAttribute(desc, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1,
                                          &axis), "CUDNN_ATTR_POINTWISE_AXIS");
    SDPA_TRY(cudnnBackendFinalize(desc), "finalizing a POINTWISE_DESCRIPTOR");
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op),
             "OPERATION_POINTWISE_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc),
             "CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x),
             "CUDNN_ATTR_OPERATION_POINTWISE_XDESC");
    if (b)
        SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b),
                 "CUDNN_ATTR_OPERATION_POINTWISE_BDESC");
    if (t)
        SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t),
                 "CUDNN_ATTR_OPERATION_POINTWISE_TDESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y),
             "CUDNN_ATTR_OPERATION_POINTWISE_YDESC");
    SDPA_TRY(cudnnBackendFinalize(op), "finalizing an OPERATION_POINTWISE_DESCRIPTOR");
    SDPA_TRY(sdpa_add_op(g, op), "too many operations");
    return s;
}

/* y = reduce(x) over the axes where y has extent 1. */
static cudnnStatus_t sdpa_reduction(fg_sdpa_graph *g, cudnnReduceTensorOp_t mode,
                                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                                    const char **what)
{
    cudnnBackendDescriptor_t desc = NULL, op = NULL;
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &desc), "REDUCTION_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(desc, CUDNN_ATTR_REDUCTION_OPERATOR,
                                      CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode),
             "CUDNN_ATTR_REDUCTION_OPERATOR");
    SDPA_TRY(cudnnBackendSetAttribute(desc, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE,
                                      1, &comp), "CUDNN_ATTR_REDUCTION_COMP_TYPE");
    SDPA_TRY(cudnnBackendFinalize(desc), "finalizing a REDUCTION_DESCRIPTOR");
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, &op),
             "OPERATION_REDUCTION_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x),
             "CUDNN_ATTR_OPERATION_REDUCTION_XDESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y),
             "CUDNN_ATTR_OPERATION_REDUCTION_YDESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc),
             "CUDNN_ATTR_OPERATION_REDUCTION_DESC");
    SDPA_TRY(cudnnBackendFinalize(op), "finalizing an OPERATION_REDUCTION_DESCRIPTOR");
    SDPA_TRY(sdpa_add_op(g, op), "too many operations");
    return s;
}

/* y: the same memory as x seen through y's dims and strides (a transpose), in y's type. */
static cudnnStatus_t sdpa_reshape(fg_sdpa_graph *g, cudnnBackendDescriptor_t x,
                                  cudnnBackendDescriptor_t y, const char **what)
{
    cudnnBackendDescriptor_t op = NULL;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    SDPA_TRY(sdpa_create(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, &op),
             "OPERATION_RESHAPE_DESCRIPTOR");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x),
             "CUDNN_ATTR_OPERATION_RESHAPE_XDESC");
    SDPA_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y),
             "CUDNN_ATTR_OPERATION_RESHAPE_YDESC");
    SDPA_TRY(cudnnBackendFinalize(op), "finalizing an OPERATION_RESHAPE_DESCRIPTOR");
    SDPA_TRY(sdpa_add_op(g, op), "too many operations");
    return s;
}

/* A virtual {B, H, T, T} transpose of s (strides {HTT, TT, 1, T}) in `type`. */
static cudnnStatus_t sdpa_transposed(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                                     cudnnBackendDescriptor_t x, cudnnDataType_t type,
                                     cudnnBackendDescriptor_t *out, const char **what)
{
    int64_t t = sh->t;
    sdpa_tensor_spec spec = { g->next_uid++, type, { sh->b, sh->h, t, t },
                              { sh->h * t * t, t * t, 1, t }, true, false };
    cudnnStatus_t s = sdpa_tensor_make(g, &spec, out, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_reshape(g, x, *out, what);
    return s;
}

/* ---- the two chains ----------------------------------------------------------------------- */

/* scores = (q k^T) * scale, causal-masked: the chain both passes start with. */
static cudnnStatus_t sdpa_scores(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                                 cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
                                 cudnnBackendDescriptor_t scale, cudnnBackendDescriptor_t *out,
                                 const char **what)
{
    cudnnBackendDescriptor_t s0 = NULL, s1 = NULL;
    int64_t t = sh->t;
    cudnnStatus_t s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_FLOAT, &s0, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_matmul(g, q, kt, s0, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_FLOAT, &s1, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, s0, scale, NULL, s1,
                           what);
    *out = s1;
    return s;
}

/* x masked where col > row: (row >= col) ? x : -inf (top-left diagonal). */
static cudnnStatus_t sdpa_causal(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                                 cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t *out,
                                 const char **what)
{
    cudnnBackendDescriptor_t row = NULL, col = NULL, keep = NULL, neg_inf = NULL, y = NULL;
    int64_t t = sh->t;
    cudnnStatus_t s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_INT32, &row, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, x, NULL, NULL, row,
                           what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_INT32, &col, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, x, NULL, NULL, col,
                           what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_BOOLEAN, &keep, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL,
                           keep, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_scalar(g, FG_SDPA_UID_NEG_INF, &neg_inf, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_FLOAT, &y, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, neg_inf,
                           keep, y, what);
    *out = y;
    return s;
}

/* softmax with stats: P (in the I/O type) and lse = max + log(sum). */
static cudnnStatus_t sdpa_softmax(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                                  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t stats,
                                  cudnnBackendDescriptor_t *p, const char **what)
{
    cudnnBackendDescriptor_t mx = NULL, z = NULL, e = NULL, sum = NULL, logsum = NULL;
    int64_t t = sh->t;
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = sdpa_virtual(g, sh, t, 1, f, &mx, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_reduction(g, CUDNN_REDUCE_TENSOR_MAX, x, mx, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, f, &z, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_SUB, f, -1, x, mx, NULL, z, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, f, &e, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_EXP, f, -1, z, NULL, NULL, e, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, 1, f, &sum, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, sum, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, 1, f, &logsum, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_LOG, f, -1, sum, NULL, NULL, logsum, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_ADD, f, -1, mx, logsum, NULL, stats, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, sh->io, p, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_DIV, f, -1, e, sum, NULL, *p, what);
    return s;
}

static cudnnStatus_t sdpa_forward(fg_sdpa_graph *g, const fg_sdpa_shape *sh, const char **what)
{
    cudnnBackendDescriptor_t q = NULL, kt = NULL, v = NULL, o = NULL, stats = NULL;
    cudnnBackendDescriptor_t scale = NULL, scores = NULL, p = NULL;
    cudnnStatus_t s = sdpa_io(g, sh, FG_SDPA_UID_Q, 1, 0, &q, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_K, 1, 1, &kt, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_V, 1, 0, &v, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_O, 0, 0, &o, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_rowstat(g, sh, FG_SDPA_UID_STATS, &stats, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_scalar(g, FG_SDPA_UID_SCALE, &scale, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_scores(g, sh, q, kt, scale, &scores, what);
    if (s == CUDNN_STATUS_SUCCESS && sh->causal)
        s = sdpa_causal(g, sh, scores, &scores, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_softmax(g, sh, scores, stats, &p, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_matmul(g, p, v, o, what);
    return s;
}

/* delta = rowsum(dO * O) * 1 into the workspace's f32 (B, H, T, 1). */
static cudnnStatus_t sdpa_delta(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                                cudnnBackendDescriptor_t d_o, cudnnBackendDescriptor_t o,
                                cudnnBackendDescriptor_t *delta, const char **what)
{
    cudnnBackendDescriptor_t prod = NULL, rows = NULL, one = NULL;
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = sdpa_virtual(g, sh, sh->t, sh->d, f, &prod, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_MUL, f, -1, d_o, o, NULL, prod, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, sh->t, 1, f, &rows, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_reduction(g, CUDNN_REDUCE_TENSOR_ADD, prod, rows, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_scalar(g, FG_SDPA_UID_ONE, &one, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_rowstat(g, sh, FG_SDPA_UID_DELTA, delta, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_MUL, f, -1, rows, one, NULL, *delta, what);
    return s;
}

/* dS = P (dP - delta) scale, dP = dO V^T. */
static cudnnStatus_t sdpa_ds(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                             cudnnBackendDescriptor_t d_o, cudnnBackendDescriptor_t vt,
                             cudnnBackendDescriptor_t p, cudnnBackendDescriptor_t delta,
                             cudnnBackendDescriptor_t scale, cudnnBackendDescriptor_t *ds,
                             const char **what)
{
    cudnnBackendDescriptor_t dp = NULL, dps = NULL, dsp = NULL;
    int64_t t = sh->t;
    cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = sdpa_virtual(g, sh, t, t, f, &dp, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_matmul(g, d_o, vt, dp, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, f, &dps, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_SUB, f, -1, dp, delta, NULL, dps, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, f, &dsp, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_MUL, f, -1, dps, p, NULL, dsp, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, f, ds, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_MUL, f, -1, dsp, scale, NULL, *ds, what);
    return s;
}

/* dQ = dS K, K being K^T reshaped back to {B, H, T, D}; through the f32 accumulator in the
 * workspace when dq_accum. */
static cudnnStatus_t sdpa_dq(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                             cudnnBackendDescriptor_t ds, cudnnBackendDescriptor_t kt,
                             cudnnBackendDescriptor_t dq, const char **what)
{
    cudnnBackendDescriptor_t k = NULL, acc = NULL;
    int64_t c = sh->h * sh->d;
    sdpa_tensor_spec ks = { g->next_uid++, sh->io, { sh->b, sh->h, sh->t, sh->d },
                            { sh->t * 3 * c, sh->d, 3 * c, 1 }, true, false };
    cudnnStatus_t s = sdpa_tensor_make(g, &ks, &k, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_reshape(g, kt, k, what);
    if (s != CUDNN_STATUS_SUCCESS || !sh->dq_accum)
        return s == CUDNN_STATUS_SUCCESS ? sdpa_matmul(g, ds, k, dq, what) : s;
    sdpa_tensor_spec as = { FG_SDPA_UID_DQ_ACCUM, CUDNN_DATA_FLOAT,
                            { sh->b, sh->h, sh->t, sh->d },
                            { sh->h * sh->t * sh->d, sh->t * sh->d, sh->d, 1 }, false, false };
    s = sdpa_tensor_make(g, &as, &acc, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_matmul(g, ds, k, acc, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, -1, acc, NULL, NULL,
                           dq, what);
    return s;
}

static cudnnStatus_t sdpa_backward(fg_sdpa_graph *g, const fg_sdpa_shape *sh, const char **what)
{
    cudnnBackendDescriptor_t q = NULL, kt = NULL, vt = NULL, o = NULL, d_o = NULL;
    cudnnBackendDescriptor_t stats = NULL, scale = NULL, dq = NULL, dk = NULL, dv = NULL;
    cudnnBackendDescriptor_t delta = NULL, scores = NULL, z = NULL, p = NULL, pt = NULL;
    cudnnBackendDescriptor_t ds = NULL, dst = NULL;
    int64_t t = sh->t;
    cudnnStatus_t s = sdpa_io(g, sh, FG_SDPA_UID_Q, 1, 0, &q, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_K, 1, 1, &kt, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_V, 1, 1, &vt, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_O, 0, 0, &o, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_DO, 0, 0, &d_o, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_DQ, 1, 0, &dq, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_DK, 1, 0, &dk, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_io(g, sh, FG_SDPA_UID_DV, 1, 0, &dv, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_rowstat(g, sh, FG_SDPA_UID_STATS, &stats, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_scalar(g, FG_SDPA_UID_SCALE, &scale, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_delta(g, sh, d_o, o, &delta, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_scores(g, sh, q, kt, scale, &scores, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_FLOAT, &z, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, scores, stats, NULL, z,
                           what);
    if (s == CUDNN_STATUS_SUCCESS && sh->causal)
        s = sdpa_causal(g, sh, z, &z, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_virtual(g, sh, t, t, CUDNN_DATA_FLOAT, &p, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, z, NULL, NULL, p, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_transposed(g, sh, p, sh->io, &pt, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_matmul(g, pt, d_o, dv, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_ds(g, sh, d_o, vt, p, delta, scale, &ds, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_transposed(g, sh, ds, sh->io, &dst, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_matmul(g, dst, q, dk, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_dq(g, sh, ds, kt, dq, what);
    return s;
}

/* OPERATIONGRAPH_HANDLE is deprecated in cuDNN 9 but still what cudnn-frontend sets when
 * it has a handle (heuristics then ask that handle's device). */
static cudnnStatus_t sdpa_graph_handle(cudnnBackendDescriptor_t graph, cudnnHandle_t handle)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                    &handle);
#pragma GCC diagnostic pop
}

cudnnStatus_t fg_sdpa_graph_build(fg_sdpa_graph *g, const fg_sdpa_shape *sh,
                                  cudnnHandle_t handle, const char **what)
{
    memset(g, 0, sizeof *g);
    g->next_uid = FG_SDPA_UID_VIRTUAL;
    *what = "";
    cudnnStatus_t s = sh->backward ? sdpa_backward(g, sh, what) : sdpa_forward(g, sh, what);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    SDPA_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph),
             "OPERATIONGRAPH_DESCRIPTOR");
    if (handle)
        SDPA_TRY(sdpa_graph_handle(g->graph, handle), "CUDNN_ATTR_OPERATIONGRAPH_HANDLE");
    SDPA_TRY(cudnnBackendSetAttribute(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, g->op_count, g->ops),
             "CUDNN_ATTR_OPERATIONGRAPH_OPS");
    SDPA_TRY(cudnnBackendFinalize(g->graph), "finalizing the OPERATIONGRAPH");
    return s;
}

size_t fg_sdpa_graph_workspace(const fg_sdpa_shape *sh)
{
    if (!sh->backward)
        return 0;
    size_t rows = (size_t)(sh->b * sh->h * sh->t);
    size_t bytes = (rows * sizeof(float) + 255) / 256 * 256;
    if (sh->dq_accum)
        bytes += (rows * (size_t)sh->d * sizeof(float) + 255) / 256 * 256;
    return bytes;
}
