/* A small persistent thread pool with one operation: a parallel-for over contiguous
 * chunks that the calling thread and the workers claim from one atomic ticket.
 *
 * Why a ticket and not one fixed piece per thread: on a busy machine a worker may not be
 * scheduled for milliseconds; with claimed chunks the caller simply does the work itself
 * and only ever waits for chunks a running worker has actually started.
 *
 * The ticket packs (generation:32 | next chunk:16 | chunk count:16). A worker claims a
 * chunk with a compare-and-swap on the whole word, so it can never claim a chunk of a job
 * other than the one whose generation it read; while it holds an unfinished chunk the job
 * cannot complete, so the job's fields are stable for it to read.
 *
 * Workers spin for a few microseconds after a job (back-to-back ops start without a futex
 * wake-up), then sleep on a condition variable: an idle pool takes no core from the loader,
 * the host or other processes. The pool is the only set of compute threads: gemms run
 * their blocks on it with OpenBLAS at one thread (gemm.c). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_kernels.h"

/* About 20 us of polling before a worker sleeps (a -D may set it: cpu_kernels.h). */
#ifndef FG_CPU_SPIN_ITERATIONS
#define FG_CPU_SPIN_ITERATIONS 2000
#endif
/* Chunks per thread: enough to balance, few enough to keep claims cheap. */
#define FG_CPU_CHUNKS_PER_THREAD 4
#define FG_CPU_MAX_JOB_CHUNKS 4096

struct fg_cpu_pool {
    int threads;        /* including the calling thread */
    size_t stream_grain; /* fg_cpu_stream_grain: FG_CPU_STREAM_GRAIN unless set */
    pthread_t *workers; /* threads - 1 */
    int started;

    pthread_mutex_t lock; /* guards sleeping, caller_waiting and both condition variables */
    pthread_cond_t wake;
    int sleeping;
    pthread_cond_t finished; /* the caller sleeps on it for a block a worker still runs */
    int caller_waiting;

    atomic_flag busy; /* one parallel_for at a time; other host threads run inline */

    /* the current job; written only while no chunk of the previous one is outstanding */
    fg_cpu_range_fn fn;
    void *ctx;
    size_t n, chunk;
    uint32_t generation;

    _Atomic uint64_t ticket;
    atomic_uint done; /* chunks finished in the current generation */
    atomic_int stop;
};

static inline void fg_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline uint32_t fg_ticket_gen(uint64_t t) { return (uint32_t)(t >> 32); }
static inline uint32_t fg_ticket_next(uint64_t t) { return (uint32_t)(t >> 16) & 0xFFFFu; }
static inline uint32_t fg_ticket_chunks(uint64_t t) { return (uint32_t)t & 0xFFFFu; }

/* Claims and runs chunks of generation gen until none is left. */
static void fg_cpu_drain(fg_cpu_pool *pool, uint32_t gen)
{
    uint64_t t = atomic_load_explicit(&pool->ticket, memory_order_acquire);
    for (;;) {
        if (fg_ticket_gen(t) != gen || fg_ticket_next(t) >= fg_ticket_chunks(t))
            return;
        if (!atomic_compare_exchange_weak_explicit(&pool->ticket, &t, t + (1u << 16),
                                                   memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        size_t b = (size_t)fg_ticket_next(t) * pool->chunk;
        size_t e = b + pool->chunk < pool->n ? b + pool->chunk : pool->n;
        pool->fn(pool->ctx, b, e);
        uint32_t done = atomic_fetch_add_explicit(&pool->done, 1, memory_order_acq_rel) + 1;
        if (done == fg_ticket_chunks(t)) { /* the job's last chunk: wake a sleeping caller */
            pthread_mutex_lock(&pool->lock);
            if (pool->caller_waiting)
                pthread_cond_signal(&pool->finished);
            pthread_mutex_unlock(&pool->lock);
        }
        t = atomic_load_explicit(&pool->ticket, memory_order_acquire);
    }
}

static uint32_t fg_cpu_wait_generation(fg_cpu_pool *pool, uint32_t seen)
{
    for (int i = 0; i < FG_CPU_SPIN_ITERATIONS; i++) {
        uint32_t g = fg_ticket_gen(atomic_load_explicit(&pool->ticket, memory_order_acquire));
        if (g != seen)
            return g;
        fg_cpu_relax();
    }
    pthread_mutex_lock(&pool->lock);
    uint32_t g;
    while ((g = fg_ticket_gen(atomic_load_explicit(&pool->ticket, memory_order_acquire))) ==
           seen) {
        pool->sleeping++;
        pthread_cond_wait(&pool->wake, &pool->lock);
        pool->sleeping--;
    }
    pthread_mutex_unlock(&pool->lock);
    return g;
}

static void *fg_cpu_worker_main(void *p)
{
    fg_cpu_pool *pool = p;
    uint32_t seen = 0;
    for (;;) {
        seen = fg_cpu_wait_generation(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            return NULL;
        fg_cpu_drain(pool, seen);
    }
}

/* Starts generation gen with `chunks` chunks and wakes sleeping workers. */
static void fg_cpu_publish(fg_cpu_pool *pool, uint32_t gen, uint32_t chunks)
{
    pthread_mutex_lock(&pool->lock);
    atomic_store_explicit(&pool->ticket, ((uint64_t)gen << 32) | chunks, memory_order_release);
    if (pool->sleeping)
        pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
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
    pool->stream_grain = FG_CPU_STREAM_GRAIN;
    atomic_flag_clear(&pool->busy);
    atomic_init(&pool->ticket, 0);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->stop, 0);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->finished, NULL);
    int rc = 0;
    if (threads > 1) {
        pool->workers = calloc((size_t)threads - 1, sizeof *pool->workers);
        if (!pool->workers)
            rc = 12;
        for (int i = 1; rc == 0 && i < threads; i++) {
            rc = pthread_create(&pool->workers[i - 1], NULL, fg_cpu_worker_main, pool);
            if (rc == 0)
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
    if (pool->started) {
        atomic_store_explicit(&pool->stop, 1, memory_order_release);
        fg_cpu_publish(pool, ++pool->generation, 0);
        for (int i = 0; i < pool->started; i++)
            pthread_join(pool->workers[i], NULL);
    }
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->finished);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}

int fg_cpu_pool_threads(const fg_cpu_pool *pool)
{
    return pool ? pool->threads : 1;
}

size_t fg_cpu_stream_grain(const fg_cpu_pool *pool)
{
    return pool ? pool->stream_grain : FG_CPU_STREAM_GRAIN;
}

void fg_cpu_pool_set_stream_grain(fg_cpu_pool *pool, size_t grain)
{
    if (pool && grain > 0)
        pool->stream_grain = grain;
}

void fg_cpu_parallel_for(fg_cpu_pool *pool, size_t n, size_t grain, size_t align,
                         fg_cpu_range_fn fn, void *ctx)
{
    if (n == 0)
        return;
    grain = grain ? grain : 1;
    align = align ? align : 1;
    size_t chunks = n / grain;
    if (!pool || pool->started == 0 || chunks < 2) {
        fn(ctx, 0, n);
        return;
    }
    if (atomic_flag_test_and_set_explicit(&pool->busy, memory_order_acquire)) {
        fn(ctx, 0, n); /* another host thread drives the pool: same result, inline */
        return;
    }
    size_t most = (size_t)pool->threads * FG_CPU_CHUNKS_PER_THREAD;
    if (chunks > most)
        chunks = most;
    if (chunks > FG_CPU_MAX_JOB_CHUNKS)
        chunks = FG_CPU_MAX_JOB_CHUNKS;
    size_t chunk = (n + chunks - 1) / chunks;
    chunk = (chunk + align - 1) / align * align;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->chunk = chunk;
    uint32_t count = (uint32_t)((n + chunk - 1) / chunk);
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    uint32_t gen = ++pool->generation;
    fg_cpu_publish(pool, gen, count);
    fg_cpu_drain(pool, gen);
    /* only chunks a running worker claimed can be outstanding now: poll briefly, then
     * sleep until the worker that finishes the last one signals (no sched_yield spinning,
     * which on a loaded machine takes turns from the very worker being waited for) */
    for (int i = 0; i < FG_CPU_SPIN_ITERATIONS &&
                    atomic_load_explicit(&pool->done, memory_order_acquire) < count;
         i++)
        fg_cpu_relax();
    if (atomic_load_explicit(&pool->done, memory_order_acquire) < count) {
        pthread_mutex_lock(&pool->lock);
        pool->caller_waiting = 1;
        while (atomic_load_explicit(&pool->done, memory_order_acquire) < count)
            pthread_cond_wait(&pool->finished, &pool->lock);
        pool->caller_waiting = 0;
        pthread_mutex_unlock(&pool->lock);
    }
    atomic_flag_clear_explicit(&pool->busy, memory_order_release);
}
