/* A small persistent thread pool with one operation: a parallel-for over contiguous
 * pieces. Workers spin for a few microseconds after a job (back-to-back ops then start
 * without a futex wake-up) and then sleep on a condition variable, so they do not steal
 * cores from OpenBLAS's own threads during a gemm. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_kernels.h"

/* About 20 us of polling on current x86 cores before a worker goes to sleep. */
#define FG_CPU_SPIN_ITERATIONS 4000

struct fg_cpu_pool {
    int threads; /* including the calling thread */
    pthread_t *workers; /* threads - 1 */
    int started;

    pthread_mutex_t lock; /* guards sleeping and the condition variable */
    pthread_cond_t wake;
    int sleeping;

    atomic_flag busy; /* one parallel_for at a time; others run inline */

    /* the current job, published by a release increment of generation */
    fg_cpu_range_fn fn;
    void *ctx;
    size_t n, align;
    int parts;
    atomic_uint_fast64_t generation;
    atomic_int pending; /* workers yet to finish the current generation */
    atomic_int stop;
};

typedef struct fg_cpu_worker_arg {
    fg_cpu_pool *pool;
    int index; /* 1 .. threads-1; the caller is piece 0 */
} fg_cpu_worker_arg;

static inline void fg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Piece `part` of `parts` over [0, n), boundaries rounded up to multiples of align. */
static void fg_cpu_piece(size_t n, size_t align, int parts, int part, size_t *begin,
                         size_t *end)
{
    size_t per = (n + (size_t)parts - 1) / (size_t)parts;
    per = (per + align - 1) / align * align;
    size_t b = per * (size_t)part, e = b + per;
    *begin = b < n ? b : n;
    *end = e < n ? e : n;
}

static void fg_cpu_run_piece(fg_cpu_pool *pool, int part)
{
    if (part >= pool->parts)
        return;
    size_t b, e;
    fg_cpu_piece(pool->n, pool->align, pool->parts, part, &b, &e);
    if (b < e)
        pool->fn(pool->ctx, b, e);
}

static uint_fast64_t fg_cpu_wait_generation(fg_cpu_pool *pool, uint_fast64_t seen)
{
    for (int i = 0; i < FG_CPU_SPIN_ITERATIONS; i++) {
        uint_fast64_t g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen)
            return g;
        fg_cpu_relax();
    }
    pthread_mutex_lock(&pool->lock);
    uint_fast64_t g;
    while ((g = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
        pool->sleeping++;
        pthread_cond_wait(&pool->wake, &pool->lock);
        pool->sleeping--;
    }
    pthread_mutex_unlock(&pool->lock);
    return g;
}

static void *fg_cpu_worker_main(void *p)
{
    fg_cpu_worker_arg *arg = p;
    fg_cpu_pool *pool = arg->pool;
    int index = arg->index;
    free(arg);
    uint_fast64_t seen = 0;
    for (;;) {
        seen = fg_cpu_wait_generation(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            return NULL;
        fg_cpu_run_piece(pool, index);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
}

static void fg_cpu_publish(fg_cpu_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    if (pool->sleeping)
        pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
}

static void fg_cpu_pool_stop(fg_cpu_pool *pool)
{
    atomic_store_explicit(&pool->pending, pool->started, memory_order_relaxed);
    atomic_store_explicit(&pool->stop, 1, memory_order_release);
    fg_cpu_publish(pool);
    for (int i = 0; i < pool->started; i++)
        pthread_join(pool->workers[i], NULL);
    pool->started = 0;
}

int fg_cpu_pool_create(int threads, fg_cpu_pool **out)
{
    *out = NULL;
    if (threads < 1)
        threads = 1;
    fg_cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return 12; /* ENOMEM */
    pool->threads = threads;
    atomic_flag_clear(&pool->busy);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->stop, 0);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    int rc = 0;
    if (threads > 1) {
        pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
        if (!pool->workers)
            rc = 12;
        for (int i = 1; rc == 0 && i < threads; i++) {
            fg_cpu_worker_arg *arg = malloc(sizeof *arg);
            if (!arg) {
                rc = 12;
                break;
            }
            arg->pool = pool;
            arg->index = i;
            rc = pthread_create(&pool->workers[i - 1], NULL, fg_cpu_worker_main, arg);
            if (rc != 0) {
                free(arg);
                break;
            }
            pool->started++;
        }
    }
    if (rc != 0) {
        fg_cpu_pool_destroy(pool);
        return rc;
    }
    *out = pool;
    return 0;
}

void fg_cpu_pool_destroy(fg_cpu_pool *pool)
{
    if (!pool)
        return;
    if (pool->started)
        fg_cpu_pool_stop(pool);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}

int fg_cpu_pool_threads(const fg_cpu_pool *pool)
{
    return pool ? pool->threads : 1;
}

void fg_cpu_parallel_for(fg_cpu_pool *pool, size_t n, size_t grain, size_t align,
                         fg_cpu_range_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (grain < 1)
        grain = 1;
    if (align < 1)
        align = 1;
    size_t parts = n / grain;
    if (!pool || pool->threads < 2 || parts < 2) {
        fn(ctx, 0, n);
        return;
    }
    if (atomic_flag_test_and_set_explicit(&pool->busy, memory_order_acquire)) {
        fn(ctx, 0, n); /* another host thread drives the pool: same result, inline */
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->align = align;
    pool->parts = parts < (size_t)pool->threads ? (int)parts : pool->threads;
    atomic_store_explicit(&pool->pending, pool->started, memory_order_relaxed);
    fg_cpu_publish(pool);
    fg_cpu_run_piece(pool, 0);
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0)
        fg_cpu_relax();
    atomic_flag_clear_explicit(&pool->busy, memory_order_release);
}
