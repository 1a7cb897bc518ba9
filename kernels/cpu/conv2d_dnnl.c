/* 2-D convolution through oneDNN's C API (see conv2d_dnnl.h).
 *
 * Layouts: the primitives are created with format "any", so oneDNN picks its blocked
 * layouts (nChw16c and friends: 2-4x faster than its plain-NCHW gemm path on AVX-512);
 * each tensor then passes through a "port", a reorder between the caller's plain layout
 * and the primitive's, into a buffer of the workspace (no reorder where they agree).
 *
 * Threads: oneDNN's runtime here is OpenMP. Its team would spin for milliseconds after
 * every parallel region (libgomp's default wait policy: about 11 ms of a core measured
 * after one empty region), taking the core from the pool's next op. So oneDNN runs at
 * one OpenMP thread per calling thread, and the batch is cut into pieces that the pool's
 * threads run side by side: the pool stays the only set of compute threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

#include "conv2d_dnnl.h"
#include "half.h"

/* The tensors between the caller and a primitive. */
enum {
    P_FWD_SRC, P_FWD_W, P_FWD_DST,       /* forward */
    P_BD_DDST, P_BD_W, P_BD_DSRC,        /* backward data */
    P_BW_SRC, P_BW_DDST, P_BW_DW,        /* backward weights (dw to f32 KCRS partials) */
    P_COUNT
};
enum { OP_FWD, OP_BD, OP_BW, OP_COUNT };

typedef struct fg_dnnl_port {
    dnnl_memory_desc_t user, inner;
    dnnl_primitive_t reorder; /* NULL when the two layouts agree */
    int output;               /* reordered after the primitive, not before */
    int shared;               /* weights: reordered once per call for every piece */
    size_t offset;            /* of the inner buffer in the piece's workspace, or (shared)
                                 in the whole workspace */
} fg_dnnl_port;

/* Everything for one piece size (at most two sizes: the batch is cut evenly). */
typedef struct fg_dnnl_plan {
    int n;
    dnnl_primitive_t prim[OP_COUNT];
    char impl[OP_COUNT][48];
    fg_dnnl_port port[P_COUNT];
    dnnl_memory_desc_t bias, dbias, scratch[OP_COUNT];
    size_t scratch_offset[OP_COUNT];
    size_t dw_offset, db_offset; /* f32 partial sums of this piece */
    size_t bytes;                /* of the piece's workspace */
} fg_dnnl_plan;

typedef struct fg_dnnl_piece {
    const fg_dnnl_plan *plan;
    int first;     /* first image */
    size_t offset; /* of its workspace */
    dnnl_stream_t stream;
    dnnl_memory_t user[P_COUNT], inner[P_COUNT], bias, dbias, scratch[OP_COUNT];
} fg_dnnl_piece;

struct fg_cpu_dnnl_conv {
    fg_cpu_conv_shape d;
    int act_type, param_type, parts;
    dnnl_engine_t engine;
    fg_dnnl_plan plan[2];
    int plans;
    fg_dnnl_piece *piece;
    size_t bytes;
    void *zero_bias; /* K zeros: the forward primitive always adds a bias */
};

#define FG_DNNL_ALIGN 64

static size_t fg_dnnl_round(size_t b)
{
    return (b + FG_DNNL_ALIGN - 1) / FG_DNNL_ALIGN * FG_DNNL_ALIGN;
}

static void fg_dnnl_one_thread(void)
{
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    omp_set_num_threads(1);
#endif
}

int fg_cpu_dnnl_bf16_native(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
           (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

static dnnl_data_type_t fg_dnnl_type(int t)
{
    return t == FG_CPU_BF16 ? dnnl_bf16 : dnnl_f32;
}

#define FG_DNNL_TRY(call, what)                                                            \
    do {                                                                                   \
        dnnl_status_t st_ = (call);                                                        \
        if (st_ != dnnl_success) {                                                         \
            snprintf(why, why_len, "oneDNN %s failed (status %d)", (what), (int)st_);      \
            return -1;                                                                     \
        }                                                                                  \
    } while (0)

/* A port between `user` and the primitive's layout `inner`; its buffer is reserved at
 * *bytes, unless shared (placed by fg_dnnl_conv_build). */
static int fg_dnnl_port_init(fg_dnnl_port *p, dnnl_engine_t eng, const dnnl_memory_desc_t *user,
                             const dnnl_memory_desc_t *inner, int output, int shared,
                             size_t *bytes, char *why, size_t why_len)
{
    p->user = *user;
    p->inner = *inner;
    p->output = output;
    p->shared = shared;
    p->reorder = NULL;
    if (dnnl_memory_desc_equal(user, inner))
        return 0;
    dnnl_primitive_attr_t attr;
    FG_DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr create");
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = output ? dnnl_reorder_primitive_desc_create(&pd, inner, eng, user, eng, attr)
                              : dnnl_reorder_primitive_desc_create(&pd, user, eng, inner, eng, attr);
    dnnl_primitive_attr_destroy(attr);
    FG_DNNL_TRY(st, "reorder descriptor");
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (sp && dnnl_memory_desc_get_size(sp) > 0) {
        dnnl_primitive_desc_destroy(pd);
        snprintf(why, why_len, "a oneDNN reorder needs scratch memory (not supported)");
        return -1;
    }
    st = dnnl_primitive_create(&p->reorder, pd);
    dnnl_primitive_desc_destroy(pd);
    FG_DNNL_TRY(st, "reorder create");
    if (!shared) {
        p->offset = *bytes;
        *bytes += fg_dnnl_round(dnnl_memory_desc_get_size(inner));
    }
    return 0;
}

static const dnnl_memory_desc_t *fg_dnnl_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* Takes the primitive of pd (and its scratchpad size and name); destroys pd. */
static int fg_dnnl_take(fg_dnnl_plan *pl, int op, dnnl_primitive_desc_t pd, char *why,
                        size_t why_len)
{
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(pl->impl[op], sizeof pl->impl[op], "%s", impl);
    pl->scratch[op] = *fg_dnnl_md(pd, dnnl_query_scratchpad_md);
    pl->scratch_offset[op] = pl->bytes;
    pl->bytes += fg_dnnl_round(dnnl_memory_desc_get_size(&pl->scratch[op]));
    dnnl_status_t st = dnnl_primitive_create(&pl->prim[op], pd);
    dnnl_primitive_desc_destroy(pd);
    FG_DNNL_TRY(st, "primitive create");
    return 0;
}

/* Forward, backward-data and backward-weights primitives and ports for n images. */
static int fg_dnnl_plan_init(fg_cpu_dnnl_conv *c, fg_dnnl_plan *pl, int n, char *why,
                             size_t why_len)
{
    const fg_cpu_conv_shape *d = &c->d;
    dnnl_data_type_t at = fg_dnnl_type(c->act_type), pt = fg_dnnl_type(c->param_type);
    dnnl_memory_desc_t src_u, dst_u, w_u, w_f32, src_a, dst_a, w_a, dw_a;
    dnnl_dims_t sdims = { n, d->c, d->h, d->w }, ddims = { n, d->k, d->out_h, d->out_w };
    dnnl_dims_t wdims = { d->k, d->c, d->r, d->s }, bdims = { d->k };
    dnnl_dims_t strides = { d->stride_h, d->stride_w }, pad_l = { d->pad_h, d->pad_w };
    /* the far side's padding makes out = (in + pad_l + pad_r - window) / stride + 1 exact */
    dnnl_dims_t pad_r = { (d->out_h - 1) * d->stride_h + d->r - d->h - d->pad_h,
                          (d->out_w - 1) * d->stride_w + d->s - d->w - d->pad_w };
    pl->n = n;
    pl->bytes = 0;
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_u, 4, sdims, at, dnnl_nchw), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_u, 4, ddims, at, dnnl_nchw), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_u, 4, wdims, pt, dnnl_oihw), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_f32, 4, wdims, dnnl_f32, dnnl_oihw), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&pl->bias, 1, bdims, pt, dnnl_a), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&pl->dbias, 1, bdims, dnnl_f32, dnnl_a), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_a, 4, sdims, at, dnnl_format_tag_any), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_a, 4, ddims, at, dnnl_format_tag_any), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&w_a, 4, wdims, at, dnnl_format_tag_any), "memory desc");
    FG_DNNL_TRY(dnnl_memory_desc_init_by_tag(&dw_a, 4, wdims, dnnl_f32, dnnl_format_tag_any), "memory desc");

    dnnl_primitive_attr_t attr;
    FG_DNNL_TRY(dnnl_primitive_attr_create(&attr), "attr create");
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_convolution_desc_t fd, bdd, bwd;
    dnnl_primitive_desc_t fpd = NULL, bdpd = NULL, bwpd = NULL;
    dnnl_status_t st = dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                          dnnl_convolution_direct, &src_a, &w_a,
                                                          &pl->bias, &dst_a, strides, pad_l, pad_r);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&fpd, &fd, attr, c->engine, NULL);
    if (st == dnnl_success)
        st = dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &src_a, &w_a,
                                                      &dst_a, strides, pad_l, pad_r);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&bdpd, &bdd, attr, c->engine, fpd);
    if (st == dnnl_success)
        st = dnnl_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &src_a,
                                                         &dw_a, &pl->dbias, &dst_a, strides,
                                                         pad_l, pad_r);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&bwpd, &bwd, attr, c->engine, fpd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        if (fpd)
            dnnl_primitive_desc_destroy(fpd);
        if (bdpd)
            dnnl_primitive_desc_destroy(bdpd);
        snprintf(why, why_len, "oneDNN has no convolution for this shape and dtype (status %d)",
                 (int)st);
        return -1;
    }
    struct { int port; const dnnl_memory_desc_t *user; dnnl_primitive_desc_t pd; dnnl_query_t q; int out; } ports[P_COUNT] = {
        { P_FWD_SRC, &src_u, fpd, dnnl_query_src_md, 0 },
        { P_FWD_W, &w_u, fpd, dnnl_query_weights_md, 0 },
        { P_FWD_DST, &dst_u, fpd, dnnl_query_dst_md, 1 },
        { P_BD_DDST, &dst_u, bdpd, dnnl_query_diff_dst_md, 0 },
        { P_BD_W, &w_u, bdpd, dnnl_query_weights_md, 0 },
        { P_BD_DSRC, &src_u, bdpd, dnnl_query_diff_src_md, 1 },
        { P_BW_SRC, &src_u, bwpd, dnnl_query_src_md, 0 },
        { P_BW_DDST, &dst_u, bwpd, dnnl_query_diff_dst_md, 0 },
        { P_BW_DW, &w_f32, bwpd, dnnl_query_diff_weights_md, 1 },
    };
    int rc = 0;
    for (int i = 0; i < P_COUNT && rc == 0; i++)
        rc = fg_dnnl_port_init(&pl->port[ports[i].port], c->engine, ports[i].user,
                               fg_dnnl_md(ports[i].pd, ports[i].q), ports[i].out,
                               ports[i].port == P_FWD_W || ports[i].port == P_BD_W, &pl->bytes,
                               why, why_len);
    if (rc != 0) {
        dnnl_primitive_desc_destroy(fpd);
        dnnl_primitive_desc_destroy(bdpd);
        dnnl_primitive_desc_destroy(bwpd);
        return -1;
    }
    pl->dw_offset = pl->bytes;
    pl->bytes += fg_dnnl_round((size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s * 4);
    pl->db_offset = pl->bytes;
    pl->bytes += fg_dnnl_round((size_t)d->k * 4);
    if (fg_dnnl_take(pl, OP_FWD, fpd, why, why_len) != 0) {
        dnnl_primitive_desc_destroy(bdpd);
        dnnl_primitive_desc_destroy(bwpd);
        return -1;
    }
    if (fg_dnnl_take(pl, OP_BD, bdpd, why, why_len) != 0) {
        dnnl_primitive_desc_destroy(bwpd);
        return -1;
    }
    return fg_dnnl_take(pl, OP_BW, bwpd, why, why_len);
}

static void fg_dnnl_plan_destroy(fg_dnnl_plan *pl)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (pl->prim[i])
            dnnl_primitive_destroy(pl->prim[i]);
    for (int i = 0; i < P_COUNT; i++)
        if (pl->port[i].reorder)
            dnnl_primitive_destroy(pl->port[i].reorder);
}

static int fg_dnnl_piece_init(fg_cpu_dnnl_conv *c, fg_dnnl_piece *pc, char *why,
                              size_t why_len)
{
    const fg_dnnl_plan *pl = pc->plan;
    FG_DNNL_TRY(dnnl_stream_create(&pc->stream, c->engine, dnnl_stream_default_flags),
                "stream create");
    for (int i = 0; i < P_COUNT; i++) {
        FG_DNNL_TRY(dnnl_memory_create(&pc->user[i], &pl->port[i].user, c->engine,
                                       DNNL_MEMORY_NONE), "memory create");
        FG_DNNL_TRY(dnnl_memory_create(&pc->inner[i], &pl->port[i].inner, c->engine,
                                       DNNL_MEMORY_NONE), "memory create");
    }
    FG_DNNL_TRY(dnnl_memory_create(&pc->bias, &pl->bias, c->engine, DNNL_MEMORY_NONE),
                "memory create");
    FG_DNNL_TRY(dnnl_memory_create(&pc->dbias, &pl->dbias, c->engine, DNNL_MEMORY_NONE),
                "memory create");
    for (int i = 0; i < OP_COUNT; i++)
        FG_DNNL_TRY(dnnl_memory_create(&pc->scratch[i], &pl->scratch[i], c->engine,
                                       DNNL_MEMORY_NONE), "memory create");
    return 0;
}

static void fg_dnnl_piece_destroy(fg_dnnl_piece *pc)
{
    dnnl_memory_t *all[] = { pc->user, pc->inner };
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < P_COUNT; i++)
            if (all[a][i])
                dnnl_memory_destroy(all[a][i]);
    if (pc->bias)
        dnnl_memory_destroy(pc->bias);
    if (pc->dbias)
        dnnl_memory_destroy(pc->dbias);
    for (int i = 0; i < OP_COUNT; i++)
        if (pc->scratch[i])
            dnnl_memory_destroy(pc->scratch[i]);
    if (pc->stream)
        dnnl_stream_destroy(pc->stream);
}

void fg_cpu_dnnl_conv_destroy(fg_cpu_dnnl_conv *c)
{
    if (!c)
        return;
    for (int i = 0; c->piece && i < c->parts; i++)
        fg_dnnl_piece_destroy(&c->piece[i]);
    for (int i = 0; i < c->plans; i++)
        fg_dnnl_plan_destroy(&c->plan[i]);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    free(c->piece);
    free(c->zero_bias);
    free(c);
}

static int fg_dnnl_conv_build(fg_cpu_dnnl_conv *c, char *why, size_t why_len)
{
    const fg_cpu_conv_shape *d = &c->d;
    FG_DNNL_TRY(dnnl_engine_create(&c->engine, dnnl_cpu, 0), "engine create");
    int small = d->n / c->parts, extra = d->n % c->parts; /* the first `extra` get one more */
    int sizes[2] = { small + (extra ? 1 : 0), small };
    c->plans = extra && small ? 2 : 1;
    for (int i = 0; i < c->plans; i++)
        if (fg_dnnl_plan_init(c, &c->plan[i], sizes[i], why, why_len) != 0) {
            c->plans = i + 1; /* destroy what the failed one made too */
            return -1;
        }
    if (!(c->piece = calloc((size_t)c->parts, sizeof *c->piece)) ||
        !(c->zero_bias = calloc((size_t)d->k, sizeof(float)))) {
        snprintf(why, why_len, "no memory for the oneDNN convolution's state");
        return -1;
    }
    /* the reordered weights, once per plan, then the pieces' buffers */
    c->bytes = 0;
    for (int i = 0; i < c->plans; i++)
        for (int w = 0; w < 2; w++) {
            fg_dnnl_port *p = &c->plan[i].port[w ? P_BD_W : P_FWD_W];
            if (!p->reorder)
                continue;
            p->offset = c->bytes;
            c->bytes += fg_dnnl_round(dnnl_memory_desc_get_size(&p->inner));
        }
    int first = 0;
    for (int i = 0; i < c->parts; i++) {
        fg_dnnl_piece *pc = &c->piece[i];
        pc->plan = &c->plan[i < extra || !small ? 0 : c->plans - 1];
        pc->first = first;
        pc->offset = c->bytes;
        first += pc->plan->n;
        c->bytes += pc->plan->bytes;
        if (fg_dnnl_piece_init(c, pc, why, why_len) != 0)
            return -1;
    }
    return 0;
}

int fg_cpu_dnnl_conv_create(const fg_cpu_conv_shape *d, int act_type, int param_type, int parts,
                            fg_cpu_dnnl_conv **out, char *why, size_t why_len)
{
    *out = NULL;
    if (act_type != FG_CPU_F32 && act_type != FG_CPU_BF16) {
        snprintf(why, why_len, "oneDNN convolutions here take f32 or bf16 activations");
        return -1;
    }
    if (param_type != FG_CPU_F32 && param_type != act_type) {
        snprintf(why, why_len, "oneDNN convolutions here take f32 weights or the activations' dtype");
        return -1;
    }
    if (act_type == FG_CPU_BF16 && !fg_cpu_dnnl_bf16_native()) {
        snprintf(why, why_len, "this CPU has no native bf16 (AVX512_BF16 or AMX)");
        return -1;
    }
    fg_cpu_dnnl_conv *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, why_len, "no memory for the oneDNN convolution's state");
        return -1;
    }
    c->d = *d;
    c->act_type = act_type;
    c->param_type = param_type;
    c->parts = parts < 1 ? 1 : parts > d->n ? d->n : parts;
    fg_dnnl_one_thread(); /* the primitives are made for the thread count they run at */
    if (fg_dnnl_conv_build(c, why, why_len) != 0) {
        fg_cpu_dnnl_conv_destroy(c);
        return -1;
    }
    *out = c;
    return 0;
}

size_t fg_cpu_dnnl_conv_workspace(const fg_cpu_dnnl_conv *c)
{
    return c->bytes;
}

void fg_cpu_dnnl_conv_impl(const fg_cpu_dnnl_conv *c, const char **fwd, const char **bwd_data,
                           const char **bwd_weights)
{
    *fwd = c->plan[0].impl[OP_FWD];
    *bwd_data = c->plan[0].impl[OP_BD];
    *bwd_weights = c->plan[0].impl[OP_BW];
}

/* ---- execution ------------------------------------------------------------------------ */

typedef struct fg_dnnl_run {
    fg_cpu_dnnl_conv *c;
    const void *x, *w, *bias, *dy;
    void *y, *dx;
    char *ws;
    int status[64]; /* per piece: the first failing oneDNN status */
} fg_dnnl_run;

static size_t fg_dnnl_elem(int type)
{
    return type == FG_CPU_F32 ? 4 : 2;
}

/* Binds port i of piece pc to the caller's `user` and, for an input, reorders it in (a
 * shared port only when `shared_too`: fg_dnnl_shared does it once per call). */
static dnnl_status_t fg_dnnl_bind_port(fg_dnnl_run *r, fg_dnnl_piece *pc, int i,
                                       const void *user, int shared_too)
{
    const fg_dnnl_port *p = &pc->plan->port[i];
    dnnl_status_t st = dnnl_memory_set_data_handle_v2(pc->user[i], (void *)user, pc->stream);
    void *inner = !p->reorder ? (void *)user
                  : p->shared ? r->ws + p->offset
                              : r->ws + pc->offset + p->offset;
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle_v2(pc->inner[i], inner, pc->stream);
    if (st == dnnl_success && p->reorder && !p->output && (!p->shared || shared_too)) {
        dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, pc->user[i] }, { DNNL_ARG_TO, pc->inner[i] } };
        st = dnnl_primitive_execute(p->reorder, pc->stream, 2, a);
    }
    return st;
}

static dnnl_status_t fg_dnnl_bind(fg_dnnl_run *r, fg_dnnl_piece *pc, int i, const void *user)
{
    return fg_dnnl_bind_port(r, pc, i, user, 0);
}

/* Reorders the weights into port i's shared buffer of every plan, on the calling thread. */
static int fg_dnnl_shared(fg_dnnl_run *r, int i, const void *w)
{
    fg_dnnl_one_thread();
    for (int k = 0; k < r->c->plans; k++)
        for (int j = 0; j < r->c->parts; j++)
            if (r->c->piece[j].plan == &r->c->plan[k]) {
                dnnl_status_t st = fg_dnnl_bind_port(r, &r->c->piece[j], i, w, 1);
                if (st != dnnl_success)
                    return (int)st;
                break;
            }
    return (int)dnnl_success;
}

/* For an output port: reorders the primitive's result out to the caller's buffer. */
static dnnl_status_t fg_dnnl_unbind(fg_dnnl_piece *pc, int i)
{
    const fg_dnnl_port *p = &pc->plan->port[i];
    if (!p->reorder)
        return dnnl_success;
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, pc->inner[i] }, { DNNL_ARG_TO, pc->user[i] } };
    return dnnl_primitive_execute(p->reorder, pc->stream, 2, a);
}

static dnnl_status_t fg_dnnl_scratch(fg_dnnl_piece *pc, char *ws, int op)
{
    return dnnl_memory_set_data_handle_v2(pc->scratch[op], ws + pc->plan->scratch_offset[op],
                                          pc->stream);
}

static const char *fg_dnnl_image(const void *base, int first, size_t image, int type)
{
    return (const char *)base + (size_t)first * image * fg_dnnl_elem(type);
}

static dnnl_status_t fg_dnnl_forward_piece(fg_dnnl_run *r, fg_dnnl_piece *pc)
{
    const fg_cpu_conv_shape *d = &r->c->d;
    int at = r->c->act_type;
    char *ws = r->ws + pc->offset;
    size_t xi = (size_t)d->c * (size_t)d->h * (size_t)d->w;
    size_t yi = (size_t)d->k * (size_t)d->out_h * (size_t)d->out_w;
    dnnl_status_t st = fg_dnnl_bind(r, pc, P_FWD_SRC, fg_dnnl_image(r->x, pc->first, xi, at));
    if (st == dnnl_success)
        st = fg_dnnl_bind(r, pc, P_FWD_W, r->w);
    if (st == dnnl_success)
        st = fg_dnnl_bind(r, pc, P_FWD_DST, fg_dnnl_image(r->y, pc->first, yi, at));
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle_v2(pc->bias, (void *)r->bias, pc->stream);
    if (st == dnnl_success)
        st = fg_dnnl_scratch(pc, ws, OP_FWD);
    if (st == dnnl_success) {
        dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, pc->inner[P_FWD_SRC] },
                                { DNNL_ARG_WEIGHTS, pc->inner[P_FWD_W] },
                                { DNNL_ARG_BIAS, pc->bias },
                                { DNNL_ARG_DST, pc->inner[P_FWD_DST] },
                                { DNNL_ARG_SCRATCHPAD, pc->scratch[OP_FWD] } };
        st = dnnl_primitive_execute(pc->plan->prim[OP_FWD], pc->stream, 5, a);
    }
    if (st == dnnl_success)
        st = fg_dnnl_unbind(pc, P_FWD_DST);
    return st;
}

static dnnl_status_t fg_dnnl_backward_piece(fg_dnnl_run *r, fg_dnnl_piece *pc)
{
    const fg_cpu_conv_shape *d = &r->c->d;
    int at = r->c->act_type;
    char *ws = r->ws + pc->offset;
    size_t xi = (size_t)d->c * (size_t)d->h * (size_t)d->w;
    size_t yi = (size_t)d->k * (size_t)d->out_h * (size_t)d->out_w;
    const void *dy = fg_dnnl_image(r->dy, pc->first, yi, at);
    dnnl_status_t st = fg_dnnl_bind(r, pc, P_BW_SRC, fg_dnnl_image(r->x, pc->first, xi, at));
    if (st == dnnl_success)
        st = fg_dnnl_bind(r, pc, P_BW_DDST, dy);
    if (st == dnnl_success)
        st = fg_dnnl_bind(r, pc, P_BW_DW, ws + pc->plan->dw_offset);
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle_v2(pc->dbias, ws + pc->plan->db_offset, pc->stream);
    if (st == dnnl_success)
        st = fg_dnnl_scratch(pc, ws, OP_BW);
    if (st == dnnl_success) {
        dnnl_exec_arg_t a[] = { { DNNL_ARG_SRC, pc->inner[P_BW_SRC] },
                                { DNNL_ARG_DIFF_DST, pc->inner[P_BW_DDST] },
                                { DNNL_ARG_DIFF_WEIGHTS, pc->inner[P_BW_DW] },
                                { DNNL_ARG_DIFF_BIAS, pc->dbias },
                                { DNNL_ARG_SCRATCHPAD, pc->scratch[OP_BW] } };
        st = dnnl_primitive_execute(pc->plan->prim[OP_BW], pc->stream, 5, a);
    }
    if (st == dnnl_success)
        st = fg_dnnl_unbind(pc, P_BW_DW);
    if (st != dnnl_success || !r->dx)
        return st;
    st = fg_dnnl_bind(r, pc, P_BD_DDST, dy);
    if (st == dnnl_success)
        st = fg_dnnl_bind(r, pc, P_BD_W, r->w);
    if (st == dnnl_success)
        st = fg_dnnl_bind(r, pc, P_BD_DSRC, fg_dnnl_image(r->dx, pc->first, xi, at));
    if (st == dnnl_success)
        st = fg_dnnl_scratch(pc, ws, OP_BD);
    if (st == dnnl_success) {
        dnnl_exec_arg_t a[] = { { DNNL_ARG_DIFF_DST, pc->inner[P_BD_DDST] },
                                { DNNL_ARG_WEIGHTS, pc->inner[P_BD_W] },
                                { DNNL_ARG_DIFF_SRC, pc->inner[P_BD_DSRC] },
                                { DNNL_ARG_SCRATCHPAD, pc->scratch[OP_BD] } };
        st = dnnl_primitive_execute(pc->plan->prim[OP_BD], pc->stream, 4, a);
    }
    if (st == dnnl_success)
        st = fg_dnnl_unbind(pc, P_BD_DSRC);
    return st;
}

static void fg_dnnl_forward_range(void *p, size_t b, size_t e)
{
    fg_dnnl_run *r = p;
    fg_dnnl_one_thread();
    for (size_t i = b; i < e; i++)
        r->status[i] = (int)fg_dnnl_forward_piece(r, &r->c->piece[i]);
}

static void fg_dnnl_backward_range(void *p, size_t b, size_t e)
{
    fg_dnnl_run *r = p;
    fg_dnnl_one_thread();
    for (size_t i = b; i < e; i++)
        r->status[i] = (int)fg_dnnl_backward_piece(r, &r->c->piece[i]);
}

static int fg_dnnl_check(const fg_dnnl_run *r, const char *op, char *why, size_t why_len)
{
    for (int i = 0; i < r->c->parts; i++)
        if (r->status[i] != (int)dnnl_success) {
            snprintf(why, why_len, "oneDNN convolution %s failed (status %d)", op, r->status[i]);
            return -1;
        }
    return 0;
}

#define FG_DNNL_MAX_PARTS ((int)(sizeof(((fg_dnnl_run *)0)->status) / sizeof(int)))

int fg_cpu_dnnl_conv_forward(fg_cpu_pool *pool, fg_cpu_dnnl_conv *c, const void *x,
                             const void *w, const void *bias, void *y, void *workspace,
                             char *why, size_t why_len)
{
    fg_dnnl_run r = { .c = c, .x = x, .w = w, .bias = bias ? bias : c->zero_bias, .y = y,
                      .ws = workspace };
    int st = fg_dnnl_shared(&r, P_FWD_W, w);
    if (st != (int)dnnl_success) {
        snprintf(why, why_len, "oneDNN weights reorder failed (status %d)", st);
        return -1;
    }
    fg_cpu_parallel_for(pool, (size_t)c->parts, 1, 1, fg_dnnl_forward_range, &r);
    return fg_dnnl_check(&r, "forward", why, why_len);
}

/* ---- the pieces' partial weight gradients, summed in piece order ----------------------- */

typedef struct fg_dnnl_sum {
    const fg_cpu_dnnl_conv *c;
    const char *ws;
    size_t offset_of_plan[2]; /* dw or db offset within a piece, per plan */
    void *out;
    int type, accumulate;
} fg_dnnl_sum;

static void fg_dnnl_sum_range(void *p, size_t b, size_t e)
{
    fg_dnnl_sum *s = p;
    for (size_t i = b; i < e; i++) {
        float v = 0.0f;
        if (s->accumulate)
            v = s->type == FG_CPU_F32   ? ((const float *)s->out)[i]
                : s->type == FG_CPU_F16 ? fg_f16_to_f32(((const uint16_t *)s->out)[i])
                                        : fg_bf16_to_f32(((const uint16_t *)s->out)[i]);
        for (int k = 0; k < s->c->parts; k++) {
            const fg_dnnl_piece *pc = &s->c->piece[k];
            size_t off = s->offset_of_plan[pc->plan == &s->c->plan[0] ? 0 : 1];
            v += ((const float *)(s->ws + pc->offset + off))[i];
        }
        if (s->type == FG_CPU_F32)
            ((float *)s->out)[i] = v;
        else if (s->type == FG_CPU_F16)
            ((uint16_t *)s->out)[i] = fg_f32_to_f16(v);
        else
            ((uint16_t *)s->out)[i] = fg_f32_to_bf16(v);
    }
}

static void fg_dnnl_sum_parts(fg_cpu_pool *pool, const fg_cpu_dnnl_conv *c, const char *ws, int bias,
                        void *out, size_t n, int type, int accumulate)
{
    fg_dnnl_sum s = { c, ws, { 0, 0 }, out, type, accumulate };
    for (int i = 0; i < c->plans; i++)
        s.offset_of_plan[i] = bias ? c->plan[i].db_offset : c->plan[i].dw_offset;
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 16, fg_dnnl_sum_range, &s);
}

int fg_cpu_dnnl_conv_backward(fg_cpu_pool *pool, fg_cpu_dnnl_conv *c, const void *x,
                              const void *w, const void *dy, void *dx, void *dw, void *dbias,
                              int grad_type, int accumulate, void *workspace, char *why,
                              size_t why_len)
{
    fg_dnnl_run r = { .c = c, .x = x, .w = w, .dy = dy, .dx = dx, .ws = workspace };
    int st = dx ? fg_dnnl_shared(&r, P_BD_W, w) : (int)dnnl_success;
    if (st != (int)dnnl_success) {
        snprintf(why, why_len, "oneDNN weights reorder failed (status %d)", st);
        return -1;
    }
    fg_cpu_parallel_for(pool, (size_t)c->parts, 1, 1, fg_dnnl_backward_range, &r);
    if (fg_dnnl_check(&r, "backward", why, why_len) != 0)
        return -1;
    const fg_cpu_conv_shape *d = &c->d;
    size_t wn = (size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s;
    if (dw)
        fg_dnnl_sum_parts(pool, c, workspace, 0, dw, wn, grad_type, accumulate);
    if (dbias)
        fg_dnnl_sum_parts(pool, c, workspace, 1, dbias, (size_t)d->k, grad_type, accumulate);
    return 0;
}
