/* The plugin loader, concurrent reads and the case runner of the data plugin tests. */
#define _POSIX_C_SOURCE 200809L
#include "data_test.h"
#include "plugin_load.h"

#include <pthread.h>
#include <stdlib.h>

const fg_data_read_args test_read_args = {sizeof(fg_data_read_args), FG_SPLIT_TEST, 0, 0};

/* ---- plugins ----------------------------------------------------------------------- */

const fg_plugin *load_data_plugin(const char *path, const char *name)
{
    const fg_plugin *p = fg_test_load_plugin(path, FG_KIND_DATA, name);
    if (p && data_vtable(p)->struct_size < sizeof(fg_data_vtable)) {
        fprintf(stderr, "%s: a data vtable of %u bytes\n", path, data_vtable(p)->struct_size);
        return NULL;
    }
    return p;
}

fg_status instance_init(test_instance *in, const fg_plugin *plugin, fg_fake_host *fh,
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
        CHECK_EQ(jobs[t].mismatches, 0);
    }
    free(order);
    free(ref);
    free(ref_labels);
}

int data_test_main(int argc, char **argv, const data_case *cases, size_t count)
{
    for (size_t i = 0; argc == 2 && i < count; i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        int rc = cases[i].run();
        if (rc == TEST_SKIPPED)
            return rc;
        if (rc != 0)
            fg_test_failures++;
        return fg_test_report(argv[1]);
    }
    fprintf(stderr, "usage: %s CASE, CASE one of the test's table\n", argv[0]);
    return 2;
}
