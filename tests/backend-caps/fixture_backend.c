/* fulgur-backend-nobatchnorm.so, a test fixture (built into a test folder, never installed):
 * the CPU backend, loaded from its built path and driven through its vtable, less two
 * things a real backend may lack: batchnorm_forward (its entry is NULL) and adamw_update
 * with f16 parameters (its capability query says no). backend_caps.sh runs `fulgur check`
 * on configs that need them and expects exit 2 with one message naming both. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/backend.h"

typedef struct fx_backend {
    const fg_backend_vtable *vt; /* the CPU backend's */
    void *state;                 /* its instance */
    void (*deinit)(void *state);
} fx_backend;

static const fg_option fx_options[] = {
    {"threads", FG_OPT_INT, "1", 0, 1024, NULL, "the CPU backend's worker threads"},
};

static void fx_deinit(void *state)
{
    fx_backend *f = state;
    if (!f)
        return;
    if (f->deinit)
        f->deinit(f->state);
    free(f);
}

static fg_status fx_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    void *lib = dlopen(FX_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL); /* never closed, as the host */
    const fg_plugin *cpu = lib ? dlsym(lib, FG_PLUGIN_ENTRY_NAME) : NULL;
    if (!cpu || cpu->kind != FG_KIND_BACKEND || !cpu->init || !cpu->vtable)
        return fg_error_set(err, FG_UNAVAILABLE, "backend.nobatchnorm: cannot load %s: %s",
                            FX_CPU_PLUGIN, lib ? "no backend descriptor" : dlerror());
    fx_backend *f = calloc(1, sizeof *f);
    if (!f)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.nobatchnorm: out of memory");
    fg_status st = cpu->init(host, &f->state, err);
    if (st != FG_OK) {
        free(f);
        return st;
    }
    f->vt = cpu->vtable;
    f->deinit = cpu->deinit;
    *state = f;
    return FG_OK;
}

/* fx_NAME(state, args...) calls the CPU backend's NAME(its state, args...). */
#define FX_ARGS(...) __VA_ARGS__
#define FWD(ret, name, params, args)                                                        \
    static ret fx_##name(void *state, FX_ARGS params)                                       \
    {                                                                                       \
        const fx_backend *f = state;                                                        \
        return f->vt->name(f->state, FX_ARGS args);                                         \
    }

FWD(fg_status, device_count, (int *count, fg_error *err), (count, err))
FWD(fg_status, device_info, (int device, fg_device_info *info, fg_error *err),
    (device, info, err))
FWD(fg_status, alloc, (int device, size_t bytes, void **ptr, fg_error *err),
    (device, bytes, ptr, err))
FWD(void, free, (int device, void *ptr), (device, ptr))
FWD(fg_status, host_alloc, (size_t bytes, void **ptr, fg_error *err), (bytes, ptr, err))
FWD(void, host_free, (void *ptr), (ptr))
FWD(fg_status, queue_create, (int device, void **queue, fg_error *err), (device, queue, err))
FWD(void, queue_destroy, (void *queue), (queue))
FWD(fg_status, queue_sync, (void *queue, fg_error *err), (queue, err))
FWD(fg_status, copy,
    (void *queue, void *dst, int dst_device, const void *src, int src_device, size_t bytes,
     fg_error *err),
    (queue, dst, dst_device, src, src_device, bytes, err))
FWD(fg_status, gemm,
    (void *q, uint32_t at, uint32_t bt, uint32_t ct, int ta, int tb, int m, int n, int k,
     float alpha, const void *a, int lda, const void *b, int ldb, float beta, void *c, int ldc,
     fg_error *err),
    (q, at, bt, ct, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, err))
FWD(fg_status, bias_add,
    (void *q, uint32_t yt, uint32_t bt, void *y, const void *b, int rows, int cols, int sp,
     fg_error *err),
    (q, yt, bt, y, b, rows, cols, sp, err))
FWD(fg_status, bias_grad,
    (void *q, uint32_t dbt, uint32_t dyt, void *db, const void *dy, int rows, int cols, int sp,
     int acc, fg_error *err),
    (q, dbt, dyt, db, dy, rows, cols, sp, acc, err))
FWD(fg_status, activation_forward,
    (void *q, uint32_t t, int act, const void *x, void *y, size_t n, fg_error *err),
    (q, t, act, x, y, n, err))
FWD(fg_status, activation_backward,
    (void *q, uint32_t t, int act, const void *x, const void *y, const void *dy, void *dx,
     size_t n, fg_error *err),
    (q, t, act, x, y, dy, dx, n, err))
FWD(size_t, conv2d_workspace, (const fg_conv2d_desc *d), (d))
FWD(fg_status, conv2d_forward,
    (void *q, uint32_t xt, uint32_t pt, const fg_conv2d_desc *d, const void *x, const void *w,
     const void *b, void *y, void *ws, fg_error *err),
    (q, xt, pt, d, x, w, b, y, ws, err))
FWD(fg_status, conv2d_backward,
    (void *q, uint32_t xt, uint32_t pt, uint32_t gt, const fg_conv2d_desc *d, const void *x,
     const void *w, const void *dy, void *dx, void *dw, void *db, int acc, void *ws,
     fg_error *err),
    (q, xt, pt, gt, d, x, w, dy, dx, dw, db, acc, ws, err))
FWD(fg_status, pool2d_forward,
    (void *q, uint32_t t, int mode, const fg_conv2d_desc *d, const void *x, void *y,
     int32_t *argmax, fg_error *err),
    (q, t, mode, d, x, y, argmax, err))
FWD(fg_status, pool2d_backward,
    (void *q, uint32_t t, int mode, const fg_conv2d_desc *d, const void *dy,
     const int32_t *argmax, void *dx, fg_error *err),
    (q, t, mode, d, dy, argmax, dx, err))
FWD(fg_status, batchnorm_backward,
    (void *q, uint32_t xt, uint32_t pt, uint32_t gt, int n, int c, int sp, const void *x,
     const void *gamma, const float *mean, const float *invstd, const void *dy, void *dx,
     void *dgamma, void *dbeta, int acc, fg_error *err),
    (q, xt, pt, gt, n, c, sp, x, gamma, mean, invstd, dy, dx, dgamma, dbeta, acc, err))
FWD(fg_status, dropout_forward,
    (void *q, uint32_t t, float p, uint64_t seed, uint64_t offset, const void *x, void *y,
     uint8_t *mask, size_t n, fg_error *err),
    (q, t, p, seed, offset, x, y, mask, n, err))
FWD(fg_status, dropout_backward,
    (void *q, uint32_t t, float p, const uint8_t *mask, const void *dy, void *dx, size_t n,
     fg_error *err),
    (q, t, p, mask, dy, dx, n, err))
FWD(fg_status, softmax_xent_forward,
    (void *q, uint32_t t, const void *logits, const int32_t *labels, int rows, int classes,
     float *probs, float *loss_sum, float *correct, fg_error *err),
    (q, t, logits, labels, rows, classes, probs, loss_sum, correct, err))
FWD(fg_status, softmax_xent_backward,
    (void *q, uint32_t t, const float *probs, const int32_t *labels, int rows, int classes,
     float scale, void *dlogits, fg_error *err),
    (q, t, probs, labels, rows, classes, scale, dlogits, err))
FWD(fg_status, fill, (void *q, uint32_t t, void *x, float v, size_t n, fg_error *err),
    (q, t, x, v, n, err))
FWD(fg_status, scale, (void *q, uint32_t t, void *x, float a, size_t n, fg_error *err),
    (q, t, x, a, n, err))
FWD(fg_status, axpy,
    (void *q, uint32_t xt, uint32_t yt, float a, const void *x, void *y, size_t n,
     fg_error *err),
    (q, xt, yt, a, x, y, n, err))
FWD(fg_status, clamp,
    (void *q, uint32_t t, void *x, float lo, float hi, size_t n, fg_error *err),
    (q, t, x, lo, hi, n, err))
FWD(fg_status, sum_squares,
    (void *q, uint32_t t, const void *x, size_t n, float *out, fg_error *err),
    (q, t, x, n, out, err))
FWD(fg_status, cast,
    (void *q, uint32_t dt, uint32_t st, void *dst, const void *src, size_t n, fg_error *err),
    (q, dt, st, dst, src, n, err))
FWD(fg_status, sgd_update,
    (void *q, uint32_t pt, uint32_t gt, const fg_sgd_args *a, void *p, const void *g,
     float *buf, size_t n, fg_error *err),
    (q, pt, gt, a, p, g, buf, n, err))
FWD(fg_status, adamw_update,
    (void *q, uint32_t pt, uint32_t gt, const fg_adamw_args *a, void *p, const void *g,
     float *m, float *v, size_t n, fg_error *err),
    (q, pt, gt, a, p, g, m, v, n, err))

/* The CPU backend's answer, except adamw_update with f16 parameters. */
static int fx_supports(void *state, uint32_t op, const uint32_t *dtypes)
{
    const fx_backend *f = state;
    if (op == FG_OP_ADAMW_UPDATE && dtypes[0] == FG_F16)
        return 0;
    return f->vt->supports(f->state, op, dtypes);
}

static const fg_backend_vtable fx_vtable = {
    .struct_size = sizeof(fg_backend_vtable),
    .device_count = fx_device_count,
    .device_info = fx_device_info,
    .alloc = fx_alloc,
    .free = fx_free,
    .host_alloc = fx_host_alloc,
    .host_free = fx_host_free,
    .queue_create = fx_queue_create,
    .queue_destroy = fx_queue_destroy,
    .queue_sync = fx_queue_sync,
    .copy = fx_copy,
    .supports = fx_supports,
    .gemm = fx_gemm,
    .bias_add = fx_bias_add,
    .bias_grad = fx_bias_grad,
    .activation_forward = fx_activation_forward,
    .activation_backward = fx_activation_backward,
    .conv2d_workspace = fx_conv2d_workspace,
    .conv2d_forward = fx_conv2d_forward,
    .conv2d_backward = fx_conv2d_backward,
    .pool2d_forward = fx_pool2d_forward,
    .pool2d_backward = fx_pool2d_backward,
    .batchnorm_forward = NULL, /* the op this backend lacks */
    .batchnorm_backward = fx_batchnorm_backward,
    .dropout_forward = fx_dropout_forward,
    .dropout_backward = fx_dropout_backward,
    .softmax_xent_forward = fx_softmax_xent_forward,
    .softmax_xent_backward = fx_softmax_xent_backward,
    .fill = fx_fill,
    .scale = fx_scale,
    .axpy = fx_axpy,
    .clamp = fx_clamp,
    .sum_squares = fx_sum_squares,
    .cast = fx_cast,
    .sgd_update = fx_sgd_update,
    .adamw_update = fx_adamw_update,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_BACKEND, 0),
    .name = "nobatchnorm",
    .version = "0.0.1",
    .description = "test fixture: the CPU backend without batchnorm_forward, nor adamw_update "
                   "on f16 parameters",
    FG_PLUGIN_OPTIONS(fx_options),
    .init = fx_init,
    .deinit = fx_deinit,
    .vtable = &fx_vtable,
};
