/* gemm through oneDNN's matmul: bf16 (its brgemm kernels on avx512_bf16 ran the MLP's
 * shapes at about 2.2x OpenBLAS's sgemm on one Zen 4 core; bench_backend_cpu --bf16,
 * tests/bench/RESULTS.md) and f32 (the other side of [backend] gemm's per-shape choice,
 * plugins/backend-cpu/cpu_gemm_choice.c). alpha is oneDNN's output scale, beta its sum
 * post-op's scale.
 *
 * Threads: C is cut into one block per pool thread (split_rows below) and the pool runs
 * them, each one oneDNN primitive executed with OpenMP at one thread. oneDNN's own team would
 * be a second set of threads spinning after every product against the pool's sweeps (the
 * reason OpenBLAS runs single-threaded too, gemm.c). The calling thread's OpenMP thread
 * count is put back after each block, so other oneDNN users on that thread keep theirs.
 *
 * Cache: one entry per product shape (dims, transposes, leading dimensions, types, beta,
 * bias), each holding a primitive and its memory objects per block; made on the first call
 * of the shape on the calling thread, then only looked up (a short linear scan) and the
 * pointers set. Blocks of one call run on different threads but each block index has its
 * own primitive, memory objects, scratchpad and stream, so nothing is shared while they
 * run. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "gemm_dnnl.h"
#include "half.h"

#define FG_DNNL_MAX_BLOCKS 64

typedef struct dnnl_key {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc, ab_type, c_type, bias_type, blocks;
    float alpha, beta;
} dnnl_key;

typedef struct dnnl_block {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst;
    dnnl_memory_t scratch; /* the block's own scratchpad (NULL: none needed) */
    void *scratch_bytes;
} dnnl_block;

typedef struct dnnl_entry {
    dnnl_key key;
    int ok; /* 0: oneDNN has no (non-reference) primitive for it */
    int by_rows;
    int bounds[FG_DNNL_MAX_BLOCKS + 1];
    dnnl_block blk[FG_DNNL_MAX_BLOCKS];
} dnnl_entry;

struct fg_cpu_dnnl_gemm {
    dnnl_engine_t engine;
    dnnl_stream_t streams[FG_DNNL_MAX_BLOCKS]; /* per block index, made when first needed */
    dnnl_entry **entries;
    size_t count, cap;
};

fg_cpu_dnnl_gemm *fg_cpu_dnnl_gemm_create(void)
{
    fg_cpu_dnnl_gemm *g = calloc(1, sizeof *g);
    if (g && dnnl_engine_create(&g->engine, dnnl_cpu, 0) != dnnl_success) {
        free(g);
        g = NULL;
    }
    return g;
}

static void block_destroy(dnnl_block *b)
{
    dnnl_primitive_destroy(b->prim);
    dnnl_memory_destroy(b->src);
    dnnl_memory_destroy(b->wei);
    dnnl_memory_destroy(b->bias);
    dnnl_memory_destroy(b->dst);
    dnnl_memory_destroy(b->scratch);
    free(b->scratch_bytes);
    memset(b, 0, sizeof *b);
}

void fg_cpu_dnnl_gemm_destroy(fg_cpu_dnnl_gemm *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->count; i++) {
        for (int b = 0; b < FG_DNNL_MAX_BLOCKS; b++)
            block_destroy(&g->entries[i]->blk[b]);
        free(g->entries[i]);
    }
    free(g->entries);
    for (int b = 0; b < FG_DNNL_MAX_BLOCKS; b++)
        if (g->streams[b])
            dnnl_stream_destroy(g->streams[b]);
    dnnl_engine_destroy(g->engine);
    free(g);
}

static dnnl_data_type_t dnnl_type(int t)
{
    return t == FG_CPU_BF16 ? dnnl_bf16 : dnnl_f32;
}

static size_t type_size(int t)
{
    return t == FG_CPU_BF16 ? 2 : 4;
}

static int md_strided(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t row_stride,
                      int64_t col_stride, int type)
{
    dnnl_dims_t dims = {rows, cols}, strides = {row_stride, col_stride};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_type(type), strides) ==
           dnnl_success;
}

/* The primitive of rows x cols of C (one block) and its memory objects. */
static int block_make(fg_cpu_dnnl_gemm *g, const dnnl_key *key, int rows, int cols,
                      dnnl_block *out)
{
    dnnl_memory_desc_t a, b, c, bias;
    int k = key->k;
    int ok = md_strided(&a, rows, k, key->trans_a ? 1 : key->lda, key->trans_a ? key->lda : 1,
                        key->ab_type) &&
             md_strided(&b, k, cols, key->trans_b ? 1 : key->ldb, key->trans_b ? key->ldb : 1,
                        key->ab_type) &&
             md_strided(&c, rows, cols, key->ldc, 1, key->c_type) &&
             (!key->bias_type || md_strided(&bias, 1, cols, cols, 1, key->bias_type));
    dnnl_matmul_desc_t desc;
    ok = ok && dnnl_matmul_desc_init(&desc, &a, &b, key->bias_type ? &bias : NULL, &c) ==
                   dnnl_success;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    /* each block brings its own scratchpad: the library's is one per creating thread, and
     * the blocks of a call run at once on different threads */
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
             dnnl_success;
    if (ok && key->alpha != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &key->alpha) == dnnl_success;
    if (ok && key->beta != 0.0f) /* C = beta C + the product: the sum post-op, before the
                                  * one rounding */
        ok = dnnl_post_ops_create(&post) == dnnl_success &&
             dnnl_post_ops_append_sum(post, key->beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success;
    dnnl_primitive_desc_t pd = NULL;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, g->engine, NULL) == dnnl_success;
    const char *impl = NULL;
    /* a reference implementation would be far slower than the f32 emulation */
    ok = ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) ==
                   dnnl_success && impl && strncmp(impl, "ref", 3) != 0;
    ok = ok && dnnl_primitive_create(&out->prim, pd) == dnnl_success;
    const dnnl_memory_desc_t *scratch = ok ? dnnl_primitive_desc_query_md(
                                                 pd, dnnl_query_scratchpad_md, 0)
                                           : NULL;
    size_t scratch_size = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
    if (ok && scratch_size > 0) {
        out->scratch_bytes = aligned_alloc(64, (scratch_size + 63) / 64 * 64);
        ok = out->scratch_bytes &&
             dnnl_memory_create(&out->scratch, scratch, g->engine, out->scratch_bytes) ==
                 dnnl_success;
    }
    ok = ok && dnnl_memory_create(&out->src, &a, g->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&out->wei, &b, g->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&out->dst, &c, g->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (!key->bias_type ||
          dnnl_memory_create(&out->bias, &bias, g->engine, DNNL_MEMORY_NONE) == dnnl_success);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (post)
        dnnl_post_ops_destroy(post);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!ok)
        block_destroy(out);
    return ok;
}

/* Blocks of C's rows where there are enough of them, else of its columns: a block of whole
 * rows keeps C dense, which oneDNN runs with its brgemm kernels (the column blocks of the
 * MLP's products got its older gemm kernels, 2-7% slower on one core). */
static int split_rows(int m, int n)
{
    return m >= 2 * FG_CPU_GEMM_ALIGN || m > n;
}

static void entry_plan(dnnl_entry *e)
{
    const dnnl_key *k = &e->key;
    e->by_rows = split_rows(k->m, k->n);
    int dim = e->by_rows ? k->m : k->n;
    int blocks = k->blocks;
    int grain = (dim + blocks - 1) / blocks;
    grain = (grain + FG_CPU_GEMM_ALIGN - 1) / FG_CPU_GEMM_ALIGN * FG_CPU_GEMM_ALIGN;
    int at = 0;
    for (int b = 0; b < blocks; b++) {
        e->bounds[b] = at < dim ? at : dim;
        at += grain;
    }
    e->bounds[blocks] = dim;
}

static dnnl_entry *entry_make(fg_cpu_dnnl_gemm *g, const dnnl_key *key)
{
    if (g->count == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        dnnl_entry **grown = realloc(g->entries, cap * sizeof *grown);
        if (!grown)
            return NULL;
        g->entries = grown;
        g->cap = cap;
    }
    dnnl_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *key;
    entry_plan(e);
    e->ok = 1;
    for (int b = 0; e->ok && b < key->blocks; b++) {
        int span = e->bounds[b + 1] - e->bounds[b];
        if (span == 0)
            continue;
        if (!g->streams[b] &&
            dnnl_stream_create(&g->streams[b], g->engine, dnnl_stream_default_flags) !=
                dnnl_success)
            e->ok = 0;
        else
            e->ok = block_make(g, key, e->by_rows ? span : key->m, e->by_rows ? key->n : span,
                               &e->blk[b]);
    }
    g->entries[g->count++] = e;
    return e;
}

static dnnl_entry *entry_find(fg_cpu_dnnl_gemm *g, const dnnl_key *key)
{
    for (size_t i = 0; i < g->count; i++)
        if (memcmp(&g->entries[i]->key, key, sizeof *key) == 0)
            return g->entries[i];
    /* a matmul fixes its thread count when it is made (brgemm's nthr): one, or each block
     * would open an OpenMP team of the caller's default size on every call */
    int threads = omp_get_max_threads();
    if (threads != 1)
        omp_set_num_threads(1);
    dnnl_entry *e = entry_make(g, key);
    if (threads != 1)
        omp_set_num_threads(threads);
    return e;
}

typedef struct dnnl_call {
    fg_cpu_dnnl_gemm *g;
    const dnnl_entry *e;
    const fg_cpu_mm *p;
    int failed; /* some block's execution failed (each block only ever sets it) */
} dnnl_call;

static int block_run(dnnl_call *call, int b)
{
    const dnnl_entry *e = call->e;
    const fg_cpu_mm *p = call->p;
    const dnnl_block *blk = &e->blk[b];
    size_t lo = (size_t)e->bounds[b];
    if (e->bounds[b + 1] == e->bounds[b])
        return 1;
    const char *a = p->a, *bm = p->b, *bias = p->bias;
    char *c = p->c;
    size_t cs = type_size(p->c_type), abs = type_size(p->ab_type);
    if (e->by_rows) {
        a += abs * (p->trans_a ? lo : lo * (size_t)p->lda);
        c += cs * lo * (size_t)p->ldc;
    } else {
        bm += abs * (p->trans_b ? lo * (size_t)p->ldb : lo);
        if (bias)
            bias += type_size(p->bias_type) * lo;
        c += cs * lo;
    }
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, blk->src}, {DNNL_ARG_WEIGHTS, blk->wei},
                               {DNNL_ARG_DST, blk->dst}};
    int nargs = 3;
    if (bias)
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, blk->bias};
    if (blk->scratch)
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, blk->scratch};
    int ok = dnnl_memory_set_data_handle(blk->src, (void *)a) == dnnl_success &&
             dnnl_memory_set_data_handle(blk->wei, (void *)bm) == dnnl_success &&
             dnnl_memory_set_data_handle(blk->dst, c) == dnnl_success &&
             (!bias || dnnl_memory_set_data_handle(blk->bias, (void *)bias) == dnnl_success);
    int threads = omp_get_max_threads();
    if (threads != 1)
        omp_set_num_threads(1);
    ok = ok && dnnl_primitive_execute(blk->prim, call->g->streams[b], nargs, args) ==
                   dnnl_success;
    ok = ok && dnnl_stream_wait(call->g->streams[b]) == dnnl_success;
    if (threads != 1)
        omp_set_num_threads(threads);
    return ok;
}

static void blocks_run(void *ctx, size_t lo, size_t hi)
{
    dnnl_call *call = ctx;
    for (size_t b = lo; b < hi; b++)
        if (!block_run(call, (int)b))
            call->failed = 1;
}

int fg_cpu_dnnl_gemm_run(fg_cpu_dnnl_gemm *g, fg_cpu_pool *pool, const fg_cpu_mm *p)
{
    if (p->m == 0 || p->n == 0)
        return 0;
    if (!g || p->k == 0)
        return FG_CPU_DNNL_NONE;
    double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
    int dim = split_rows(p->m, p->n) ? p->m : p->n;
    int threads = fg_cpu_pool_threads(pool);
    int blocks = threads < 2 || flops < FG_CPU_GEMM_SPLIT_FLOPS || dim < 2 * FG_CPU_GEMM_ALIGN
                     ? 1
                     : threads < FG_DNNL_MAX_BLOCKS ? threads : FG_DNNL_MAX_BLOCKS;
    dnnl_key key = {p->trans_a, p->trans_b, p->m, p->n, p->k, p->lda, p->ldb, p->ldc,
                    p->ab_type, p->c_type, p->bias ? p->bias_type : 0, blocks, p->alpha,
                    p->beta};
    dnnl_entry *e = entry_find(g, &key);
    if (!e || !e->ok)
        return FG_CPU_DNNL_NONE;
    dnnl_call call = {g, e, p, 0};
    if (blocks == 1)
        blocks_run(&call, 0, 1);
    else
        fg_cpu_parallel_for(pool, (size_t)blocks, 1, 1, blocks_run, &call);
    return call.failed ? FG_CPU_DNNL_FAILED : 0;
}
