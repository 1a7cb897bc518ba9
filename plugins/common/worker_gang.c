/* The worker threads of the one-process, many-device strategies (worker_gang.h). */
#include "worker_gang.h"

#include <stdlib.h>

int fg_plugin_gang_init(fg_plugin_gang *g)
{
    if (pthread_mutex_init(&g->lock, NULL) != 0)
        return 1;
    if (pthread_cond_init(&g->go, NULL) != 0) {
        pthread_mutex_destroy(&g->lock);
        return 2;
    }
    if (pthread_cond_init(&g->done, NULL) != 0) {
        pthread_cond_destroy(&g->go);
        pthread_mutex_destroy(&g->lock);
        return 2;
    }
    if (pthread_cond_init(&g->wake, NULL) != 0) {
        pthread_cond_destroy(&g->done);
        pthread_cond_destroy(&g->go);
        pthread_mutex_destroy(&g->lock);
        return 2;
    }
    g->ready = 1;
    return 0;
}

static void *worker_main(void *p)
{
    fg_plugin_gang_thread *t = p;
    fg_plugin_gang *g = t->gang;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&g->lock);
        while (g->generation == seen) pthread_cond_wait(&g->go, &g->lock);
        seen = g->generation;
        int job = g->job;
        pthread_mutex_unlock(&g->lock);
        if (job == g->stop_job) return NULL;
        g->part(g->ctx, t->worker, job);
        pthread_mutex_lock(&g->lock);
        if (--g->running == 0) pthread_cond_signal(&g->done);
        pthread_mutex_unlock(&g->lock);
    }
}

fg_status fg_plugin_gang_start(fg_plugin_gang *g, int count, fg_plugin_gang_part part,
                               void *ctx, int stop_job, const char *who, fg_error *err)
{
    g->part = part;
    g->ctx = ctx;
    g->stop_job = stop_job;
    g->threads = calloc((size_t)(count > 0 ? count : 1), sizeof *g->threads);
    if (!g->threads)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", who);
    g->count = count;
    for (int i = 1; i < count; i++) {
        fg_plugin_gang_thread *t = &g->threads[i];
        t->gang = g;
        t->worker = i;
        int rc = pthread_create(&t->thread, NULL, worker_main, t);
        if (rc != 0)
            return fg_error_set(err, FG_INTERNAL, "%s: cannot start the thread of device %d "
                                "(pthread_create: error %d)", who, i, rc);
        t->started = 1;
    }
    return FG_OK;
}

void fg_plugin_gang_publish_locked(fg_plugin_gang *g, int job)
{
    g->job = job;
    g->running = g->count - 1;
    g->generation++;
    pthread_cond_broadcast(&g->go);
}

void fg_plugin_gang_wait(fg_plugin_gang *g)
{
    pthread_mutex_lock(&g->lock);
    while (g->running > 0) pthread_cond_wait(&g->done, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void fg_plugin_gang_stop(fg_plugin_gang *g)
{
    if (!g->ready) return;
    pthread_mutex_lock(&g->lock);
    fg_plugin_gang_publish_locked(g, g->stop_job);
    pthread_mutex_unlock(&g->lock);
    for (int i = 1; g->threads && i < g->count; i++)
        if (g->threads[i].started) {
            pthread_join(g->threads[i].thread, NULL);
            g->threads[i].started = 0;
        }
    free(g->threads);
    g->threads = NULL;
    g->count = 0;
    pthread_cond_destroy(&g->wake);
    pthread_cond_destroy(&g->done);
    pthread_cond_destroy(&g->go);
    pthread_mutex_destroy(&g->lock);
    g->ready = 0;
}
