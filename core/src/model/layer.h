/* Layers: one file per kind (layer_<kind>.c), forward and backward side by side, built
 * from the [layer.NAME] sections of a config in file order. A layer owns no memory: the
 * model lays its tensors out in the flat parameter/buffer regions, the replica hands it
 * pointers into those and into the activation arena. Layers reach the device only through
 * the backend vtable. */
#ifndef FG_LAYER_H
#define FG_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fulgur/backend.h"

#define FG_LAYER_NAME_MAX 64
#define FG_LAYER_SECTION_MAX (FG_LAYER_NAME_MAX + 8)
#define FG_LAYER_ORIGIN_MAX 256
#define FG_LAYER_MAX_TENSORS 4
#define FG_SHAPE_TEXT_MAX 128

/* A per-sample shape: the batch dimension is never part of it. */
typedef struct fg_shape {
    int rank;
    int64_t dims[FG_MAX_DIMS];
} fg_shape;

size_t fg_shape_numel(const fg_shape *s);
/* "(64, 5, 5)"; returns buf. */
const char *fg_shape_format(const fg_shape *s, char *buf, size_t size);

/* How fg_model_init_params fills a tensor (PyTorch's defaults). */
typedef enum fg_init_rule {
    FG_INIT_ZERO = 0,
    FG_INIT_ONE = 1,
    FG_INIT_UNIFORM = 2 /* U(-bound, bound) */
} fg_init_rule;

/* Flags of a layer kind. */
enum {
    FG_LAYER_ALIAS = 1u << 0,         /* the output is the input, reshaped (flatten) */
    FG_LAYER_EVAL_IDENTITY = 1u << 1, /* the output is the input when not training (dropout) */
    FG_LAYER_DX_OPTIONAL = 1u << 2    /* backward accepts dx == NULL (first layer) */
};

typedef struct fg_layer fg_layer;
typedef struct fg_model fg_model;

/* What a layer sees while it runs. Pointers are device memory of the queue's device. */
typedef struct fg_layer_ctx {
    const fg_backend_vtable *be;
    void *bs; /* backend state */
    void *queue;
    int batch;
    int training;
    int accumulate;                     /* backward: add into the parameter gradients */
    float *param[FG_LAYER_MAX_TENSORS]; /* the layer's parameters, in declaration order */
    float *grad[FG_LAYER_MAX_TENSORS];  /* their gradients, same layout */
    float *buffer[FG_LAYER_MAX_TENSORS]; /* running statistics and such, never trained */
    const float *x;                     /* (batch, in...) */
    float *y;                           /* (batch, out...) */
    const float *dy;                    /* (batch, out...) backward only */
    float *dx;                          /* (batch, in...); NULL: not wanted (DX_OPTIONAL) */
    void *aux;       /* the layer's own arena bytes: aux_fixed + aux_per_sample * batch */
    void *workspace; /* scratch shared by all layers, workspace_bytes(max batch) */
    uint64_t dropout_seed;
    uint64_t dropout_offset;
    /* Element types of the tensors above (x, y, dy, dx in dt->act, param in dt->param,
     * grad in dt->grad; buffer and aux stay f32). NULL: all f32, the float pointers mean
     * what they say. Otherwise they name half storage: reach it only through fg_op_*. */
    const fg_op_dtypes *dt;
} fg_layer_ctx;

typedef struct fg_layer_ops {
    const char *type;
    const fg_option *options; /* every key of [layer.NAME] of this type, `type` included */
    size_t option_count;
    unsigned flags;
    /* Reads the layer's keys (already validated against `options`). */
    fg_status (*configure)(fg_layer *l, const fg_config *cfg, fg_error *err);
    /* From l->in: sets l->out, declares tensors (fg_model_add_tensor) and aux sizes. A
     * shape error names l->origin and l->input_text. */
    fg_status (*plan)(fg_layer *l, fg_model *m, fg_error *err);
    /* Shared scratch bytes at `batch`; NULL: none. */
    size_t (*workspace_bytes)(const fg_layer *l, const fg_backend_vtable *be, void *bs,
                              int batch);
    fg_status (*forward)(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
    fg_status (*backward)(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
} fg_layer_ops;

struct fg_layer {
    const fg_layer_ops *ops;
    int index;
    char name[FG_LAYER_NAME_MAX];       /* "fc1" */
    char section[FG_LAYER_SECTION_MAX]; /* "layer.fc1" */
    char origin[FG_LAYER_ORIGIN_MAX];   /* "cfg.ini:23": the section's line */
    /* What feeds this layer, for messages: "[layer.pool2] gives (64, 5, 5)" or
     * "[model] input gives (1, 28, 28)". */
    char input_text[FG_LAYER_SECTION_MAX + FG_SHAPE_TEXT_MAX + 16];
    fg_shape in, out;

    /* hyper-parameters (which ones are used depends on the kind) */
    int64_t units;      /* linear out_features, conv2d out_channels */
    int64_t in_units;   /* linear in_features as configured; 0: inferred */
    int kernel, stride, padding;
    int bias;
    double momentum, eps, p;
    int act; /* fg_activation */

    /* tensors: indices into the model's tensor table */
    int param_count, buffer_count;
    size_t param_tensor[FG_LAYER_MAX_TENSORS];
    size_t buffer_tensor[FG_LAYER_MAX_TENSORS];

    /* arena bytes besides the output */
    size_t aux_fixed;
    size_t aux_per_sample;
};

/* ---- the kinds ---------------------------------------------------------------------- */

#define FG_LAYER_TYPE_CHOICES                                                                \
    "linear|conv2d|maxpool2d|avgpool2d|batchnorm|dropout|flatten|relu|gelu|tanh|sigmoid"
/* The `type` key every layer schema starts with. */
#define FG_LAYER_TYPE_OPTION(kind)                                                           \
    {"type", FG_OPT_ENUM, FG_OPT_REQUIRED, 1, 0, FG_LAYER_TYPE_CHOICES, "layer kind: " kind}

extern const fg_layer_ops fg_layer_linear;
extern const fg_layer_ops fg_layer_conv2d;
extern const fg_layer_ops fg_layer_maxpool2d;
extern const fg_layer_ops fg_layer_avgpool2d;
extern const fg_layer_ops fg_layer_batchnorm;
extern const fg_layer_ops fg_layer_dropout;
extern const fg_layer_ops fg_layer_flatten;
extern const fg_layer_ops fg_layer_relu;
extern const fg_layer_ops fg_layer_gelu;
extern const fg_layer_ops fg_layer_tanh;
extern const fg_layer_ops fg_layer_sigmoid;

/* The kind named `type`, or NULL. */
const fg_layer_ops *fg_layer_kind(const char *type);
/* "linear, conv2d, ..." */
const char *fg_layer_type_list(void);

/* ---- helpers the kinds share (model.c) ---------------------------------------------- */

/* Declares a tensor of layer l named "<l->name>.<suffix>" in the parameter region
 * (is_buffer 0) or the buffer region, and records it in l. */
fg_status fg_model_add_tensor(fg_model *m, fg_layer *l, const char *suffix, int is_buffer,
                              int rank, const int64_t *shape, fg_init_rule init, double bound,
                              fg_error *err);

/* Reads key of the layer's section, or the schema default; FG_INVALID_ARGUMENT naming the
 * key's origin for a bad value. */
fg_status fg_layer_read_int(const fg_layer *l, const fg_config *cfg, const char *key,
                            int64_t *out, fg_error *err);
fg_status fg_layer_read_float(const fg_layer *l, const fg_config *cfg, const char *key,
                              double *out, fg_error *err);
fg_status fg_layer_read_bool(const fg_layer *l, const fg_config *cfg, const char *key,
                             int *out, fg_error *err);

/* Output side of a window sweep over `in` values; 0 when the window does not fit. */
static inline int64_t fg_window_out(int64_t in, int kernel, int stride, int padding)
{
    return in + 2 * padding < kernel ? 0 : (in + 2 * padding - kernel) / stride + 1;
}

/* Fills a conv/pool descriptor for an (c, h, w) input at `batch`. */
void fg_layer_window_desc(const fg_layer *l, int batch, fg_conv2d_desc *d);

/* Fails with FG_UNAVAILABLE naming the op when the backend lacks it. */
#define FG_BACKEND_HAS(be, fn) (FG_HAS_FIELD(be, fg_backend_vtable, fn) && (be)->fn != NULL)
#define FG_BACKEND_NEED(be, fn, err)                                                        \
    do {                                                                                    \
        if (!FG_BACKEND_HAS(be, fn))                                                        \
            return fg_error_set(err, FG_UNAVAILABLE, "the backend does not implement %s",   \
                                #fn);                                                       \
    } while (0)

/* ---- backend ops in the context's dtypes (layer_ops.c) ------------------------------
 * Layers call the backend through these: with c->dt NULL the fp32 op runs, bit for bit as
 * a direct call; otherwise its _ex variant with c->dt (FG_UNAVAILABLE naming the op when
 * the backend has none). A gemm operand's role says which of c->dt's types it has. */
typedef enum fg_tensor_role { FG_ROLE_ACT = 0, FG_ROLE_PARAM = 1, FG_ROLE_GRAD = 2 } fg_tensor_role;

fg_status fg_op_gemm(const fg_layer_ctx *c, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const void *a, fg_tensor_role ra, int lda, const void *b,
                     fg_tensor_role rb, int ldb, float beta, void *cm, fg_tensor_role rc,
                     int ldc, fg_error *err);
fg_status fg_op_bias_add(const fg_layer_ctx *c, void *y, const void *bias, int rows, int cols,
                         int spatial, fg_error *err);
fg_status fg_op_bias_grad(const fg_layer_ctx *c, void *dbias, const void *dy, int rows,
                          int cols, int spatial, fg_error *err);
fg_status fg_op_activation_forward(const fg_layer_ctx *c, int act, size_t n, fg_error *err);
fg_status fg_op_activation_backward(const fg_layer_ctx *c, int act, size_t n, fg_error *err);
fg_status fg_op_conv2d_forward(const fg_layer_ctx *c, const fg_conv2d_desc *d,
                               const void *bias, fg_error *err);
fg_status fg_op_conv2d_backward(const fg_layer_ctx *c, const fg_conv2d_desc *d, void *dbias,
                                fg_error *err);
fg_status fg_op_pool2d_forward(const fg_layer_ctx *c, int mode, const fg_conv2d_desc *d,
                               int32_t *argmax, fg_error *err);
fg_status fg_op_pool2d_backward(const fg_layer_ctx *c, int mode, const fg_conv2d_desc *d,
                                const int32_t *argmax, fg_error *err);
fg_status fg_op_batchnorm_forward(const fg_layer_ctx *c, int n, int ch, int spatial,
                                  float momentum, float eps, float *saved_mean,
                                  float *saved_invstd, fg_error *err);
fg_status fg_op_batchnorm_backward(const fg_layer_ctx *c, int n, int ch, int spatial,
                                   const float *saved_mean, const float *saved_invstd,
                                   fg_error *err);
fg_status fg_op_dropout_forward(const fg_layer_ctx *c, float p, uint8_t *mask, size_t n,
                                fg_error *err);
fg_status fg_op_dropout_backward(const fg_layer_ctx *c, float p, const uint8_t *mask, size_t n,
                                 fg_error *err);

/* ---- loss (loss_xent.c) ------------------------------------------------------------- */

/* Softmax cross-entropy over (rows, classes) logits: loss_sum and correct accumulated. */
fg_status fg_xent_forward(const fg_backend_vtable *be, void *bs, void *queue,
                          const float *logits, const int32_t *labels, int rows, int classes,
                          float *probs, float *loss_sum, float *correct, fg_error *err);
/* dlogits = (probs - onehot) * loss_scale / rows: the gradient of the mean loss. */
fg_status fg_xent_backward(const fg_backend_vtable *be, void *bs, void *queue,
                           const float *probs, const int32_t *labels, int rows, int classes,
                           float loss_scale, float *dlogits, fg_error *err);
/* The same with logits and dlogits in dt->act (dt NULL: f32, the calls above). */
fg_status fg_xent_forward_dt(const fg_backend_vtable *be, void *bs, void *queue,
                             const fg_op_dtypes *dt, const void *logits, const int32_t *labels,
                             int rows, int classes, float *probs, float *loss_sum,
                             float *correct, fg_error *err);
fg_status fg_xent_backward_dt(const fg_backend_vtable *be, void *bs, void *queue,
                              const fg_op_dtypes *dt, const float *probs,
                              const int32_t *labels, int rows, int classes, float loss_scale,
                              void *dlogits, fg_error *err);

#endif
