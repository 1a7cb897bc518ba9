/* fulgur-backend-my_backend.so: a starting point for a compute backend.
 *
 * What it is: one "device" that is host memory, queues that run each op at once on the
 * calling thread, and, in plain C for f32 only, the ops an MLP trained with SGD needs:
 * gemm, bias, activations, softmax cross-entropy, fill/scale/axpy/clamp/sum_squares and
 * sgd_update. It says so through the capability query (my_backend_supports); the core asks
 * it at setup and refuses a config that needs more (a conv2d layer, adamw, a half
 * precision) with one message naming every missing op, before anything runs:
 *   backend.my_backend lacks: conv2d_forward(f32) for [layer.conv1], ...
 * Replace the loops with your device's calls, add the ops your users need (the contract of
 * each entry, its dtype arguments and thread rule, is in <fulgur/backend.h>), and widen
 * my_backend_supports as you go. Test it op by op against the CPU backend with the parity
 * harness (tests/cuda/parity_main.c in the fulgur tree: --backend my_backend).
 *
 * The rules of every plugin hold (see the callback template, ../my_callback.c): one
 * exported symbol, no global mutable state, no exit(): errors are an fg_status and a
 * message naming the op and the argument at fault.
 *
 * Config, once the plugin is in the search path:
 *   [backend]
 *   name = my_backend */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/backend.h>
#include <fulgur/backend_checks.h>

#define ALIGN 64

typedef struct my_backend {
    const fg_host *host;
} my_backend;

/* A queue names its device; ops run synchronously, so there is nothing to wait for. */
typedef struct my_queue {
    int device;
} my_queue;

#define FAIL(...) fg_error_set(err, FG_INVALID_ARGUMENT, "backend.my_backend: " __VA_ARGS__)
#define NEED_QUEUE(op)                                                                      \
    do {                                                                                    \
        if (!queue)                                                                         \
            return FAIL("%s: queue is NULL", op);                                           \
    } while (0)

/* ---- devices, memory, queues, copies ---------------------------------------------------- */

static fg_status my_device_count(void *state, int *count, fg_error *err)
{
    (void)state;
    if (!count)
        return FAIL("device_count: count is NULL");
    *count = 1;
    return FG_OK;
}

static fg_status my_device_info(void *state, int device, fg_device_info *info, fg_error *err)
{
    (void)state;
    if (device != 0 || !info)
        return FAIL("device_info: device %d does not exist (1 device)", device);
    uint32_t size = info->struct_size;
    memset(info, 0, sizeof *info);
    info->struct_size = size;
    info->index = 0;
    strcpy(info->name, "my_backend host memory");
    return FG_OK;
}

static fg_status my_alloc(void *state, int device, size_t bytes, void **ptr, fg_error *err)
{
    (void)state;
    if (device != 0)
        return FAIL("alloc: device %d does not exist (1 device)", device);
    *ptr = aligned_alloc(ALIGN, (bytes + ALIGN - 1) / ALIGN * ALIGN + ALIGN);
    if (!*ptr)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.my_backend: alloc: no memory for "
                            "%zu bytes; lower data.batch_size", bytes);
    return FG_OK;
}

static void my_free(void *state, int device, void *ptr)
{
    (void)state;
    (void)device;
    free(ptr);
}

static fg_status my_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err)
{
    return my_alloc(state, 0, bytes, ptr, err);
}

static void my_host_free(void *state, void *ptr)
{
    my_free(state, 0, ptr);
}

static fg_status my_queue_create(void *state, int device, void **queue, fg_error *err)
{
    (void)state;
    if (device != 0)
        return FAIL("queue_create: device %d does not exist (1 device)", device);
    my_queue *q = calloc(1, sizeof *q);
    if (!q)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.my_backend: queue_create: no memory");
    *queue = q;
    return FG_OK;
}

static void my_queue_destroy(void *state, void *queue)
{
    (void)state;
    free(queue);
}

static fg_status my_queue_sync(void *state, void *queue, fg_error *err)
{
    (void)state;
    NEED_QUEUE("queue_sync");
    return FG_OK;
}

/* Host and device are the same memory here: a copy is a memcpy either way. */
static fg_status my_copy(void *state, void *queue, void *dst, int dst_device, const void *src,
                         int src_device, size_t bytes, fg_error *err)
{
    (void)state;
    NEED_QUEUE("copy");
    if (dst_device < -1 || dst_device > 0 || src_device < -1 || src_device > 0)
        return FAIL("copy: device %d -> %d (host is -1, the device 0)", src_device, dst_device);
    if (bytes && (!dst || !src))
        return FAIL("copy: %s is NULL", dst ? "src" : "dst");
    if (bytes)
        memmove(dst, src, bytes);
    return FG_OK;
}

/* ---- the capability query ------------------------------------------------------------- */

/* The ops below, every dtype f32; nothing else. */
static int my_backend_supports(void *state, uint32_t op, const uint32_t *dtypes)
{
    (void)state;
    switch (op) {
    case FG_OP_GEMM: case FG_OP_BIAS_ADD: case FG_OP_BIAS_GRAD:
    case FG_OP_ACTIVATION_FORWARD: case FG_OP_ACTIVATION_BACKWARD:
    case FG_OP_SOFTMAX_XENT_FORWARD: case FG_OP_SOFTMAX_XENT_BACKWARD:
    case FG_OP_FILL: case FG_OP_SCALE: case FG_OP_AXPY: case FG_OP_CLAMP:
    case FG_OP_SUM_SQUARES: case FG_OP_SGD_UPDATE:
        break;
    default:
        return 0;
    }
    const fg_backend_op_desc *d = fg_backend_op_info(op);
    for (int i = 0; i < d->dtype_count; i++)
        if (dtypes[i] != FG_F32)
            return 0;
    return 1;
}

/* Every op starts here: a queue, and f32 operands only (what my_backend_supports says). */
static fg_status my_begin(void *queue, const char *op, int count, const uint32_t *dtypes,
                          fg_error *err)
{
    NEED_QUEUE(op);
    for (int i = 0; i < count; i++)
        if (dtypes[i] != FG_F32)
            return fg_error_set(err, FG_UNAVAILABLE, "backend.my_backend: %s: dtype %s: this "
                                "backend runs f32 only", op, fg_dtype_name((fg_dtype)dtypes[i]));
    return FG_OK;
}

#define BEGIN(op, ...)                                                                      \
    do {                                                                                    \
        const uint32_t dt_[] = {__VA_ARGS__};                                               \
        fg_status st_ = my_begin(queue, op, (int)(sizeof dt_ / sizeof dt_[0]), dt_, err);   \
        if (st_ != FG_OK)                                                                   \
            return st_;                                                                     \
    } while (0)

/* ---- ops ---------------------------------------------------------------------------------- */

/* C(m,n) = alpha op(A) op(B) + beta C, row-major, f32 sums. */
static fg_status my_gemm(void *state, void *queue, uint32_t a_dtype, uint32_t b_dtype,
                         uint32_t c_dtype, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const void *a_, int lda, const void *b_, int ldb,
                         float beta, void *c_, int ldc, fg_error *err)
{
    (void)state;
    BEGIN("gemm", a_dtype, b_dtype, c_dtype);
    const float *a = a_, *b = b_;
    float *c = c_;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += (trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                       (trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            float *out = &c[(size_t)i * ldc + j];
            *out = alpha * acc + (beta == 0.0f ? 0.0f : beta * *out);
        }
    return FG_OK;
}

static fg_status my_bias_add(void *state, void *queue, uint32_t y_dtype, uint32_t bias_dtype,
                             void *y_, const void *bias_, int rows, int cols, int spatial,
                             fg_error *err)
{
    (void)state;
    BEGIN("bias_add", y_dtype, bias_dtype);
    float *y = y_;
    const float *bias = bias_;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            for (int s = 0; s < spatial; s++)
                y[((size_t)r * cols + j) * spatial + s] += bias[j];
    return FG_OK;
}

static fg_status my_bias_grad(void *state, void *queue, uint32_t dbias_dtype, uint32_t dy_dtype,
                              void *dbias_, const void *dy_, int rows, int cols, int spatial,
                              int accumulate, fg_error *err)
{
    (void)state;
    BEGIN("bias_grad", dbias_dtype, dy_dtype);
    float *dbias = dbias_;
    const float *dy = dy_;
    for (int j = 0; j < cols; j++) {
        double sum = 0.0;
        for (int r = 0; r < rows; r++)
            for (int s = 0; s < spatial; s++)
                sum += dy[((size_t)r * cols + j) * spatial + s];
        dbias[j] = accumulate ? dbias[j] + (float)sum : (float)sum;
    }
    return FG_OK;
}

static float act_forward(int act, float v)
{
    switch (act) {
    case FG_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case FG_ACT_GELU: return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    case FG_ACT_TANH: return tanhf(v);
    case FG_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    default: return v;
    }
}

/* act'(x) from the input x or the output y, as backend.h's activation_backward says. */
static float act_slope(int act, float x, float y)
{
    switch (act) {
    case FG_ACT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case FG_ACT_GELU: {
        float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
        float du = 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    }
    case FG_ACT_TANH: return 1.0f - y * y;
    case FG_ACT_SIGMOID: return y * (1.0f - y);
    default: return 1.0f;
    }
}

static fg_status my_activation_forward(void *state, void *queue, uint32_t dtype, int act,
                                       const void *x_, void *y_, size_t n, fg_error *err)
{
    (void)state;
    BEGIN("activation_forward", dtype);
    if (act < FG_ACT_NONE || act > FG_ACT_SIGMOID)
        return FAIL("activation_forward: unknown activation %d", act);
    const float *x = x_;
    float *y = y_;
    for (size_t i = 0; i < n; i++)
        y[i] = act_forward(act, x[i]);
    return FG_OK;
}

static fg_status my_activation_backward(void *state, void *queue, uint32_t dtype, int act,
                                        const void *x_, const void *y_, const void *dy_,
                                        void *dx_, size_t n, fg_error *err)
{
    (void)state;
    BEGIN("activation_backward", dtype);
    if (act < FG_ACT_NONE || act > FG_ACT_SIGMOID)
        return FAIL("activation_backward: unknown activation %d", act);
    const float *x = x_, *y = y_, *dy = dy_;
    float *dx = dx_;
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * act_slope(act, x ? x[i] : 0.0f, y ? y[i] : 0.0f);
    return FG_OK;
}

/* Per row: softmax (max subtracted), loss = log(sum) + max - logit[label], argmax hit. */
static fg_status my_softmax_xent_forward(void *state, void *queue, uint32_t logits_dtype,
                                         const void *logits_, const int32_t *labels, int rows,
                                         int classes, float *probs, float *loss_sum,
                                         float *correct, fg_error *err)
{
    (void)state;
    BEGIN("softmax_xent_forward", logits_dtype);
    const float *logits = logits_;
    double loss = 0.0, hits = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (size_t)r * classes;
        float *p = probs + (size_t)r * classes;
        int label = labels[r], best = 0;
        if (label < 0 || label >= classes)
            return FAIL("softmax_xent_forward: row %d has label %d, outside [0, %d)", r, label,
                        classes);
        float max = x[0], at_label = x[label];
        for (int j = 1; j < classes; j++)
            if (x[j] > max)
                max = x[j], best = j;
        double sum = 0.0;
        for (int j = 0; j < classes; j++) {
            p[j] = expf(x[j] - max);
            sum += p[j];
        }
        for (int j = 0; j < classes; j++)
            p[j] = (float)(p[j] / sum);
        loss += log(sum) + max - at_label;
        hits += best == label;
    }
    if (loss_sum)
        *loss_sum += (float)loss;
    if (correct)
        *correct += (float)hits;
    return FG_OK;
}

static fg_status my_softmax_xent_backward(void *state, void *queue, uint32_t dlogits_dtype,
                                          const float *probs, const int32_t *labels, int rows,
                                          int classes, float scale, void *dlogits_,
                                          fg_error *err)
{
    (void)state;
    BEGIN("softmax_xent_backward", dlogits_dtype);
    float *dlogits = dlogits_;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < classes; j++) {
            size_t i = (size_t)r * classes + j;
            dlogits[i] = (probs[i] - (j == labels[r] ? 1.0f : 0.0f)) * scale;
        }
    return FG_OK;
}

static fg_status my_fill(void *state, void *queue, uint32_t dtype, void *x_, float value,
                         size_t n, fg_error *err)
{
    (void)state;
    BEGIN("fill", dtype);
    float *x = x_;
    for (size_t i = 0; i < n; i++)
        x[i] = value;
    return FG_OK;
}

static fg_status my_scale(void *state, void *queue, uint32_t dtype, void *x_, float alpha,
                          size_t n, fg_error *err)
{
    (void)state;
    BEGIN("scale", dtype);
    float *x = x_;
    for (size_t i = 0; i < n; i++)
        x[i] *= alpha;
    return FG_OK;
}

static fg_status my_axpy(void *state, void *queue, uint32_t x_dtype, uint32_t y_dtype,
                         float alpha, const void *x_, void *y_, size_t n, fg_error *err)
{
    (void)state;
    BEGIN("axpy", x_dtype, y_dtype);
    const float *x = x_;
    float *y = y_;
    for (size_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
    return FG_OK;
}

static fg_status my_clamp(void *state, void *queue, uint32_t dtype, void *x_, float lo, float hi,
                          size_t n, fg_error *err)
{
    (void)state;
    BEGIN("clamp", dtype);
    float *x = x_;
    for (size_t i = 0; i < n; i++) { /* NaN fails both tests and stays NaN */
        float v = x[i] < lo ? lo : x[i];
        x[i] = v > hi ? hi : v;
    }
    return FG_OK;
}

static fg_status my_sum_squares(void *state, void *queue, uint32_t dtype, const void *x_,
                                size_t n, float *out, fg_error *err)
{
    (void)state;
    BEGIN("sum_squares", dtype);
    const float *x = x_;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)x[i] * x[i];
    *out = (float)sum;
    return FG_OK;
}

/* PyTorch's SGD: g = grad + wd p; with momentum, b = g on the first step, else
 * b = momentum b + (1 - dampening) g; nesterov steps along g + momentum b, else b. */
static fg_status my_sgd_update(void *state, void *queue, uint32_t param_dtype,
                               uint32_t grad_dtype, const fg_sgd_args *a, void *param_,
                               const void *grad_, float *buf, size_t n, fg_error *err)
{
    (void)state;
    BEGIN("sgd_update", param_dtype, grad_dtype);
    if (!a || a->struct_size < sizeof *a)
        return FAIL("sgd_update: args are NULL or older than this build's fg_sgd_args");
    float *param = param_;
    const float *grad = grad_;
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + a->weight_decay * param[i], step = g;
        if (a->momentum != 0.0f) {
            buf[i] = a->first_step ? g : a->momentum * buf[i] + (1.0f - a->dampening) * g;
            step = a->nesterov ? g + a->momentum * buf[i] : buf[i];
        }
        param[i] -= a->lr * step;
    }
    return FG_OK;
}

/* ---- the plugin ---------------------------------------------------------------------------- */

static fg_status my_backend_init(const fg_host *host, void **state, fg_error *err)
{
    my_backend *be = calloc(1, sizeof *be);
    if (!be)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.my_backend: out of memory");
    be->host = host;
    *state = be;
    return FG_OK;
}

static void my_backend_deinit(void *state)
{
    free(state);
}

/* Each op behind the SDK's argument checks (<fulgur/backend_checks.h>): my_checked_gemm runs
 * fg_check_gemm (shapes, NULL pointers, the queue), then my_gemm only for a valid call with
 * work to do, so the functions above hold the maths and this backend's own rule (f32 only). */
#define FG_BACKEND_CHECK_WHO "backend.my_backend"
FG_BACKEND_CHECKED_OP(my_, gemm)
FG_BACKEND_CHECKED_OP(my_, bias_add)
FG_BACKEND_CHECKED_OP(my_, bias_grad)
FG_BACKEND_CHECKED_OP(my_, activation_forward)
FG_BACKEND_CHECKED_OP(my_, activation_backward)
FG_BACKEND_CHECKED_OP(my_, softmax_xent_forward)
FG_BACKEND_CHECKED_OP(my_, softmax_xent_backward)
FG_BACKEND_CHECKED_OP(my_, fill)
FG_BACKEND_CHECKED_OP(my_, scale)
FG_BACKEND_CHECKED_OP(my_, axpy)
FG_BACKEND_CHECKED_OP(my_, clamp)
FG_BACKEND_CHECKED_OP(my_, sum_squares)
FG_BACKEND_CHECKED_OP(my_, sgd_update)

/* Entries left out (NULL) are ops this backend does not run; the core names them when a
 * config needs them. */
static const fg_backend_vtable my_backend_vtable = {
    .struct_size = sizeof(fg_backend_vtable),
    .device_count = my_device_count,
    .device_info = my_device_info,
    .alloc = my_alloc,
    .free = my_free,
    .host_alloc = my_host_alloc,
    .host_free = my_host_free,
    .queue_create = my_queue_create,
    .queue_destroy = my_queue_destroy,
    .queue_sync = my_queue_sync,
    .copy = my_copy,
    .supports = my_backend_supports,
    .gemm = my_checked_gemm,
    .bias_add = my_checked_bias_add,
    .bias_grad = my_checked_bias_grad,
    .activation_forward = my_checked_activation_forward,
    .activation_backward = my_checked_activation_backward,
    .softmax_xent_forward = my_checked_softmax_xent_forward,
    .softmax_xent_backward = my_checked_softmax_xent_backward,
    .fill = my_checked_fill,
    .scale = my_checked_scale,
    .axpy = my_checked_axpy,
    .clamp = my_checked_clamp,
    .sum_squares = my_checked_sum_squares,
    .sgd_update = my_checked_sgd_update,
};

FG_PLUGIN_DEFINE(FG_KIND_BACKEND, 0, "my_backend", "0.1.0",
                 "template backend: host memory, f32 MLP ops in plain C",
                 /* no keys besides `name`; FG_PLUGIN_OPTIONS(table) declares some */
                 FG_PLUGIN_NO_OPTIONS, my_backend_init, my_backend_deinit, &my_backend_vtable);
