/* The fake host and the dlopen loader of the data plugin tests. */
#define _POSIX_C_SOURCE 200809L
#include "data_test.h"
#include "option_text.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>

int test_failures = 0;
const fg_data_read_args test_read_args = {sizeof(fg_data_read_args), FG_SPLIT_TEST, 0, 0};

/* ---- a fake host ------------------------------------------------------------------- */

static const fake_host *as_fake(const fg_host *host)
{
    return (const fake_host *)host; /* fg_host is its first member */
}

/* The set value, else the schema default; NULL for a key the schema does not declare. */
static const char *lookup(const fg_host *host, const char *key)
{
    const fake_host *fh = as_fake(host);
    for (int i = 0; i < fh->count; i++)
        if (strcmp(fh->keys[i], key) == 0)
            return fh->values[i];
    for (uint32_t i = 0; i < fh->plugin->option_count; i++)
        if (strcmp(fh->plugin->options[i].key, key) == 0)
            return fh->plugin->options[i].default_value;
    return NULL;
}

static void fake_log(const fg_host *host, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[plugin log %d] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static fg_status fake_get_string(const fg_host *host, const char *key, const char **out)
{
    return fg_test_option_string(lookup(host, key), out);
}

static fg_status fake_get_int(const fg_host *host, const char *key, int64_t *out)
{
    return fg_test_option_int(lookup(host, key), out);
}

static fg_status fake_get_float(const fg_host *host, const char *key, double *out)
{
    return fg_test_option_float(lookup(host, key), out);
}

static fg_status fake_get_bool(const fg_host *host, const char *key, int *out)
{
    return fg_test_option_bool(lookup(host, key), out);
}

void fake_host_init(fake_host *fh, const fg_plugin *plugin)
{
    memset(fh, 0, sizeof *fh);
    fh->plugin = plugin;
    fh->host.struct_size = sizeof fh->host;
    fh->host.abi_major = FG_ABI_MAJOR;
    fh->host.abi_minor = FG_ABI_MINOR;
    fh->host.section = "data";
    fh->host.log = fake_log;
    fh->host.get_bool = fake_get_bool;
    fh->host.get_int = fake_get_int;
    fh->host.get_float = fake_get_float;
    fh->host.get_string = fake_get_string;
}

void fake_host_set(fake_host *fh, const char *key, const char *value)
{
    int i = 0;
    while (i < fh->count && strcmp(fh->keys[i], key) != 0)
        i++;
    if (i == FAKE_HOST_MAX_KEYS) {
        fprintf(stderr, "fake_host_set: more than %d keys\n", FAKE_HOST_MAX_KEYS);
        test_failures++;
        return;
    }
    snprintf(fh->keys[i], sizeof fh->keys[i], "%s", key);
    snprintf(fh->values[i], sizeof fh->values[i], "%s", value);
    if (i == fh->count)
        fh->count++;
}

/* ---- plugins ----------------------------------------------------------------------- */

const fg_plugin *load_data_plugin(const char *path, const char *name)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return NULL;
    }
    const fg_plugin *p = dlsym(handle, FG_PLUGIN_ENTRY_NAME);
    if (!p) {
        fprintf(stderr, "%s: no %s\n", path, FG_PLUGIN_ENTRY_NAME);
        return NULL;
    }
    if (p->magic != FG_PLUGIN_MAGIC || p->abi_major != FG_ABI_MAJOR ||
        p->struct_size < sizeof *p || p->kind != FG_KIND_DATA || strcmp(p->name, name) != 0 ||
        p->option_size != sizeof(fg_option) || !p->init || !p->vtable ||
        data_vtable(p)->struct_size < sizeof(fg_data_vtable)) {
        fprintf(stderr, "%s: not the data plugin \"%s\" this test was built for\n", path, name);
        return NULL;
    }
    return p;
}

fg_status instance_init(test_instance *in, const fg_plugin *plugin, fake_host *fh,
                        fg_error *err)
{
    memset(in, 0, sizeof *in);
    in->plugin = plugin;
    in->vt = data_vtable(plugin);
    err->status = FG_OK;
    err->message[0] = '\0';
    return plugin->init(&fh->host, &in->state, err);
}

void instance_deinit(test_instance *in)
{
    if (in->state && in->plugin->deinit)
        in->plugin->deinit(in->state);
    in->state = NULL;
}

/* ---- concurrent reads -------------------------------------------------------------- */

enum { CONC_BATCH = 37, CONC_THREADS = 4 };

typedef struct reader_job {
    const test_instance *in;
    void *ds;
    const int64_t *order;  /* (n,) */
    int64_t n;
    int64_t elems;         /* floats per sample */
    const float *ref;      /* (n, elems): the sequential read of order */
    const int32_t *ref_labels;
    int64_t first_batch;   /* each thread starts elsewhere, so they overlap differently */
    int64_t mismatches;
    fg_status status;
    fg_error err;
} reader_job;

static void *reader_main(void *arg)
{
    reader_job *job = arg;
    float *buf = malloc((size_t)CONC_BATCH * (size_t)job->elems * sizeof *buf);
    int32_t labels[CONC_BATCH];
    int64_t batches = (job->n + CONC_BATCH - 1) / CONC_BATCH;
    for (int64_t b = 0; b < batches && job->status == FG_OK; b++) {
        int64_t start = ((job->first_batch + b) % batches) * CONC_BATCH;
        int n = (int)(job->n - start < CONC_BATCH ? job->n - start : CONC_BATCH);
        job->status = job->in->vt->read(job->in->state, job->ds, &test_read_args,
                                        job->order + start, n, buf, labels, &job->err);
        if (memcmp(buf, job->ref + start * job->elems, (size_t)n * (size_t)job->elems * sizeof *buf) != 0 ||
            memcmp(labels, job->ref_labels + start, (size_t)n * sizeof *labels) != 0)
            job->mismatches++;
    }
    free(buf);
    return NULL;
}

void check_concurrent_reads(const test_instance *in, void *ds, int64_t n, int64_t elems)
{
    int64_t *order = malloc((size_t)n * sizeof *order);
    for (int64_t i = 0; i < n; i++)
        order[i] = (i * 7919) % n; /* a permutation when gcd(7919, n) = 1 */
    float *ref = malloc((size_t)n * (size_t)elems * sizeof *ref);
    int32_t *ref_labels = malloc((size_t)n * sizeof *ref_labels);
    fg_error err;
    for (int64_t s = 0; s < n; s += CONC_BATCH) {
        int cnt = (int)(n - s < CONC_BATCH ? n - s : CONC_BATCH);
        CHECK_STATUS(in->vt->read(in->state, ds, &test_read_args, order + s, cnt,
                                  ref + s * elems, ref_labels + s, &err),
                     FG_OK, err);
    }
    pthread_t threads[CONC_THREADS];
    reader_job jobs[CONC_THREADS];
    for (int t = 0; t < CONC_THREADS; t++) {
        jobs[t] = (reader_job){.in = in, .ds = ds, .order = order, .n = n, .elems = elems,
                               .ref = ref, .ref_labels = ref_labels,
                               .first_batch = t * 13, .status = FG_OK};
        CHECK(pthread_create(&threads[t], NULL, reader_main, &jobs[t]) == 0);
    }
    for (int t = 0; t < CONC_THREADS; t++) {
        pthread_join(threads[t], NULL);
        CHECK_STATUS(jobs[t].status, FG_OK, jobs[t].err);
        CHECK_EQ_INT(jobs[t].mismatches, 0);
    }
    free(order);
    free(ref);
    free(ref_labels);
}
