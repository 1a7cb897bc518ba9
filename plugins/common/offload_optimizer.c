/* ZeRO-Offload's host side: pinned master and state, bucketed copies, the host update. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf */
#include "offload_optimizer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config_value.h"
#include "cpu_kernels.h"
#include "half.h"
#include "host_optimizer.h"
#include "plugin_created.h"

struct fg_offload {
    fg_offload_spec spec;
    fg_host_optimizer opt;
    fg_cpu_pool *pool;
    void *queue;
    size_t psz, gsz;
    float *master;      /* (count) f32 */
    float *slot[2];     /* (count) f32 each */
    int slots;
    void *grads;        /* (count) of gdt: the device's gradients, copied */
    float *grads_f32;   /* (count): grads widened; NULL when gdt is f32 */
    void *work;         /* (count) of pdt: the master rounded; NULL when pdt is f32 */
    int64_t buckets;
    void **events;      /* (buckets); NULL: a backend whose copies complete on return */
    int pinned;         /* memory from the backend's host_alloc (else aligned_alloc) */
    double update_s, wait_s;
    int64_t steps;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int fg_offload_wanted(const fg_host *host)
{
    const char *v = NULL;
    return host->get_string(host, "offload_optimizer", &v) == FG_OK && v &&
           strcmp(v, "host") == 0;
}

fg_status fg_offload_check_grad_dtype(const fg_host *host, const char *who, uint32_t gdt,
                                      fg_error *err)
{
    if (gdt == FG_F32) return FG_OK;
    const char *asked = NULL;
    if (fg_plugin_config_value(host, "precision", "grad_dtype", &asked) && asked &&
        strcmp(asked, "fp32") == 0)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: offload_optimizer = host under a "
                            "mixed mode keeps the f32 master on the host and %s gradients "
                            "on the device; [precision] grad_dtype = fp32 asks for f32 "
                            "ones: set grad_dtype = half or remove the key", who,
                            fg_dtype_name((fg_dtype)gdt));
    host->log(host, FG_LOG_INFO, "offload_optimizer = host: %s gradients on the device (as "
              "[precision] grad_dtype = half), widened to f32 on the host",
              fg_dtype_name((fg_dtype)gdt));
    return FG_OK;
}

static fg_status host_mem(fg_offload *o, size_t bytes, void **p, const char *what,
                          fg_error *err)
{
    const fg_offload_spec *s = &o->spec;
    bytes = bytes ? bytes : 64;
    fg_error e = {0};
    if (o->pinned && s->be->host_alloc(s->be_state, bytes, p, &e) == FG_OK) {
        memset(*p, 0, bytes);
        return FG_OK;
    }
    *p = o->pinned ? NULL : s->host->aligned_alloc(s->host, 64, bytes);
    if (!*p)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: offload_optimizer = host: allocating "
                            "the %s (%zu bytes) in %s host memory: %s", s->who, what, bytes,
                            o->pinned ? "pinned" : "plain", o->pinned ? e.message : "out of memory");
    memset(*p, 0, bytes);
    return FG_OK;
}

static void host_free(fg_offload *o, void *p)
{
    if (!p) return;
    if (o->pinned) o->spec.be->host_free(o->spec.be_state, p);
    else o->spec.host->aligned_free(o->spec.host, p);
}

static int has_events(const fg_backend_vtable *be)
{
    return FG_HAS_FIELD(be, fg_backend_vtable, event_sync) && be->event_create &&
           be->event_record && be->event_sync && be->event_destroy;
}

static fg_status alloc_all(fg_offload *o, fg_error *err)
{
    const fg_offload_spec *s = &o->spec;
    size_t n = (size_t)s->count;
    fg_status st = host_mem(o, n * sizeof(float), (void **)&o->master, "f32 master", err);
    for (int i = 0; st == FG_OK && i < o->slots; i++)
        st = host_mem(o, n * sizeof(float), (void **)&o->slot[i], "optimizer state", err);
    if (st == FG_OK) st = host_mem(o, n * o->gsz, &o->grads, "gradient copy", err);
    if (st == FG_OK && s->gdt != FG_F32)
        st = host_mem(o, n * sizeof(float), (void **)&o->grads_f32, "f32 gradients", err);
    if (st == FG_OK && s->pdt != FG_F32)
        st = host_mem(o, n * o->psz, &o->work, "working copy", err);
    o->buckets = (s->count + FG_OFFLOAD_BUCKET - 1) / FG_OFFLOAD_BUCKET;
    if (st != FG_OK || !has_events(s->be) || !o->buckets) return st;
    o->events = calloc((size_t)o->buckets, sizeof *o->events);
    if (!o->events) return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", s->who);
    for (int64_t b = 0; st == FG_OK && b < o->buckets; b++)
        st = s->be->event_create(s->be_state, s->device, &o->events[b], err);
    return st;
}

/* The master starts as the stage's initial parameters (f32), through a device buffer of at
 * most 1M floats, freed after (so little of a tight memory_limit_mb is taken at setup). */
static fg_status read_master(fg_offload *o, fg_error *err)
{
    const fg_offload_spec *s = &o->spec;
    if (!s->count) return FG_OK;
    int64_t cap = s->count < (1 << 20) ? s->count : (1 << 20);
    void *tmp = NULL;
    fg_status st = s->be->alloc(s->be_state, s->device, (size_t)cap * sizeof(float), &tmp, err);
    for (int64_t off = 0; st == FG_OK && off < s->count; off += cap) {
        int64_t n = s->count - off < cap ? s->count - off : cap;
        st = s->svc->read_init_params(s->svc->ctx, s->stage, s->lo + off, n, tmp, err);
        if (st == FG_OK)
            st = s->be->copy(s->be_state, o->queue, o->master + off, -1, tmp, s->device,
                             (size_t)n * sizeof(float), err);
        if (st == FG_OK) st = s->be->queue_sync(s->be_state, o->queue, err);
    }
    if (tmp) s->be->free(s->be_state, s->device, tmp);
    return st;
}

static int pool_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* A CUDA graph would capture the step's host waits and host update: refused by name. */
static fg_status refuse_graphs(const fg_offload_spec *spec, fg_error *err)
{
    const char *graphs = NULL;
    if (fg_plugin_config_value(spec->host, "backend", "cuda_graphs", &graphs) && graphs &&
        strcmp(graphs, "true") == 0)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: offload_optimizer = host with "
                            "[backend] cuda_graphs = true is not supported (the step waits "
                            "for the gradients on the host and updates there, which a graph "
                            "cannot hold); set one of them off", spec->who);
    return FG_OK;
}

fg_status fg_offload_create(const fg_offload_spec *spec, fg_offload **out, fg_error *err)
{
    *out = NULL;
    fg_status gst = refuse_graphs(spec, err);
    if (gst != FG_OK) return gst;
    fg_offload *o = calloc(1, sizeof *o);
    if (!o) return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", spec->who);
    o->spec = *spec;
    o->queue = spec->svc->queue(spec->svc->ctx, spec->stage);
    o->psz = fg_dtype_size((fg_dtype)spec->pdt);
    o->gsz = fg_dtype_size((fg_dtype)spec->gdt);
    o->pinned = spec->be->host_alloc && spec->be->host_free;
    fg_status st = fg_host_optimizer_read(spec->host, spec->who, &o->opt, err);
    o->slots = fg_host_optimizer_slots(&o->opt);
    if (st == FG_OK && fg_cpu_pool_create(pool_threads(), &o->pool) != 0)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: starting the host update's threads",
                          spec->who);
    if (st == FG_OK) st = alloc_all(o, err);
    if (st == FG_OK) st = read_master(o, err);
    return FG_PLUGIN_CREATED(st, o, out, fg_offload_destroy);
}

void fg_offload_destroy(fg_offload *o)
{
    if (!o) return;
    const fg_offload_spec *s = &o->spec;
    for (int64_t b = 0; o->events && b < o->buckets; b++)
        if (o->events[b]) s->be->event_destroy(s->be_state, o->events[b]);
    free(o->events);
    if (o->queue) {
        fg_error e = {0};
        s->be->queue_sync(s->be_state, o->queue, &e); /* no copy reads freed memory */
    }
    host_free(o, o->master);
    host_free(o, o->slot[0]);
    host_free(o, o->slot[1]);
    host_free(o, o->grads);
    host_free(o, o->grads_f32);
    host_free(o, o->work);
    fg_cpu_pool_destroy(o->pool);
    free(o);
}

static int64_t bucket_len(const fg_offload *o, int64_t b)
{
    int64_t off = b * FG_OFFLOAD_BUCKET, left = o->spec.count - off;
    return left < FG_OFFLOAD_BUCKET ? left : FG_OFFLOAD_BUCKET;
}

/* Every bucket's gradients to the host, each followed by its event. */
static fg_status fetch_grads(fg_offload *o, const void *grads, fg_error *err)
{
    const fg_offload_spec *s = &o->spec;
    fg_status st = FG_OK;
    for (int64_t b = 0; st == FG_OK && b < o->buckets; b++) {
        size_t off = (size_t)(b * FG_OFFLOAD_BUCKET) * o->gsz;
        st = s->be->copy(s->be_state, o->queue, (char *)o->grads + off, -1,
                         (const char *)grads + off, s->device, (size_t)bucket_len(o, b) * o->gsz,
                         err);
        if (st == FG_OK && o->events) st = s->be->event_record(s->be_state, o->queue, o->events[b], err);
    }
    return st;
}

static fg_status wait_bucket(fg_offload *o, int64_t b, fg_error *err)
{
    const fg_offload_spec *s = &o->spec;
    if (o->events) return s->be->event_sync(s->be_state, o->events[b], err);
    return b == 0 ? s->be->queue_sync(s->be_state, o->queue, err) : FG_OK;
}

/* The host update of bucket b and the copy of its working parameters back. */
static fg_status update_bucket(fg_offload *o, const fg_step_args *a, int64_t b, void *params,
                               fg_error *err)
{
    const fg_offload_spec *s = &o->spec;
    int64_t off = b * FG_OFFLOAD_BUCKET, n = bucket_len(o, b);
    const float *g = (const float *)o->grads + off;
    if (o->grads_f32) {
        fg_cpu_convert(o->pool, o->grads_f32 + off, FG_CPU_F32, (char *)o->grads + off * 2,
                       (int)s->gdt, (size_t)n);
        g = o->grads_f32 + off;
    }
    float *state[2] = {o->slot[0] ? o->slot[0] + off : NULL, o->slot[1] ? o->slot[1] + off : NULL};
    fg_host_optimizer_update(&o->opt, o->pool, a, o->master + off, g, state, n);
    const void *src = o->master + off;
    if (o->work) {
        fg_cpu_convert(o->pool, (char *)o->work + off * 2, (int)s->pdt, o->master + off,
                       FG_CPU_F32, (size_t)n);
        src = (char *)o->work + off * 2;
    }
    return s->be->copy(s->be_state, o->queue, (char *)params + (size_t)off * o->psz, s->device,
                       src, -1, (size_t)n * o->psz, err);
}

fg_status fg_offload_step(fg_offload *o, const fg_step_args *a, void *params,
                          const void *grads, fg_error *err)
{
    if (a->skip || !o->spec.count) return FG_OK;
    double wait = 0, update = 0;
    fg_status st = fetch_grads(o, grads, err);
    for (int64_t b = 0; st == FG_OK && b < o->buckets; b++) {
        double t0 = now_s();
        st = wait_bucket(o, b, err);
        double t1 = now_s();
        if (st == FG_OK) st = update_bucket(o, a, b, params, err);
        wait += t1 - t0;
        update += now_s() - t1;
    }
    o->wait_s += wait;
    o->update_s += update;
    o->steps++;
    const fg_host *h = o->spec.host;
    h->metric(h, "time/offload_update_s", update, a->step);
    h->metric(h, "time/offload_copy_wait_s", wait, a->step);
    return st;
}

float *fg_offload_master(const fg_offload *o) { return o->master; }
int fg_offload_slots(const fg_offload *o) { return o->slots; }
float *fg_offload_slot(const fg_offload *o, int i)
{
    return i >= 0 && i < o->slots ? o->slot[i] : NULL;
}

uint64_t fg_offload_host_bytes(const fg_offload *o)
{
    uint64_t n = (uint64_t)o->spec.count;
    return n * (sizeof(float) * (1u + (unsigned)o->slots + (o->grads_f32 ? 1u : 0u)) + o->gsz +
                (o->work ? o->psz : 0));
}

uint64_t fg_offload_device_bytes_saved(const fg_offload *o)
{
    uint64_t n = (uint64_t)o->spec.count;
    return n * sizeof(float) * ((unsigned)o->slots + (o->spec.pdt != FG_F32 ? 1u : 0u));
}


void fg_offload_log_setup(const fg_offload *o)
{
    const double mib = 1.0 / (1024.0 * 1024.0);
    const fg_host *h = o->spec.host;
    h->log(h, FG_LOG_INFO, "offload_optimizer = host: f32 master and %s state of %lld "
           "parameters [%lld, %lld) in %s host memory, %.2f MiB on the host, %.2f MiB less "
           "on device %d; host update on %d threads, buckets of %d floats", o->opt.adamw ?
           "adamw" : "sgd", (long long)o->spec.count, (long long)o->spec.lo,
           (long long)(o->spec.lo + o->spec.count), o->pinned ? "pinned" : "plain",
           (double)fg_offload_host_bytes(o) * mib, (double)fg_offload_device_bytes_saved(o) * mib,
           o->spec.device, fg_cpu_pool_threads(o->pool), FG_OFFLOAD_BUCKET);
}

void fg_offload_log_totals(const fg_offload *o)
{
    if (!o || !o->steps) return;
    const fg_host *h = o->spec.host;
    h->log(h, FG_LOG_INFO, "offload_optimizer = host: %lld steps, host update %.3f s, waiting "
           "for gradient copies %.3f s", (long long)o->steps, o->update_s, o->wait_s);
}
