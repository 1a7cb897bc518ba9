/* strategy.model-parallel: the GPipe schedule. Each stage's thread runs the forwards of
 * every micro-batch in order, each as soon as its input has arrived, and hands the output
 * to the next stage; then the backwards, last micro-batch first, each as soon as its
 * output gradient has arrived, handing the input gradient back. A copy is waited for
 * (queue_sync) before the receiver is told, so the receiver may use it on its own queue. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <time.h>

#include "mp.h"

double mp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Cuts count samples into at most `most` parts of sizes differing by at most one, at
 * least 2 samples each unless there are fewer (batch norm refuses one sample per
 * channel); returns the parts. */
static int cut(int count, int most, int *sizes)
{
    int used = count / 2;
    if (used > most) used = most;
    if (used < 1) used = 1;
    for (int i = 0; i < most; i++) sizes[i] = i < used ? count / used + (i < count % used) : 0;
    return used;
}

/* The batch into a shard per pipeline, each shard into micro-batches. */
void mp_split(mp *d, const fg_batch *b, float grad_scale)
{
    int shard[MP_MAX_STAGES], at = 0;
    cut(b->count, d->replicas, shard);
    for (int r = 0; r < d->replicas; r++) {
        int *rows = d->rows + (size_t)r * (size_t)d->chunks;
        d->used[r] = shard[r] ? cut(shard[r], d->chunks, rows) : 0;
        for (int m = 0; m < d->used[r]; m++) {
            d->at[r * d->chunks + m] = at;
            at += rows[m];
        }
    }
    d->batch = b;
    d->grad_scale = grad_scale;
}

/* Waits until *counter >= want; 0 when another stage failed meanwhile. */
static int wait_for(mp *d, const int *counter, int want)
{
    pthread_mutex_lock(&d->gang.lock);
    while (*counter < want && !d->failed) pthread_cond_wait(&d->gang.wake, &d->gang.lock);
    int ok = !d->failed;
    pthread_mutex_unlock(&d->gang.lock);
    return ok;
}

static void post(mp *d, int *counter)
{
    pthread_mutex_lock(&d->gang.lock);
    (*counter)++;
    pthread_cond_broadcast(&d->gang.wake);
    pthread_mutex_unlock(&d->gang.lock);
}

static fg_status stopped(mp_stage *g, fg_error *err)
{
    return fg_error_set(err, FG_INTERNAL, "stage %d stopped: another stage failed", g->index);
}

/* Copies n floats of this stage's device memory to the neighbour's and tells it. */
static fg_status hand_over(mp_stage *g, mp_stage *to, float *dst, const float *src, size_t n,
                           int *counter, fg_error *err)
{
    mp *d = g->d;
    fg_status st = d->be->copy(d->be_state, g->queue, dst, to->device, src, g->device,
                               n * sizeof(float), err);
    if (st == FG_OK) st = d->be->queue_sync(d->be_state, g->queue, err);
    if (st == FG_OK) post(d, counter);
    return st;
}

static fg_status forwards(mp_stage *g, int training, fg_error *err)
{
    mp *d = g->d;
    const fg_train_services *svc = d->svc;
    int last = g->index + 1 == d->stages;
    mp_stage *next = last ? NULL : mp_stage_at(d, g->replica, g->index + 1);
    size_t micro = (size_t)d->micro;
    const int *at = d->at + g->replica * d->chunks, *rows = d->rows + g->replica * d->chunks;
    for (int m = 0; m < d->used[g->replica]; m++) {
        if (g->index > 0 && !wait_for(d, &g->fwd_ready, m + 1)) return stopped(g, err);
        fg_batch b = fg_batch_slice(d->batch, at[m], rows[m]);
        const float *x = g->recv_x ? g->recv_x + (size_t)m * micro * (size_t)g->in_elems : NULL;
        double t0 = mp_now();
        fg_status st = svc->forward(svc->ctx, g->stage, m, &b, at[m], x, training, err);
        g->busy_s += mp_now() - t0;
        if (st == FG_OK && next)
            st = hand_over(g, next, next->recv_x + (size_t)m * micro * (size_t)next->in_elems,
                           svc->output(svc->ctx, g->stage, m),
                           (size_t)b.count * (size_t)g->out_elems, &next->fwd_ready, err);
        if (st != FG_OK) return st;
    }
    return FG_OK;
}

static fg_status backwards(mp_stage *g, fg_error *err)
{
    mp *d = g->d;
    const fg_train_services *svc = d->svc;
    mp_stage *prev = g->index > 0 ? mp_stage_at(d, g->replica, g->index - 1) : NULL;
    int last = g->index + 1 == d->stages, used = d->used[g->replica];
    size_t micro = (size_t)d->micro;
    const int *rows = d->rows + g->replica * d->chunks;
    for (int k = 0; k < used; k++) {
        int m = used - 1 - k;
        if (!last && !wait_for(d, &g->bwd_ready, k + 1)) return stopped(g, err);
        const float *dy = last ? NULL : g->recv_dy + (size_t)m * micro * (size_t)g->out_elems;
        /* the share of the whole batch (every pipeline's): the sums of pipelines add up */
        float scale = d->grad_scale * (float)rows[m] / (float)d->batch->count;
        double t0 = mp_now();
        fg_status st = svc->backward(svc->ctx, g->stage, m, dy, scale, g->has_grads, err);
        g->busy_s += mp_now() - t0;
        if (st == FG_OK) g->has_grads = 1;
        if (st == FG_OK && prev)
            st = hand_over(g, prev, prev->recv_dy + (size_t)m * micro * (size_t)prev->out_elems,
                           svc->input_grad(svc->ctx, g->stage, m),
                           (size_t)rows[m] * (size_t)g->in_elems, &prev->bwd_ready, err);
        if (st != FG_OK) return st;
    }
    return FG_OK;
}

/* Pipeline 0's stage adds the same stage's gradients of every other pipeline that has
 * some this step (a copy to its device, an axpy). */
static fg_status reduce(mp_stage *g, fg_error *err)
{
    mp *d = g->d;
    fg_status st = FG_OK;
    size_t n = (size_t)g->param_count;
    for (int r = 1; r < d->replicas && st == FG_OK && n; r++) {
        const mp_stage *o = mp_stage_at(d, r, g->index);
        if (!o->has_grads) continue;
        st = d->be->copy(d->be_state, g->queue, g->recv_grad, g->device, o->grads, o->device,
                         n * sizeof(float), err);
        if (st == FG_OK)
            st = d->be->axpy(d->be_state, g->queue, FG_F32, FG_F32, 1.0f, g->recv_grad, g->grads,
                             n, err);
    }
    return st == FG_OK ? d->be->queue_sync(d->be_state, g->queue, err) : st;
}

/* Another pipeline's stage copies pipeline 0's parameters and buffers of the stage. */
static fg_status pull(mp_stage *g, fg_error *err)
{
    mp *d = g->d;
    const mp_stage *o = mp_stage_at(d, 0, g->index);
    fg_status st = FG_OK;
    if (g->param_count)
        st = d->be->copy(d->be_state, g->queue, g->params, g->device, o->params, o->device,
                         (size_t)g->param_count * sizeof(float), err);
    if (st == FG_OK && g->buffer_count)
        st = d->be->copy(d->be_state, g->queue, g->buffers, g->device, o->buffers, o->device,
                         (size_t)g->buffer_count * sizeof(float), err);
    return st == FG_OK ? d->be->queue_sync(d->be_state, g->queue, err) : st;
}

/* Pipeline 0's stage steps its optimizer. With other pipelines it then waits for its
 * queue: their pull copies its parameters and buffers (the fp8 amax histories reduced into
 * them just before) on their own queues, which do not wait for this one. */
static fg_status step(mp_stage *g, fg_error *err)
{
    mp *d = g->d;
    fg_status st = d->svc->optimizer_step(d->svc->ctx, g->stage, &d->step, g->param_offset,
                                          g->param_count, NULL, NULL, err);
    return st == FG_OK && d->replicas > 1 ? d->be->queue_sync(d->be_state, g->queue, err) : st;
}

static fg_status run_part(mp_stage *g, mp_job job, fg_error *err)
{
    int lead = g->replica == 0; /* pipeline 0 holds the model the optimizer updates */
    switch (job) {
    case MP_JOB_TRAIN: {
        fg_status st = forwards(g, 1, err);
        if (g->index + 1 == g->d->stages && g->replica == 0)
            g->d->fwd_done_at = mp_now(); /* read after the join */
        return st == FG_OK ? backwards(g, err) : st;
    }
    case MP_JOB_EVAL: return forwards(g, 0, err);
    case MP_JOB_STEP: return lead ? step(g, err) : FG_OK;
    case MP_JOB_REDUCE: return lead ? reduce(g, err) : FG_OK;
    case MP_JOB_PULL: return lead ? FG_OK : pull(g, err);
    case MP_JOB_STOP: return FG_OK;
    }
    return FG_OK;
}

/* A stage's part; a failure wakes every stage waiting on it. */
static void run_and_record(mp_stage *g, mp_job job)
{
    mp *d = g->d;
    memset(&g->err, 0, sizeof g->err);
    g->st = run_part(g, job, &g->err);
    if (g->st == FG_OK) return;
    pthread_mutex_lock(&d->gang.lock);
    if (!d->failed) d->failed = (int)(g - d->s) + 1; /* the first to fail, plus one */
    pthread_cond_broadcast(&d->gang.wake);
    pthread_mutex_unlock(&d->gang.lock);
}

/* A worker thread's part (worker_gang.h). */
static void worker_part(void *ctx, int worker, int job)
{
    run_and_record(&((mp *)ctx)->s[worker], (mp_job)job);
}

fg_status mp_workers_start(mp *d, fg_error *err)
{
    if (fg_plugin_gang_init(&d->gang) != 0)
        return fg_error_set(err, FG_INTERNAL, "strategy.model-parallel: cannot create the "
                            "stage threads' lock and conditions");
    return fg_plugin_gang_start(&d->gang, d->stages * d->replicas, worker_part, d,
                                MP_JOB_STOP, "strategy.model-parallel", err);
}

void mp_workers_stop(mp *d)
{
    fg_plugin_gang_stop(&d->gang);
}

fg_status mp_run(mp *d, mp_job job, fg_error *err)
{
    pthread_mutex_lock(&d->gang.lock);
    int all = d->stages * d->replicas;
    for (int s = 0; s < all; s++) d->s[s].fwd_ready = d->s[s].bwd_ready = 0;
    d->failed = 0;
    fg_plugin_gang_publish_locked(&d->gang, job);
    pthread_mutex_unlock(&d->gang.lock);

    run_and_record(&d->s[0], job);

    fg_plugin_gang_wait(&d->gang);
    pthread_mutex_lock(&d->gang.lock);
    int failed = d->failed;
    pthread_mutex_unlock(&d->gang.lock);
    if (!failed) return FG_OK;
    const mp_stage *g = &d->s[failed - 1];
    return fg_error_set(err, g->st, "strategy.model-parallel: stage %d (device %d): %s",
                        g->index, g->device, g->err.message);
}
