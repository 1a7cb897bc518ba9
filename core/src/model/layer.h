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
#include "core_util.h"
#include "fulgur/backend.h"
#include "op_needs.h"

#define FG_LAYER_NAME_MAX 64
#define FG_LAYER_SECTION_MAX (FG_LAYER_NAME_MAX + 8)
#define FG_LAYER_ORIGIN_MAX 256
#define FG_LAYER_MAX_TENSORS 14 /* a transformer block's, with SwiGLU and biases */
#define FG_LAYER_MAX_BUFFERS 32 /* a SwiGLU block's fp8 state: 5 linear maps of 6 */
#define FG_LAYER_MAX_INPUTS 2
#define FG_SHAPE_TEXT_MAX 128
#define FG_MAX_REPEAT 1024 /* layers one section may make with `repeat` */

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
    FG_INIT_UNIFORM = 2, /* U(-bound, bound) */
    FG_INIT_NORMAL = 3   /* N(0, bound^2) */
} fg_init_rule;

/* Flags of a layer kind. */
enum {
    FG_LAYER_ALIAS = 1u << 0,         /* the output is the input, reshaped (flatten) */
    FG_LAYER_EVAL_IDENTITY = 1u << 1, /* the output is the input when not training (dropout) */
    FG_LAYER_DX_OPTIONAL = 1u << 2,   /* backward accepts dx == NULL (first layer) */
    FG_LAYER_TWO_INPUTS = 1u << 3     /* reads two tensors of one shape (add) */
};

typedef struct fg_layer fg_layer;
typedef struct fg_model fg_model;

/* Element types of a model's tensors by role, each FG_F32, FG_F16 or FG_BF16: activations
 * and their gradients (x, y, dy, dx, logits, dlogits), the parameters the layers read
 * (weights, biases, gamma, beta), and the parameter gradients. */
typedef struct fg_role_dtypes {
    uint32_t act;
    uint32_t param;
    uint32_t grad;
} fg_role_dtypes;

/* fp8 training's recipe (precision.fp8-mixed, fg_precision_info's ABI 1.9 fields): format
 * FG_FP8_NONE, or the delayed scaling of linear layers' gemms (linear_fp8.c). */
typedef struct fg_fp8_recipe {
    uint32_t format; /* fg_fp8_format */
    int history_len;
    int algo; /* fg_fp8_amax_algo */
    float margin;
} fg_fp8_recipe;

/* What a layer sees while it runs. Pointers are device memory of the queue's device; the
 * `void *` ones hold dt's types (x, y, dy, dx: dt.act; param: dt.param; grad: dt.grad),
 * buffer and aux are f32. */
typedef struct fg_layer_ctx {
    const fg_backend_vtable *be;
    void *bs; /* backend state */
    void *queue;
    int batch;
    int training;
    int accumulate;                      /* backward: add into the parameter gradients */
    fg_role_dtypes dt;
    void *param[FG_LAYER_MAX_TENSORS];   /* the layer's parameters, in declaration order */
    void *grad[FG_LAYER_MAX_TENSORS];    /* their gradients, same layout */
    float *buffer[FG_LAYER_MAX_BUFFERS]; /* running statistics and such, never trained */
    const void *x;                       /* (batch, in...) */
    const void *x2;                      /* (batch, in2...): a TWO_INPUTS kind's second input */
    void *y;                             /* (batch, out...) */
    int y_ld;     /* y's and dy's row stride in elements, an output linear's padded logits
                   * ([model] pad_vocab_to); 0: packed rows */
    const void *dy;                      /* (batch, out...) backward only */
    void *dx;                            /* (batch, in...); NULL: not wanted (DX_OPTIONAL) */
    void *dx2;                           /* (batch, in2...): a TWO_INPUTS kind's second dx */
    void *aux;       /* the layer's own arena bytes: aux_fixed + aux_per_sample * batch */
    void *workspace; /* scratch shared by all layers, workspace_bytes(max batch) */
    uint64_t dropout_seed;
    uint64_t dropout_offset;
    /* [backend] cuda_graphs: this layer's counter in device memory holding the step's part
     * of the offset (dropout_forward_dev adds it and advances it); NULL: all by value */
    uint64_t *dropout_offset_dev;
    /* Sums count f64 values of device memory in place across the replicas of this layer
     * (the strategy's replica all-reduce, fg_train_services.set_replica_allreduce); NULL:
     * this replica is the only one. */
    fg_status (*replica_allreduce)(void *user, void *queue, double *buf, int64_t count,
                                   fg_error *err);
    void *replica_allreduce_user;
    /* [model] batch_groups (batch_groups.h): a training pass over `groups` groups of
     * batch / groups samples. A layer that runs its groups itself (batchnorm) computes
     * group g > 0's parameter gradients into group_grads (laid out as its own, from grad[0])
     * and sums its groups' f64 statistics through group_host (host memory, on `device`). */
    int groups;
    int device;
    void *group_grads;
    double *group_host;
    const fg_fp8_recipe *fp8; /* the model's; format FG_FP8_NONE: no fp8 */
    int fp8_hold; /* a training micro-batch after its step's first: fp8 gemms quantize with
                   * the scales they hold and record no amax (linear_fp8.c) */
} fg_layer_ctx;

typedef struct fg_layer_ops {
    const char *type;
    const fg_option *options; /* every key of [layer.NAME] of this type, `type` included */
    size_t option_count;
    unsigned flags;
    /* Reads the layer's keys (already validated against `options`); NULL: a kind with
     * no keys besides `type` and `input`. */
    fg_status (*configure)(fg_layer *l, const fg_config *cfg, fg_error *err);
    /* From l->in: sets l->out, declares tensors (fg_model_add_tensor) and aux sizes. A
     * shape error names l->origin and l->input_text. */
    fg_status (*plan)(fg_layer *l, fg_model *m, fg_error *err);
    /* Shared scratch bytes at `batch`; NULL: none. */
    size_t (*workspace_bytes)(const fg_layer *l, const fg_backend_vtable *be, void *bs,
                              int batch);
    fg_status (*forward)(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
    fg_status (*backward)(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
    /* Adds the backend ops forward (and backward when training) call, in dt's types;
     * NULL: none (an alias). */
    void (*op_needs)(const fg_layer *l, const fg_role_dtypes *dt, int training,
                     fg_op_needs *needs);
    /* Forward FLOPs per sample (a multiply-add is 2); NULL: one per output value. */
    int64_t (*flops)(const fg_layer *l);
    /* fulgur generate's KV cache (decode.c): position pos of one sample (batch 1), x and y
     * that position's rows; aux is the layer's arena at batch 1, whose saved state of the
     * positions before pos a forward or earlier decodes wrote. NULL: a position-wise kind
     * (decode.c runs its forward on a one-position view) or one with no incremental path. */
    fg_status (*decode)(const fg_layer *l, const fg_layer_ctx *c, int pos, fg_error *err);
} fg_layer_ops;

/* transformer_block rope_scaling */
typedef enum fg_rope_scaling {
    FG_ROPE_SCALING_NONE,
    FG_ROPE_SCALING_LLAMA3, /* Llama 3.1's: low frequencies divided by factor, a blend between */
    FG_ROPE_SCALING_LINEAR, /* every frequency divided by factor */
} fg_rope_scaling;
#define FG_ROPE_MAX_PAIRS 256 /* a scaled rope's head_dim is at most twice this */

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
    /* the graph (graph.h): the layers read, -1 for the model input; in2 is inputs[1]'s
     * shape; gradient slots of this output and of each input, and whether an input's dx
     * adds to what a later layer already wrote there */
    int input_count;
    int inputs[FG_LAYER_MAX_INPUTS];
    fg_shape in2;
    int grad_slot;
    int input_slot[FG_LAYER_MAX_INPUTS];
    int input_owner[FG_LAYER_MAX_INPUTS]; /* the layer whose memory the input is (past aliases) */
    unsigned char input_accumulate[FG_LAYER_MAX_INPUTS];

    /* hyper-parameters (which ones are used depends on the kind) */
    int64_t units;      /* linear out_features, conv2d out_channels */
    int64_t in_units;   /* linear in_features as configured; 0: inferred */
    int kernel, stride, padding;
    int bias;
    double momentum, eps, p;
    int sync_stats; /* batchnorm: batch statistics summed across replicas ([model] sync_batchnorm) */
    int batch_groups; /* batchnorm: [model] batch_groups, run by itself (batch_groups.h) */
    int act; /* fg_activation */
    int64_t heads;  /* attention heads */
    int causal;     /* attention: query i sees keys 0..i */
    int rms;        /* normalisation without centring (rmsnorm) */
    char tie[FG_LAYER_NAME_MAX]; /* linear: the embedding whose weight it uses; "" none */
    /* transformer_block: keep only the input and recompute the activations in backward
     * (set from [model] recompute before configure; the section's own key wins) */
    int recompute;
    /* transformer_block, Llama-family options (rms and bias above serve it too) */
    int64_t kv_heads;   /* key/value heads of grouped-query attention; 0: heads */
    int64_t mlp_hidden; /* the MLP's hidden units; 0: mlp_ratio * C */
    int swiglu;         /* MLP down(silu(gate(x)) * up(x)) instead of GELU */
    int rope;           /* rotary positions on q and k */
    double rope_theta;
    /* rope scaling (rope_freq.h): fg_rope_scaling, its parameters (Hugging Face's
     * rope_scaling), and the head_dim/2 inverse frequencies the plan computes from them */
    int rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    double rope_original_max_positions;
    double rope_inv_freq[FG_ROPE_MAX_PAIRS];
    int tied;          /* this layer's weight is another's (tie): it owns no tensor */
    int weight_shared; /* a later layer uses this layer's weight: backward adds to its grad */
    int fp8; /* linear: its gemms run in fp8 (linear_fp8.c); its buffers hold the scales.
              * transformer_block: a bit per linear map in fp8 (layer_block.h) */
    /* [model] memory_format = channels_last (layout.h): the (c, h, w) output is NHWC; the
     * input arrives NCHW and is transposed into the arena after the kind's own bytes
     * (own_fixed + own_per_sample * batch), then the input gradient's copy */
    int nhwc;
    int nhwc_entry;
    size_t nhwc_own_fixed, nhwc_own_per_sample, nhwc_entry_per_sample;

    /* tensors: indices into the model's tensor table */
    int param_count, buffer_count;
    size_t param_tensor[FG_LAYER_MAX_TENSORS];
    size_t buffer_tensor[FG_LAYER_MAX_BUFFERS];

    /* arena bytes besides the output */
    size_t aux_fixed;
    size_t aux_per_sample;
};

/* ---- the kinds ---------------------------------------------------------------------- */

#define FG_LAYER_TYPE_CHOICES                                                                \
    "linear|conv2d|maxpool2d|avgpool2d|batchnorm|dropout|flatten|relu|gelu|tanh|sigmoid|add|" \
    "layernorm|rmsnorm|embedding|position_embedding|transformer_block"
/* The `type` and `input` keys every layer schema starts with. */
#define FG_LAYER_TYPE_OPTION(kind)                                                           \
    {"type", FG_OPT_ENUM, FG_OPT_REQUIRED, 1, 0, FG_LAYER_TYPE_CHOICES, "layer kind: " kind}, \
    {"input", FG_OPT_LIST, "", 1, 0, NULL,                                                   \
     "the earlier layer(s) this one reads, e.g. conv1 or a, b (add); empty: the previous one"}

extern const fg_layer_ops fg_layer_linear;
extern const fg_layer_ops fg_layer_conv2d;
extern const fg_layer_ops fg_layer_maxpool2d;
extern const fg_layer_ops fg_layer_avgpool2d;
extern const fg_layer_ops fg_layer_batchnorm;
extern const fg_layer_ops fg_layer_dropout;
extern const fg_layer_ops fg_layer_flatten;
extern const fg_layer_ops fg_layer_flatten_nhwc; /* of an NHWC tensor: a transpose (layout.h) */
extern const fg_layer_ops fg_layer_relu;
extern const fg_layer_ops fg_layer_gelu;
extern const fg_layer_ops fg_layer_tanh;
extern const fg_layer_ops fg_layer_sigmoid;
extern const fg_layer_ops fg_layer_layernorm;
extern const fg_layer_ops fg_layer_rmsnorm;
extern const fg_layer_ops fg_layer_embedding;
extern const fg_layer_ops fg_layer_position_embedding;
extern const fg_layer_ops fg_layer_transformer_block;
extern const fg_layer_ops fg_layer_add;

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

/* Weight tying: l (planned now) uses the weight of the earlier embedding layer `source`,
 * whose shape must be (rows, cols); one tensor, its gradient the sum of both layers'. */
fg_status fg_model_tie_weight(fg_model *m, fg_layer *l, const char *source, int64_t rows,
                              int64_t cols, fg_error *err);

/* Reads key of the layer's section, or the schema default; FG_INVALID_ARGUMENT naming the
 * key's origin for a bad value. */
fg_status fg_layer_read_int(const fg_layer *l, const fg_config *cfg, const char *key,
                            int64_t *out, fg_error *err);
fg_status fg_layer_read_float(const fg_layer *l, const fg_config *cfg, const char *key,
                              double *out, fg_error *err);
fg_status fg_layer_read_bool(const fg_layer *l, const fg_config *cfg, const char *key,
                             int *out, fg_error *err);

/* A key of a layer's section and where its value goes: exactly one of i (an FG_OPT_INT
 * key), f (FG_OPT_FLOAT) or b (FG_OPT_BOOL) set. */
typedef struct fg_layer_key {
    const char *key;
    int64_t *i;
    double *f;
    int *b;
} fg_layer_key;

/* Reads keys[0..count) in order (fg_layer_read_int, _float or _bool), stopping at the first
 * that fails: its status. */
fg_status fg_layer_read_keys(const fg_layer *l, const fg_config *cfg, const fg_layer_key *keys,
                             size_t count, fg_error *err);

/* Plans the (channels, oh, ow) output of l's window over its (c, h, w) input: FG_OK, or
 * FG_INVALID_ARGUMENT naming l when the padded input is smaller than the kernel. */
fg_status fg_layer_plan_window(fg_layer *l, int64_t channels, fg_error *err);

/* Fills a conv/pool descriptor for an (c, h, w) input at `batch`. */
void fg_layer_window_desc(const fg_layer *l, int batch, fg_conv2d_desc *d);

/* Whether the backend has vtable entry fn. */
#define FG_BACKEND_HAS(be, fn) (FG_HAS_FIELD(be, fg_backend_vtable, fn) && (be)->fn != NULL)

/* FG_UNAVAILABLE naming the entry the backend lacks. */
static inline fg_status fg_backend_lacks(fg_error *err, const char *fn)
{
    return fg_error_set(err, FG_UNAVAILABLE, "the backend does not implement %s", fn);
}

/* Fails with FG_UNAVAILABLE naming the op when the backend lacks it. */
#define FG_BACKEND_NEED(be, fn, err)                                                        \
    do {                                                                                    \
        if (!FG_BACKEND_HAS(be, fn))                                                        \
            return fg_backend_lacks(err, #fn);                                              \
    } while (0)

/* Zeroes buf_count device buffers of `count` dtype elements each, on a queue of its own,
 * synchronised before it returns; FG_UNAVAILABLE when the backend lacks queue_create or
 * fill. */
fg_status fg_backend_zero(const fg_backend_vtable *be, void *bs, int device, fg_dtype dtype,
                          void *const *bufs, size_t buf_count, size_t count, fg_error *err);

/* A backend op on the context's queue: c->be->fn(c->bs, c->queue, args..., err), or
 * FG_UNAVAILABLE naming fn when the backend lacks it. (A run's setup has already checked
 * every op it needs, with its dtypes; this guards callers that skip the setup, as tests.) */
#define FG_OP(c, err, fn, ...)                                                              \
    (FG_BACKEND_HAS((c)->be, fn) ? (c)->be->fn((c)->bs, (c)->queue, __VA_ARGS__, (err))      \
                                 : fg_backend_lacks((err), #fn))

/* ---- a linear map's gemms in fp8 (linear_fp8.c): linear and transformer_block ------- */

/* A linear map's fp8 state: x's, w's and dy's scale pair {scale, 1/scale} and amax history,
 * in that order (six layer buffers). state[0] NULL: the map is not in fp8. */
typedef struct fg_fp8_map {
    float *state[6];
} fg_fp8_map;

/* Whether a map of these features can run in fp8 (cuBLASLt: multiples of 16). */
int fg_fp8_shape_fits(int64_t in, int64_t out);
/* Declares a map's six buffers, named PREFIXfp8_scale_x, PREFIXfp8_amax_x, ... _w, _dy;
 * the model has an fp8 recipe. */
fg_status fg_fp8_declare(fg_layer *l, fg_model *m, const char *prefix, fg_error *err);
/* The recipe's formats, for a plan line ("x, w e4m3; dy e5m2" or "e4m3"). */
const char *fg_fp8_formats(const fg_model *m);
/* The map whose six buffers start at c->buffer[first]. */
fg_fp8_map fg_fp8_map_at(const fg_layer_ctx *c, int first);
/* Whether a call of map f (NULL: none) runs in fp8: the map's, the recipe's, the rows' (a
 * multiple of 16) and the output's alignment (16 bytes) say yes. */
int fg_fp8_runs(const fg_fp8_map *f, const fg_layer_ctx *c, int rows, const void *out);
/* y(rows, ldy) = fp8(x) fp8(w)^T (+ b by bias_add; b may be NULL); training updates x's and
 * w's scales (not under c->fp8_hold). */
fg_status fg_fp8_forward(const fg_fp8_map *m, const fg_layer_ctx *c, int rows, int out, int in,
                         const void *x, const void *w, const void *b, void *y, int ldy,
                         fg_error *err);
/* dw (+)= fp8(dy)^T fp8(x) (dy's scale updated as forward's), db (NULL: none) by bias_grad. */
fg_status fg_fp8_weight_grads(const fg_fp8_map *m, const fg_layer_ctx *c, int rows, int out,
                              int in, const void *x, const void *dy, int ldy, void *dw,
                              void *db, fg_error *err);
/* dx(rows, in) = fp8(dy) fp8(w) + beta dx, with the scales the map holds. */
fg_status fg_fp8_input_grad(const fg_fp8_map *m, const fg_layer_ctx *c, int rows, int out,
                            int in, const void *w, const void *dy, int ldy, float beta, void *dx,
                            fg_error *err);

/* Under an fp8 recipe, a linear layer whose features are multiples of 16 declares its
 * map's six buffers and sets l->fp8; *why says which (one line: fp8, or left in the
 * activations' dtype and why). */
fg_status fg_linear_fp8_plan(fg_layer *l, fg_model *m, int64_t in, char *why, size_t why_size,
                             fg_error *err);
/* Whether this call of a linear layer runs in fp8 (fg_fp8_runs on y, dx and dw). */
int fg_linear_fp8_runs(const fg_layer *l, const fg_layer_ctx *c, int rows);
fg_status fg_linear_fp8_forward(const fg_layer *l, const fg_layer_ctx *c, int rows, int out,
                                int in, int ldy, fg_error *err);
fg_status fg_linear_fp8_backward(const fg_layer *l, const fg_layer_ctx *c, int rows, int out,
                                 int in, int ldy, fg_error *err);

/* ---- the affine map (affine.c) -------------------------------------------------------- */

/* y(rows, out) = x(rows, in) w(out, in)^T + b(out) in the context's dtypes (b may be NULL;
 * rows of y ldy >= out apart, a bias only with gemm_bias when ldy > out):
 * the backend's gemm_bias when it has one for them, else gemm then bias_add. The setup
 * check asks for gemm and bias_add (what every backend runs). */
fg_status fg_affine_forward(const fg_layer_ctx *c, int rows, int out, int in, const void *x,
                            const void *w, const void *b, void *y, int ldy, fg_error *err);

/* The weight gradients of that map: dw(out, in) (+)= dy^T x and db(out) (+)= dy's column
 * sums (db NULL: none; added to when c->accumulate), dy rows ldy apart (ldy == out with a
 * bias). One gemm_epilogue with the BGRADB tail (ABI 1.5) where the backend has it for the
 * dtypes, else gemm then bias_grad: the same bits on the CPU backend. */
fg_status fg_affine_weight_grads(const fg_layer_ctx *c, int rows, int out, int in,
                                 const void *x, const void *dy, int ldy, void *dw, void *db,
                                 fg_error *err);

/* ---- loss (loss_xent.c) ------------------------------------------------------------- */

/* Softmax cross-entropy over (rows, classes) logits in logits_dtype: loss_sum and correct
 * accumulated; probs f32. */
fg_status fg_xent_forward(const fg_backend_vtable *be, void *bs, void *queue,
                          uint32_t logits_dtype, const void *logits, const int32_t *labels,
                          int rows, int classes, float *probs, float *loss_sum, float *correct,
                          fg_error *err);
/* dlogits (logits_dtype) = (probs - onehot) * loss_scale / counted: the gradient of the
 * mean loss over the counted rows (rows less those labelled FG_IGNORED_LABEL). */
fg_status fg_xent_backward(const fg_backend_vtable *be, void *bs, void *queue,
                           uint32_t logits_dtype, const float *probs, const int32_t *labels,
                           int rows, int64_t counted, int classes, float loss_scale,
                           void *dlogits, fg_error *err);
/* fg_xent_backward with loss_scale times the scale the device scaler holds (ABI 1.10). */
fg_status fg_xent_backward_scaled(const fg_backend_vtable *be, void *bs, void *queue,
                                  uint32_t logits_dtype, const float *probs,
                                  const int32_t *labels, int rows, int64_t counted, int classes,
                                  float loss_scale, const fg_loss_scale_dev *scaler,
                                  void *dlogits, fg_error *err);
/* The ops the loss calls (training: backward too). */
void fg_xent_op_needs(uint32_t logits_dtype, int training, fg_op_needs *n);

#endif
