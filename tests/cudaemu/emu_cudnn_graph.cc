/* A CPU reference of the cuDNN backend (graph) API calls backend-cuda's fused attention
 * makes (plugins/backend-cuda/cuda_sdpa_*.c), from NVIDIA's documentation of the backend
 * descriptors (cudnn_graph.h; cuDNN 9 "Backend Descriptor Types") and of the SDPA support
 * surface as cudnn-frontend states it for cuDNN 9.19 on sm_90 (node/sdpa_support_surface.h,
 * node/scaled_dot_product_flash_attention.h):
 *
 *   descriptors  TENSOR, MATMUL, POINTWISE, REDUCTION, OPERATION_{MATMUL, POINTWISE,
 *                REDUCTION, RESHAPE}, OPERATIONGRAPH, ENGINEHEUR, ENGINECFG, ENGINE,
 *                EXECUTION_PLAN, VARIANT_PACK (others: NOT_SUPPORTED, "not emulated").
 *                An attribute of the wrong type or count, or a descriptor attribute that
 *                is not finalized, is refused at set time (BAD_PARAM, BAD_PARAM_NOT_FINALIZED);
 *                a descriptor referenced by another is copied then, as cuDNN does, so it
 *                may be destroyed afterwards.
 *   finalize     TENSOR: data type, dimensions, strides, unique id and byte alignment set;
 *                as many strides as dimensions (1..8), all positive, alignment a power of
 *                two (BAD_PARAM). Operations: required inputs per mode, shapes that chain
 *                (matmul [.., M, K] x [.., K, N] -> [.., M, N], batch axes equal or 1;
 *                pointwise inputs equal to the output or 1 per axis; a reduction's output 1
 *                on the reduced axes; a reshape keeps the element count and the memory span)
 *                (BAD_PARAM); OPERATIONGRAPH: one description per unique id, each tensor
 *                written by at most one operation, no virtual tensor read before it is
 *                written, no cycle (BAD_PARAM).
 *   heuristics   mode A/B/fallback; a graph of the SDPA pattern (two or more matmuls
 *                whose first reads two non-virtual tensors, an EXP) gets the emulator's
 *                fused engines, best first: forward engine 8 (TENSOR_CORE); backward
 *                engine 9 (TENSOR_CORE, NONDETERMINISTIC: a dQ accumulated with atomics)
 *                then engine 10 (TENSOR_CORE). Other graphs get none. The engine ids and
 *                workspace sizes are the emulator's own, not cuDNN's.
 *   plan         the support surface, refused with NOT_SUPPORTED as cuDNN refuses an engine
 *                config at EXECUTION_PLAN finalize: I/O tensors all f16 or all bf16 (f32 only
 *                for row statistics {B, H, T, 1} and, backward, an accumulator), head dim a
 *                multiple of 8 and at most 256 (sm_90), the head-dim axis of every I/O tensor
 *                with stride 1, I/O tensors 16-byte aligned.
 *   execute      a live handle; finalized plan and variant pack; every non-virtual tensor
 *                of the graph in the pack and no other (BAD_PARAM); pointers aligned as their
 *                tensors say (BAD_PARAM_MISALIGNED_POINTER); every tensor's bytes and the
 *                plan's workspace in device memory (EXECUTION_FAILED). The workspace is
 *                filled with 0xff bytes first (a real engine scribbles on it), then the graph
 *                runs at enqueue, after the stream's earlier work: operations in dependency
 *                order, every value f32, each tensor's values rounded to its data type when
 *                written (a virtual bf16 P is bf16 before P.V, as the fused engines keep P
 *                in the I/O type for the second matmul; a virtual f32 stays f32), matmul
 *                sums in k order in f32, reductions in axis order in f32.
 * The fused engines' own tile orders and their online softmax give different last bits;
 * whether the real library accepts the graph is for the GPU or tests/cuda/sdpa_aot.c.
 * Test-only. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cudnn.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "emu_api.h"
#include "emu_types.h"

namespace {

constexpr uint32_t kBackend = 0x646e6e42u;
constexpr int kRank = 4; /* the rank the emulated operations take */

struct tensor_info {
    int64_t uid = 0;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    int rank = 0;
    int64_t dims[8] = {}, strides[8] = {};
    int64_t align = 0;
    bool is_virtual = false, by_value = false;
};

enum op_kind { OP_MATMUL, OP_POINTWISE, OP_REDUCTION, OP_RESHAPE };

/* An operation, or (kind only partly) the MATMUL/POINTWISE/REDUCTION descriptor it uses. */
struct op_info {
    op_kind kind = OP_MATMUL;
    int mode = 0;                       /* pointwise mode or reduction operator */
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    int64_t axis = -1;                  /* GEN_INDEX */
    tensor_info x, b, t, y;             /* matmul: x = A, b = B, y = C */
    bool has_b = false, has_t = false;
};

struct graph_info {
    std::vector<op_info> ops;           /* dependency order */
    std::map<int64_t, tensor_info> tensors;
    std::set<int64_t> written;
    bool sdpa = false, backward = false;
    int64_t b = 0, h = 0, t = 0, d = 0;
    cudnnDataType_t io = CUDNN_DATA_FLOAT;
};

struct engine_info {
    std::shared_ptr<const graph_info> graph;
    int64_t index = -1;
    std::vector<cudnnBackendNumericalNote_t> notes;
};

struct attr {
    cudnnBackendAttributeType_t type;
    int64_t count;
    std::vector<char> bytes;
};

struct desc {
    uint32_t magic = kBackend;
    cudnnBackendDescriptorType_t type;
    bool finalized = false;
    std::map<int, attr> attrs;               /* values as set */
    std::map<int, tensor_info> tensor_refs;  /* operations: tensors as set */
    bool has_cfg = false;
    op_info cfg;                             /* MATMUL/POINTWISE/REDUCTION desc; an op */
    std::vector<op_info> ops;                /* OPERATIONGRAPH_OPS as set */
    tensor_info tensor;                      /* TENSOR, finalized */
    std::shared_ptr<const graph_info> graph; /* graph, heuristics, engine, config, plan */
    std::vector<engine_info> results;        /* heuristics */
    engine_info engine;                      /* config, engine, plan */
    int64_t workspace = 0;                   /* plan */
};

cudnnStatus_t fail(cudnnStatus_t s, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

cudnnStatus_t fail(cudnnStatus_t s, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuDNN (emulated): %s: ", who);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return s;
}

desc *as_desc(const void *p)
{
    desc *d = (desc *)p;
    return d && d->magic == kBackend ? d : nullptr;
}

/* ---- attribute types ------------------------------------------------------------------------ */

size_t type_size(cudnnBackendAttributeType_t t)
{
    switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return 8;
    case CUDNN_TYPE_FLOAT: return 4;
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_CHAR: return 1;
    default: return 4; /* the enums and INT32 */
    }
}

struct attr_rule {
    cudnnBackendDescriptorType_t desc;
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t max_count;
};

#define R(d, n, t, c) { CUDNN_BACKEND_##d##_DESCRIPTOR, CUDNN_ATTR_##n, CUDNN_TYPE_##t, c }
const attr_rule kRules[] = {
    R(TENSOR, TENSOR_DATA_TYPE, DATA_TYPE, 1), R(TENSOR, TENSOR_DIMENSIONS, INT64, 8),
    R(TENSOR, TENSOR_STRIDES, INT64, 8), R(TENSOR, TENSOR_UNIQUE_ID, INT64, 1),
    R(TENSOR, TENSOR_BYTE_ALIGNMENT, INT64, 1), R(TENSOR, TENSOR_IS_VIRTUAL, BOOLEAN, 1),
    R(TENSOR, TENSOR_IS_BY_VALUE, BOOLEAN, 1),
    R(MATMUL, MATMUL_COMP_TYPE, DATA_TYPE, 1),
    R(OPERATION_MATMUL, OPERATION_MATMUL_ADESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_MATMUL, OPERATION_MATMUL_BDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_MATMUL, OPERATION_MATMUL_CDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_MATMUL, OPERATION_MATMUL_DESC, BACKEND_DESCRIPTOR, 1),
    R(POINTWISE, POINTWISE_MODE, POINTWISE_MODE, 1),
    R(POINTWISE, POINTWISE_MATH_PREC, DATA_TYPE, 1), R(POINTWISE, POINTWISE_AXIS, INT64, 1),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_PW_DESCRIPTOR, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_XDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_BDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_TDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_POINTWISE, OPERATION_POINTWISE_YDESC, BACKEND_DESCRIPTOR, 1),
    R(REDUCTION, REDUCTION_OPERATOR, REDUCTION_OPERATOR_TYPE, 1),
    R(REDUCTION, REDUCTION_COMP_TYPE, DATA_TYPE, 1),
    R(OPERATION_REDUCTION, OPERATION_REDUCTION_XDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_REDUCTION, OPERATION_REDUCTION_YDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_REDUCTION, OPERATION_REDUCTION_DESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_RESHAPE, OPERATION_RESHAPE_XDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATION_RESHAPE, OPERATION_RESHAPE_YDESC, BACKEND_DESCRIPTOR, 1),
    R(OPERATIONGRAPH, OPERATIONGRAPH_OPS, BACKEND_DESCRIPTOR, 1 << 20),
    R(OPERATIONGRAPH, OPERATIONGRAPH_HANDLE, HANDLE, 1),
    R(ENGINEHEUR, ENGINEHEUR_OPERATION_GRAPH, BACKEND_DESCRIPTOR, 1),
    R(ENGINEHEUR, ENGINEHEUR_MODE, HEUR_MODE, 1),
    R(EXECUTION_PLAN, EXECUTION_PLAN_ENGINE_CONFIG, BACKEND_DESCRIPTOR, 1),
    R(VARIANT_PACK, VARIANT_PACK_UNIQUE_IDS, INT64, 1 << 20),
    R(VARIANT_PACK, VARIANT_PACK_DATA_POINTERS, VOID_PTR, 1 << 20),
    R(VARIANT_PACK, VARIANT_PACK_WORKSPACE, VOID_PTR, 1),
};
#undef R

const attr_rule *rule_of(cudnnBackendDescriptorType_t d, cudnnBackendAttributeName_t n)
{
    for (const attr_rule &r : kRules)
        if (r.desc == d && r.name == n)
            return &r;
    return nullptr;
}

template <typename T> bool get(const desc *d, int name, T *out)
{
    auto it = d->attrs.find(name);
    if (it == d->attrs.end() || it->second.bytes.size() < sizeof(T))
        return false;
    memcpy(out, it->second.bytes.data(), sizeof(T));
    return true;
}

template <typename T> std::vector<T> get_array(const desc *d, int name)
{
    std::vector<T> v;
    auto it = d->attrs.find(name);
    if (it != d->attrs.end()) {
        v.resize(it->second.count);
        memcpy(v.data(), it->second.bytes.data(), v.size() * sizeof(T));
    }
    return v;
}

/* ---- tensors -------------------------------------------------------------------------------- */

bool same_tensor(const tensor_info &a, const tensor_info &b)
{
    if (a.uid != b.uid || a.type != b.type || a.rank != b.rank || a.align != b.align ||
        a.is_virtual != b.is_virtual || a.by_value != b.by_value)
        return false;
    for (int i = 0; i < a.rank; i++)
        if (a.dims[i] != b.dims[i] || a.strides[i] != b.strides[i])
            return false;
    return true;
}

int64_t numel(const tensor_info &t)
{
    int64_t n = 1;
    for (int i = 0; i < t.rank; i++)
        n *= t.dims[i];
    return n;
}

/* Elements from the first addressed to one past the last. */
int64_t span(const tensor_info &t)
{
    int64_t s = 1;
    for (int i = 0; i < t.rank; i++)
        s += (t.dims[i] - 1) * t.strides[i];
    return s;
}

bool storable(cudnnDataType_t t)
{
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

cudaDataType_t cuda_type(cudnnDataType_t t)
{
    return t == CUDNN_DATA_HALF ? CUDA_R_16F : t == CUDNN_DATA_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

const char *type_name(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    case CUDNN_DATA_INT32: return "INT32";
    case CUDNN_DATA_BOOLEAN: return "BOOLEAN";
    default: return "(a type not emulated)";
    }
}

cudnnStatus_t finalize_tensor(desc *d)
{
    const char *who = "cudnnBackendFinalize(TENSOR)";
    tensor_info t;
    std::vector<int64_t> dims = get_array<int64_t>(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
    std::vector<int64_t> strides = get_array<int64_t>(d, CUDNN_ATTR_TENSOR_STRIDES);
    if (!get(d, CUDNN_ATTR_TENSOR_DATA_TYPE, &t.type) || dims.empty() || strides.empty() ||
        !get(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, &t.uid) ||
        !get(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, &t.align))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "data type, dimensions, strides, unique id "
                    "and byte alignment are required (uid %lld)", (long long)t.uid);
    if (dims.size() != strides.size())
        return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld: %zu dimensions, %zu strides",
                    (long long)t.uid, dims.size(), strides.size());
    if (t.align < 1 || (t.align & (t.align - 1)))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld: byte alignment %lld",
                    (long long)t.uid, (long long)t.align);
    t.rank = (int)dims.size();
    for (int i = 0; i < t.rank; i++) {
        if (dims[i] < 1 || strides[i] < 1)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "uid %lld: axis %d has dimension %lld, "
                        "stride %lld", (long long)t.uid, i, (long long)dims[i],
                        (long long)strides[i]);
        t.dims[i] = dims[i];
        t.strides[i] = strides[i];
    }
    if (!storable(t.type) && t.type != CUDNN_DATA_INT32 && t.type != CUDNN_DATA_BOOLEAN)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "uid %lld: data type %d is not emulated",
                    (long long)t.uid, (int)t.type);
    get(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, &t.is_virtual);
    get(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, &t.by_value);
    if (t.by_value && (t.is_virtual || numel(t) != 1 || t.type != CUDNN_DATA_FLOAT))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "uid %lld: a by-value tensor other than "
                    "one f32 scalar is not emulated", (long long)t.uid);
    d->tensor = t;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- operations ----------------------------------------------------------------------------- */

bool needs_b(int mode)
{
    return mode == CUDNN_POINTWISE_ADD || mode == CUDNN_POINTWISE_SUB ||
           mode == CUDNN_POINTWISE_MUL || mode == CUDNN_POINTWISE_DIV ||
           mode == CUDNN_POINTWISE_CMP_GE || mode == CUDNN_POINTWISE_BINARY_SELECT;
}

bool emulated_mode(int mode)
{
    return needs_b(mode) || mode == CUDNN_POINTWISE_EXP || mode == CUDNN_POINTWISE_LOG ||
           mode == CUDNN_POINTWISE_IDENTITY || mode == CUDNN_POINTWISE_GEN_INDEX;
}

cudnnStatus_t finalize_config(desc *d)
{
    op_info &c = d->cfg;
    if (d->type == CUDNN_BACKEND_MATMUL_DESCRIPTOR) {
        c.kind = OP_MATMUL;
        if (!get(d, CUDNN_ATTR_MATMUL_COMP_TYPE, &c.prec))
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(MATMUL)",
                        "CUDNN_ATTR_MATMUL_COMP_TYPE is required");
        if (c.prec != CUDNN_DATA_FLOAT)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendFinalize(MATMUL)",
                        "compute type %s is not emulated", type_name(c.prec));
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_REDUCTION_DESCRIPTOR) {
        c.kind = OP_REDUCTION;
        cudnnReduceTensorOp_t m;
        if (!get(d, CUDNN_ATTR_REDUCTION_OPERATOR, &m) ||
            !get(d, CUDNN_ATTR_REDUCTION_COMP_TYPE, &c.prec))
            return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(REDUCTION)",
                        "the operator and compute type are required");
        c.mode = m;
        if (m != CUDNN_REDUCE_TENSOR_ADD && m != CUDNN_REDUCE_TENSOR_MAX)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendFinalize(REDUCTION)",
                        "operator %d is not emulated", (int)m);
        return CUDNN_STATUS_SUCCESS;
    }
    c.kind = OP_POINTWISE;
    cudnnPointwiseMode_t m;
    if (!get(d, CUDNN_ATTR_POINTWISE_MODE, &m) || !get(d, CUDNN_ATTR_POINTWISE_MATH_PREC, &c.prec))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(POINTWISE)",
                    "the mode and math precision are required");
    c.mode = m;
    if (!emulated_mode(m))
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendFinalize(POINTWISE)",
                    "mode %d is not emulated", (int)m);
    get(d, CUDNN_ATTR_POINTWISE_AXIS, &c.axis);
    if (m == CUDNN_POINTWISE_GEN_INDEX && (c.axis < 0 || c.axis >= kRank))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(POINTWISE)",
                    "GEN_INDEX needs CUDNN_ATTR_POINTWISE_AXIS in [0, %d) (got %lld)", kRank,
                    (long long)c.axis);
    return CUDNN_STATUS_SUCCESS;
}

bool fetch(const desc *d, int name, tensor_info *t)
{
    auto it = d->tensor_refs.find(name);
    if (it == d->tensor_refs.end())
        return false;
    *t = it->second;
    return true;
}

/* An input broadcast to the output: each axis equal or 1. */
bool broadcasts(const tensor_info &in, const tensor_info &out)
{
    if (in.rank != out.rank)
        return false;
    for (int i = 0; i < in.rank; i++)
        if (in.dims[i] != out.dims[i] && in.dims[i] != 1)
            return false;
    return true;
}

cudnnStatus_t check_rank(const char *who, std::initializer_list<const tensor_info *> ts)
{
    for (const tensor_info *t : ts)
        if (t->rank != kRank)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "uid %lld has %d dimensions; the "
                        "emulator takes %d", (long long)t->uid, t->rank, kRank);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_matmul(desc *d, op_info &op)
{
    const char *who = "cudnnBackendFinalize(OPERATION_MATMUL)";
    if (!fetch(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, &op.x) ||
        !fetch(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, &op.b) ||
        !fetch(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, &op.y) || !d->has_cfg)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "A, B, C and the matmul descriptor are "
                    "required");
    cudnnStatus_t s = check_rank(who, { &op.x, &op.b, &op.y });
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    const tensor_info &a = op.x, &b = op.b, &c = op.y;
    bool ok = a.dims[2] == c.dims[2] && b.dims[3] == c.dims[3] && a.dims[3] == b.dims[2];
    for (int i = 0; i < 2; i++)
        ok = ok && (a.dims[i] == c.dims[i] || a.dims[i] == 1) &&
             (b.dims[i] == c.dims[i] || b.dims[i] == 1);
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "A {%lld, %lld, %lld, %lld} x B {%lld, %lld, "
                    "%lld, %lld} does not give C {%lld, %lld, %lld, %lld}", (long long)a.dims[0],
                    (long long)a.dims[1], (long long)a.dims[2], (long long)a.dims[3],
                    (long long)b.dims[0], (long long)b.dims[1], (long long)b.dims[2],
                    (long long)b.dims[3], (long long)c.dims[0], (long long)c.dims[1],
                    (long long)c.dims[2], (long long)c.dims[3]);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_pointwise(desc *d, op_info &op)
{
    const char *who = "cudnnBackendFinalize(OPERATION_POINTWISE)";
    if (!d->has_cfg || !fetch(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &op.x) ||
        !fetch(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &op.y))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "the pointwise descriptor, X and Y are "
                    "required");
    op.has_b = fetch(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, &op.b);
    op.has_t = fetch(d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, &op.t);
    if (needs_b(op.mode) != op.has_b || (op.mode == CUDNN_POINTWISE_BINARY_SELECT) != op.has_t)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "mode %d takes %s B%s", op.mode,
                    needs_b(op.mode) ? "a" : "no",
                    op.mode == CUDNN_POINTWISE_BINARY_SELECT ? " and T" : "");
    cudnnStatus_t s = check_rank(who, { &op.x, &op.y });
    if (s == CUDNN_STATUS_SUCCESS && op.has_b)
        s = check_rank(who, { &op.b });
    if (s == CUDNN_STATUS_SUCCESS && op.has_t)
        s = check_rank(who, { &op.t });
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    bool ok = broadcasts(op.x, op.y) && (!op.has_b || broadcasts(op.b, op.y)) &&
              (!op.has_t || broadcasts(op.t, op.y));
    if (op.mode == CUDNN_POINTWISE_GEN_INDEX)
        for (int i = 0; i < kRank; i++)
            ok = ok && op.x.dims[i] == op.y.dims[i];
    if (!ok)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "mode %d: an input (uid %lld, %lld, %lld) does "
                    "not broadcast to Y (uid %lld)", op.mode, (long long)op.x.uid,
                    (long long)(op.has_b ? op.b.uid : 0), (long long)(op.has_t ? op.t.uid : 0),
                    (long long)op.y.uid);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_reduction(desc *d, op_info &op)
{
    const char *who = "cudnnBackendFinalize(OPERATION_REDUCTION)";
    if (!d->has_cfg || !fetch(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &op.x) ||
        !fetch(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &op.y))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "X, Y and the reduction descriptor are "
                    "required");
    cudnnStatus_t s = check_rank(who, { &op.x, &op.y });
    if (s == CUDNN_STATUS_SUCCESS && !broadcasts(op.y, op.x))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "Y (uid %lld) is not X (uid %lld) with "
                    "reduced axes of extent 1", (long long)op.y.uid, (long long)op.x.uid);
    return s;
}

cudnnStatus_t finalize_reshape(desc *d, op_info &op)
{
    const char *who = "cudnnBackendFinalize(OPERATION_RESHAPE)";
    op.kind = OP_RESHAPE;
    if (!fetch(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, &op.x) ||
        !fetch(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, &op.y))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "X and Y are required");
    if (numel(op.x) != numel(op.y) || span(op.x) != span(op.y))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "X (uid %lld: %lld elements over %lld) and Y "
                    "(uid %lld: %lld over %lld) are not views of one memory",
                    (long long)op.x.uid, (long long)numel(op.x), (long long)span(op.x),
                    (long long)op.y.uid, (long long)numel(op.y), (long long)span(op.y));
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_op(desc *d)
{
    op_info op = d->cfg; /* the mode etc. of its MATMUL/POINTWISE/REDUCTION descriptor */
    cudnnStatus_t s;
    switch (d->type) {
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: s = finalize_matmul(d, op); break;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: s = finalize_pointwise(d, op); break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: s = finalize_reduction(d, op); break;
    default: s = finalize_reshape(d, op); break;
    }
    if (s == CUDNN_STATUS_SUCCESS)
        d->cfg = op;
    return s;
}

/* ---- the operation graph ------------------------------------------------------------------- */

std::vector<const tensor_info *> inputs_of(const op_info &op)
{
    std::vector<const tensor_info *> in = { &op.x };
    if (op.kind == OP_MATMUL || op.has_b)
        in.push_back(&op.b);
    if (op.has_t)
        in.push_back(&op.t);
    return in;
}

cudnnStatus_t add_tensor(graph_info &g, const tensor_info &t)
{
    auto it = g.tensors.find(t.uid);
    if (it == g.tensors.end()) {
        g.tensors[t.uid] = t;
        return CUDNN_STATUS_SUCCESS;
    }
    if (!same_tensor(it->second, t))
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(OPERATIONGRAPH)",
                    "unique id %lld names two different tensors", (long long)t.uid);
    return CUDNN_STATUS_SUCCESS;
}

/* Operations in dependency order (Kahn's algorithm over the tensors they write). */
cudnnStatus_t order_ops(const std::vector<op_info> &in, graph_info &g)
{
    const char *who = "cudnnBackendFinalize(OPERATIONGRAPH)";
    std::map<int64_t, size_t> writer;
    for (size_t i = 0; i < in.size(); i++) {
        if (!writer.emplace(in[i].y.uid, i).second)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "tensor %lld is written by two operations",
                        (long long)in[i].y.uid);
        if (in[i].y.by_value)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "by-value tensor %lld is written",
                        (long long)in[i].y.uid);
    }
    std::vector<bool> done(in.size(), false);
    for (size_t placed = 0; placed < in.size();) {
        size_t before = placed;
        for (size_t i = 0; i < in.size(); i++) {
            bool ready = !done[i];
            for (const tensor_info *t : inputs_of(in[i])) {
                auto w = writer.find(t->uid);
                if (w == writer.end() && t->is_virtual)
                    return fail(CUDNN_STATUS_BAD_PARAM, who, "virtual tensor %lld is read but "
                                "no operation writes it", (long long)t->uid);
                ready = ready && (w == writer.end() || done[w->second]);
            }
            if (ready) {
                done[i] = true;
                g.ops.push_back(in[i]);
                placed++;
            }
        }
        if (placed == before)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "the operations form a cycle");
    }
    for (auto &w : writer)
        g.written.insert(w.first);
    return CUDNN_STATUS_SUCCESS;
}

/* What the heuristics and the support surface look at: two or more matmuls whose first
 * reads two non-virtual tensors, and an EXP. */
void classify(graph_info &g)
{
    int matmuls = 0, exps = 0;
    const op_info *first = nullptr;
    for (const op_info &op : g.ops) {
        if (op.kind == OP_MATMUL && matmuls++ == 0)
            first = &op;
        exps += op.kind == OP_POINTWISE && op.mode == CUDNN_POINTWISE_EXP;
    }
    g.sdpa = matmuls >= 2 && exps >= 1 && !first->x.is_virtual && !first->b.is_virtual;
    if (!g.sdpa)
        return;
    g.backward = matmuls >= 4;
    g.b = first->x.dims[0];
    g.h = first->x.dims[1];
    g.t = first->x.dims[2];
    g.d = first->x.dims[3];
    g.io = first->x.type;
}

cudnnStatus_t finalize_graph(desc *d)
{
    if (d->ops.empty())
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(OPERATIONGRAPH)",
                    "CUDNN_ATTR_OPERATIONGRAPH_OPS is required");
    auto g = std::make_shared<graph_info>();
    for (const op_info &op : d->ops) {
        for (const tensor_info *t : inputs_of(op)) {
            cudnnStatus_t s = add_tensor(*g, *t);
            if (s != CUDNN_STATUS_SUCCESS)
                return s;
        }
        cudnnStatus_t s = add_tensor(*g, op.y);
        if (s != CUDNN_STATUS_SUCCESS)
            return s;
    }
    cudnnStatus_t s = order_ops(d->ops, *g);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    classify(*g);
    d->graph = g;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- heuristics, engines, plans ------------------------------------------------------------- */

engine_info make_engine(const std::shared_ptr<const graph_info> &g, int64_t index, bool nondet)
{
    engine_info e;
    e.graph = g;
    e.index = index;
    e.notes.push_back(CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
    if (nondet)
        e.notes.push_back(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    return e;
}

cudnnStatus_t finalize_heuristics(desc *d)
{
    const char *who = "cudnnBackendFinalize(ENGINEHEUR)";
    cudnnBackendHeurMode_t mode;
    if (!d->graph || !get(d, CUDNN_ATTR_ENGINEHEUR_MODE, &mode))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "the operation graph and the mode are "
                    "required");
    if (mode != CUDNN_HEUR_MODE_A && mode != CUDNN_HEUR_MODE_B &&
        mode != CUDNN_HEUR_MODE_FALLBACK)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "heuristic mode %d", (int)mode);
    if (!d->graph->sdpa)
        return CUDNN_STATUS_SUCCESS; /* no engine for it: zero results */
    if (d->graph->backward) {
        d->results.push_back(make_engine(d->graph, 9, true));
        d->results.push_back(make_engine(d->graph, 10, false));
    } else {
        d->results.push_back(make_engine(d->graph, 8, false));
    }
    return CUDNN_STATUS_SUCCESS;
}

/* The I/O tensors: non-virtual, not by value, not a row statistic {B, H, T, 1}. */
bool is_io(const tensor_info &t)
{
    return !t.is_virtual && !t.by_value && t.dims[3] != 1;
}

cudnnStatus_t support_surface(const graph_info &g)
{
    const char *who = "cudnnBackendFinalize(EXECUTION_PLAN)";
    if (g.io != CUDNN_DATA_HALF && g.io != CUDNN_DATA_BFLOAT16)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "the fused attention engines take HALF "
                    "or BFLOAT16 Q and K (got %s)", type_name(g.io));
    if (g.d % 8 != 0 || g.d > 256)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "head dim %lld: the fused attention "
                    "engines take a multiple of 8 up to 256 on sm_90", (long long)g.d);
    for (const auto &kv : g.tensors) {
        const tensor_info &t = kv.second;
        if (t.by_value || t.is_virtual)
            continue;
        bool f32_ok = t.dims[3] == 1 || (g.backward && t.type == CUDNN_DATA_FLOAT);
        if (t.type != g.io && !(t.type == CUDNN_DATA_FLOAT && f32_ok))
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "tensor %lld is %s, the graph's I/O "
                        "type is %s", (long long)t.uid, type_name(t.type), type_name(g.io));
        if (!is_io(t))
            continue;
        bool unit = (t.dims[3] == g.d && t.strides[3] == 1) ||
                    (t.dims[2] == g.d && t.strides[2] == 1);
        if (!unit)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "tensor %lld: its head-dim axis "
                        "(extent %lld) has no unit stride (strides %lld, %lld, %lld, %lld)",
                        (long long)t.uid, (long long)g.d, (long long)t.strides[0],
                        (long long)t.strides[1], (long long)t.strides[2],
                        (long long)t.strides[3]);
        if (t.align < 16)
            return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "tensor %lld is %lld-byte aligned; "
                        "the engines load 16 bytes", (long long)t.uid, (long long)t.align);
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_plan(desc *d)
{
    if (!d->engine.graph)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(EXECUTION_PLAN)",
                    "CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG is required");
    const graph_info &g = *d->engine.graph;
    cudnnStatus_t s = support_surface(g);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    d->graph = d->engine.graph;
    int64_t rows = g.b * g.h * g.t;
    d->workspace = !g.backward ? 0 : d->engine.index == 9 ? rows * g.d * 4 : rows * 64;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_pack(desc *d)
{
    const char *who = "cudnnBackendFinalize(VARIANT_PACK)";
    std::vector<int64_t> uids = get_array<int64_t>(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    std::vector<void *> ptrs = get_array<void *>(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    if (uids.size() != ptrs.size())
        return fail(CUDNN_STATUS_BAD_PARAM, who, "%zu unique ids, %zu data pointers",
                    uids.size(), ptrs.size());
    std::set<int64_t> seen(uids.begin(), uids.end());
    if (seen.size() != uids.size())
        return fail(CUDNN_STATUS_BAD_PARAM, who, "a unique id is given twice");
    return CUDNN_STATUS_SUCCESS;
}

/* ---- setting attributes --------------------------------------------------------------------- */

cudnnStatus_t set_descriptor_attr(desc *d, cudnnBackendAttributeName_t name, int64_t count,
                                  const void *array)
{
    const char *who = "cudnnBackendSetAttribute";
    const cudnnBackendDescriptor_t *refs = (const cudnnBackendDescriptor_t *)array;
    for (int64_t i = 0; i < count; i++) {
        desc *r = as_desc(refs[i]);
        if (!r)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "attribute %d: element %lld is not a "
                        "backend descriptor", (int)name, (long long)i);
        if (!r->finalized)
            return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, who, "attribute %d: element %lld "
                        "is not finalized", (int)name, (long long)i);
    }
    desc *r = as_desc(refs[0]);
    switch (name) {
    case CUDNN_ATTR_OPERATION_MATMUL_DESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR:
    case CUDNN_ATTR_OPERATION_REDUCTION_DESC:
        if (r->type != (name == CUDNN_ATTR_OPERATION_MATMUL_DESC ? CUDNN_BACKEND_MATMUL_DESCRIPTOR
                        : name == CUDNN_ATTR_OPERATION_REDUCTION_DESC
                            ? CUDNN_BACKEND_REDUCTION_DESCRIPTOR
                            : CUDNN_BACKEND_POINTWISE_DESCRIPTOR))
            return fail(CUDNN_STATUS_BAD_PARAM, who, "attribute %d: a descriptor of type %d",
                        (int)name, (int)r->type);
        d->cfg = r->cfg;
        d->has_cfg = true;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_OPERATIONGRAPH_OPS:
        d->ops.clear();
        for (int64_t i = 0; i < count; i++) {
            desc *op = as_desc(refs[i]);
            if (op->type != CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR &&
                op->type != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR &&
                op->type != CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR &&
                op->type != CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR)
                return fail(CUDNN_STATUS_BAD_PARAM, who, "OPERATIONGRAPH_OPS element %lld is "
                            "not an operation", (long long)i);
            d->ops.push_back(op->cfg);
        }
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
        if (r->type != CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "not an operation graph");
        d->graph = r->graph;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
        if (r->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "not an engine config");
        d->engine = r->engine;
        return CUDNN_STATUS_SUCCESS;
    default: /* an operation's tensor */
        if (r->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "attribute %d takes a tensor", (int)name);
        d->tensor_refs[name] = r->tensor;
        return CUDNN_STATUS_SUCCESS;
    }
}

/* ---- execution ------------------------------------------------------------------------------- */

float round_to(cudnnDataType_t t, float v)
{
    switch (t) {
    case CUDNN_DATA_HALF: return __half2float(__float2half_rn(v));
    case CUDNN_DATA_BFLOAT16: return __bfloat162float(__float2bfloat16_rn(v));
    case CUDNN_DATA_INT32: return (float)(int32_t)v;
    case CUDNN_DATA_BOOLEAN: return v != 0.0f ? 1.0f : 0.0f;
    default: return v;
    }
}

/* Every tensor's values, indexed by memory offset (its span). */
typedef std::map<int64_t, std::vector<float>> values;

int64_t offset(const tensor_info &t, const int64_t *i)
{
    int64_t o = 0;
    for (int k = 0; k < kRank; k++)
        o += (t.dims[k] == 1 ? 0 : i[k]) * t.strides[k];
    return o;
}

#define FOR4(t, i)                                                                         \
    for (i[0] = 0; i[0] < (t).dims[0]; i[0]++)                                             \
        for (i[1] = 0; i[1] < (t).dims[1]; i[1]++)                                         \
            for (i[2] = 0; i[2] < (t).dims[2]; i[2]++)                                     \
                for (i[3] = 0; i[3] < (t).dims[3]; i[3]++)

void run_matmul(const op_info &op, values &v)
{
    const tensor_info &a = op.x, &b = op.b, &c = op.y;
    const std::vector<float> &va = v[a.uid], &vb = v[b.uid];
    std::vector<float> &vc = v[c.uid];
    int64_t i[kRank];
    FOR4(c, i) {
        float acc = 0.0f;
        for (int64_t k = 0; k < a.dims[3]; k++) {
            int64_t ia[kRank] = { i[0], i[1], i[2], k }, ib[kRank] = { i[0], i[1], k, i[3] };
            acc += va[offset(a, ia)] * vb[offset(b, ib)];
        }
        vc[offset(c, i)] = round_to(c.type, acc);
    }
}

float pointwise(int mode, float x, float b, float t, const int64_t *i, int64_t axis)
{
    switch (mode) {
    case CUDNN_POINTWISE_ADD: return x + b;
    case CUDNN_POINTWISE_SUB: return x - b;
    case CUDNN_POINTWISE_MUL: return x * b;
    case CUDNN_POINTWISE_DIV: return x / b;
    case CUDNN_POINTWISE_EXP: return expf(x);
    case CUDNN_POINTWISE_LOG: return logf(x);
    case CUDNN_POINTWISE_IDENTITY: return x;
    case CUDNN_POINTWISE_GEN_INDEX: return (float)i[axis];
    case CUDNN_POINTWISE_CMP_GE: return x >= b ? 1.0f : 0.0f;
    default: return t != 0.0f ? x : b; /* BINARY_SELECT */
    }
}

void run_pointwise(const op_info &op, values &v)
{
    const std::vector<float> &vx = v[op.x.uid];
    const std::vector<float> *vb = op.has_b ? &v[op.b.uid] : nullptr;
    const std::vector<float> *vt = op.has_t ? &v[op.t.uid] : nullptr;
    std::vector<float> &vy = v[op.y.uid];
    int64_t i[kRank];
    FOR4(op.y, i) {
        float x = op.mode == CUDNN_POINTWISE_GEN_INDEX ? 0.0f : vx[offset(op.x, i)];
        float b = vb ? (*vb)[offset(op.b, i)] : 0.0f, t = vt ? (*vt)[offset(op.t, i)] : 0.0f;
        vy[offset(op.y, i)] = round_to(op.y.type, pointwise(op.mode, x, b, t, i, op.axis));
    }
}

void run_reduction(const op_info &op, values &v)
{
    const std::vector<float> &vx = v[op.x.uid];
    std::vector<float> &vy = v[op.y.uid];
    std::vector<float> acc(vy.size(), op.mode == CUDNN_REDUCE_TENSOR_MAX ? -INFINITY : 0.0f);
    int64_t i[kRank];
    FOR4(op.x, i) {
        float &a = acc[offset(op.y, i)];
        float x = vx[offset(op.x, i)];
        a = op.mode == CUDNN_REDUCE_TENSOR_MAX ? (x > a ? x : a) : a + x;
    }
    FOR4(op.y, i) {
        int64_t o = offset(op.y, i);
        vy[o] = round_to(op.y.type, acc[o]);
    }
}

void run_reshape(const op_info &op, values &v)
{
    const std::vector<float> &vx = v[op.x.uid];
    std::vector<float> &vy = v[op.y.uid];
    for (size_t k = 0; k < vy.size() && k < vx.size(); k++)
        vy[k] = round_to(op.y.type, vx[k]);
}

/* A non-virtual tensor's device bytes: [p, p + span elements). */
size_t device_bytes(const tensor_info &t)
{
    return (size_t)span(t) * fgemu::elem_size(cuda_type(t.type));
}

void load(const tensor_info &t, const void *p, std::vector<float> &v)
{
    if (t.by_value) {
        memcpy(v.data(), p, 4);
        return;
    }
    int64_t i[kRank];
    FOR4(t, i) {
        int64_t o = offset(t, i);
        v[o] = fgemu::load(p, cuda_type(t.type), (size_t)o);
    }
}

void store(const tensor_info &t, void *p, const std::vector<float> &v)
{
    int64_t i[kRank];
    FOR4(t, i) {
        int64_t o = offset(t, i);
        fgemu::store(p, cuda_type(t.type), (size_t)o, v[o]);
    }
}

/* The pack's pointer for every non-virtual tensor, checked. */
cudnnStatus_t bind(const graph_info &g, const desc *pack, std::map<int64_t, void *> &ptr)
{
    const char *who = "cudnnBackendExecute";
    std::vector<int64_t> uids = get_array<int64_t>(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    std::vector<void *> ptrs = get_array<void *>(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    for (size_t k = 0; k < uids.size(); k++) {
        auto it = g.tensors.find(uids[k]);
        if (it == g.tensors.end() || it->second.is_virtual)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "the variant pack names uid %lld, which "
                        "is no non-virtual tensor of the graph", (long long)uids[k]);
        ptr[uids[k]] = ptrs[k];
    }
    for (const auto &kv : g.tensors) {
        const tensor_info &t = kv.second;
        if (t.is_virtual)
            continue;
        auto it = ptr.find(t.uid);
        if (it == ptr.end() || !it->second)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "tensor %lld has no pointer in the variant "
                        "pack", (long long)t.uid);
        if (t.by_value)
            continue;
        if ((uintptr_t)it->second % (uintptr_t)t.align)
            return fail(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, who, "tensor %lld at %p is "
                        "not %lld-byte aligned", (long long)t.uid, it->second,
                        (long long)t.align);
        if (!fgemu_is_device(it->second, device_bytes(t)))
            return fail(CUDNN_STATUS_EXECUTION_FAILED, who, "tensor %lld: %zu bytes at %p are "
                        "not device memory", (long long)t.uid, device_bytes(t), it->second);
    }
    return CUDNN_STATUS_SUCCESS;
}

void interpret(const graph_info &g, std::map<int64_t, void *> &ptr)
{
    values v;
    for (const auto &kv : g.tensors) {
        const tensor_info &t = kv.second;
        v[t.uid].assign((size_t)span(t), NAN);
        if (!t.is_virtual && !g.written.count(t.uid))
            load(t, ptr[t.uid], v[t.uid]);
    }
    for (const op_info &op : g.ops) {
        switch (op.kind) {
        case OP_MATMUL: run_matmul(op, v); break;
        case OP_POINTWISE: run_pointwise(op, v); break;
        case OP_REDUCTION: run_reduction(op, v); break;
        case OP_RESHAPE: run_reshape(op, v); break;
        }
        if (!op.y.is_virtual)
            store(op.y, ptr[op.y.uid], v[op.y.uid]);
    }
}

cudnnStatus_t execute(cudnnHandle_t handle, const desc *plan, const desc *pack)
{
    const char *who = "cudnnBackendExecute";
    cudaStream_t stream;
    if (!fgemu_cudnn_stream(handle, &stream))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "not a cuDNN handle");
    if (!plan || !pack || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
        pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "an execution plan and a variant pack, please");
    if (!plan->finalized || !pack->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, who, "the plan or the pack is not "
                    "finalized");
    std::map<int64_t, void *> ptr;
    cudnnStatus_t s = bind(*plan->graph, pack, ptr);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    void *ws = nullptr;
    get(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &ws);
    if (plan->workspace && !fgemu_is_device(ws, (size_t)plan->workspace))
        return fail(CUDNN_STATUS_EXECUTION_FAILED, who, "the plan needs %lld bytes of device "
                    "workspace; %p is not that", (long long)plan->workspace, ws);
    if (!fgemu_stream_valid(stream) || fgemu_sticky() != cudaSuccess)
        return fail(CUDNN_STATUS_EXECUTION_FAILED, who, "the handle's stream is not live");
    if (fgemu_capturing(stream)) { /* the emulator records no cuDNN call */
        fgemu_capture_invalidate(stream, who);
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "not emulated under stream capture");
    }
    fgemu_stream_drain(stream);
    if (plan->workspace)
        memset(ws, 0xff, (size_t)plan->workspace);
    interpret(*plan->graph, ptr);
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *out)
{
    if (!out)
        return CUDNN_STATUS_BAD_PARAM;
    switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        break;
    default:
        return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendCreateDescriptor",
                    "descriptor type %d is not emulated", (int)type);
    }
    desc *d = new desc;
    d->type = type;
    *out = (cudnnBackendDescriptor_t)d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p)
{
    desc *d = as_desc(p);
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    d->magic = 0;
    delete d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *array)
{
    const char *who = "cudnnBackendSetAttribute";
    desc *d = as_desc(p);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "not a backend descriptor");
    if (d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "attribute %d on a finalized descriptor",
                    (int)name);
    const attr_rule *r = rule_of(d->type, name);
    if (!r)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "attribute %d of descriptor type %d is "
                    "not emulated", (int)name, (int)d->type);
    if (type != r->type)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "attribute %d takes type %d, got %d",
                    (int)name, (int)r->type, (int)type);
    if (count < 1 || count > r->max_count || !array)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "attribute %d: %lld elements (1 to %lld, "
                    "not NULL)", (int)name, (long long)count, (long long)r->max_count);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        return set_descriptor_attr(d, name, count, array);
    attr &a = d->attrs[name];
    a.type = type;
    a.count = count;
    a.bytes.assign((const char *)array, (const char *)array + count * type_size(type));
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p)
{
    desc *d = as_desc(p);
    if (!d)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize", "not a backend descriptor");
    if (d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize", "finalized twice");
    cudnnStatus_t s;
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: s = finalize_tensor(d); break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: s = finalize_config(d); break;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: s = finalize_op(d); break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: s = finalize_graph(d); break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: s = finalize_heuristics(d); break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: s = finalize_plan(d); break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: s = finalize_pack(d); break;
    default:
        s = fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendFinalize", "finalizing descriptor "
                 "type %d by hand is not emulated (the heuristics fill it)", (int)d->type);
    }
    d->finalized = s == CUDNN_STATUS_SUCCESS;
    return s;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const p,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *array)
{
    const char *who = "cudnnBackendGetAttribute";
    desc *d = as_desc(p);
    if (!d || !count || (requested > 0 && !array))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "descriptor, count and array, please");
    if (!d->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, who, "attribute %d of a descriptor "
                    "not finalized", (int)name);
    if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS && type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        int64_t n = (int64_t)d->results.size();
        *count = requested < n ? requested : n;
        for (int64_t i = 0; i < *count; i++) {
            desc *cfg = as_desc(((cudnnBackendDescriptor_t *)array)[i]);
            if (!cfg || cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                return fail(CUDNN_STATUS_BAD_PARAM, who, "ENGINEHEUR_RESULTS: element %lld is "
                            "not an ENGINECFG descriptor", (long long)i);
            cfg->engine = d->results[i];
            cfg->graph = d->results[i].graph;
            cfg->finalized = true;
        }
        if (requested == 0)
            *count = n;
        return CUDNN_STATUS_SUCCESS;
    }
    if (name == CUDNN_ATTR_ENGINECFG_ENGINE && type == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
        requested >= 1) {
        desc *e = as_desc(*(cudnnBackendDescriptor_t *)array);
        if (!e || e->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR)
            return fail(CUDNN_STATUS_BAD_PARAM, who, "ENGINECFG_ENGINE: not an ENGINE "
                        "descriptor");
        e->engine = d->engine;
        e->graph = d->graph;
        e->finalized = true;
        *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (name == CUDNN_ATTR_ENGINE_GLOBAL_INDEX && type == CUDNN_TYPE_INT64 && requested >= 1) {
        memcpy(array, &d->engine.index, 8);
        *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE && type == CUDNN_TYPE_NUMERICAL_NOTE) {
        int64_t n = (int64_t)d->engine.notes.size();
        *count = requested < n ? requested : n;
        if (*count > 0)
            memcpy(array, d->engine.notes.data(), (size_t)*count * sizeof(d->engine.notes[0]));
        if (requested == 0)
            *count = n;
        return CUDNN_STATUS_SUCCESS;
    }
    if (name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 &&
        requested >= 1) {
        memcpy(array, &d->workspace, 8);
        *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "attribute %d (type %d) of descriptor type %d "
                "is not emulated", (int)name, (int)type, (int)d->type);
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t pack)
{
    return execute(handle, as_desc(plan), as_desc(pack));
}

} // extern "C"
