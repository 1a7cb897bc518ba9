/* The model tests' kit: see testkit.h. */
#define _POSIX_C_SOURCE 200809L
#include "testkit.h"

#include <math.h>
#include <stdlib.h>

#include "init.h"
#include "plugin_load.h"

fg_config *tk_config(const char *text)
{
    fg_config *cfg = NULL;
    fg_error err = {0};
    if (fg_config_parse_string(text, "cfg.ini", &cfg, &err) != FG_OK) {
        fprintf(stderr, "config does not parse: %s\n", err.message);
        fg_test_failures++;
        return NULL;
    }
    return cfg;
}

int tk_backend_open(tk_backend *b, const char *path)
{
    memset(b, 0, sizeof *b);
    b->plugin = fg_test_load_plugin(path, FG_KIND_BACKEND, NULL);
    if (!b->plugin)
        return -1;
    fg_fake_host_init(&b->host, b->plugin, NULL);
    fg_fake_host_echo(&b->host, stderr, FG_LOG_WARN);
    fg_error err = {0};
    if (b->plugin->init(&b->host.host, &b->bs, &err) != FG_OK) {
        fprintf(stderr, "backend init failed: %s\n", err.message);
        return -1;
    }
    b->be = b->plugin->vtable;
    if (b->be->queue_create(b->bs, 0, &b->queue, &err) != FG_OK) {
        fprintf(stderr, "queue_create failed: %s\n", err.message);
        return -1;
    }
    return 0; /* the library stays open: plugins are never unloaded */
}

void tk_backend_close(tk_backend *b)
{
    if (b->queue)
        b->be->queue_destroy(b->bs, b->queue);
    if (b->bs)
        b->plugin->deinit(b->bs);
}

float *tk_dev_alloc(tk_backend *b, size_t n)
{
    void *p = NULL;
    fg_error err = {0};
    if (b->be->alloc(b->bs, 0, (n ? n : 1) * sizeof(float), &p, &err) != FG_OK) {
        fprintf(stderr, "device alloc failed: %s\n", err.message);
        exit(1);
    }
    return p;
}

void tk_dev_free(tk_backend *b, void *p)
{
    if (p)
        b->be->free(b->bs, 0, p);
}

static void tk_sync(tk_backend *b)
{
    fg_error err = {0};
    CHECK_OK(b->be->queue_sync(b->bs, b->queue, &err), &err);
}

void tk_upload(tk_backend *b, void *dev, const void *host, size_t bytes)
{
    fg_error err = {0};
    CHECK_OK(b->be->copy(b->bs, b->queue, dev, 0, host, -1, bytes, &err), &err);
    tk_sync(b);
}

void tk_download(tk_backend *b, void *host, const void *dev, size_t bytes)
{
    fg_error err = {0};
    CHECK_OK(b->be->copy(b->bs, b->queue, host, -1, dev, 0, bytes, &err), &err);
    tk_sync(b);
}

/* ---- a network with its inputs ------------------------------------------------------ */

int tk_net_create(tk_net *n, tk_backend *b, const char *cfg_text, const int64_t *shape,
                  int rank, int classes, int batch, uint64_t seed)
{
    memset(n, 0, sizeof *n);
    n->b = b;
    n->batch = batch;
    n->classes = classes;
    fg_error err = {0};
    if (!(n->cfg = tk_config(cfg_text)))
        return -1;
    if (fg_model_build(n->cfg, shape, rank, classes, &n->model, &err) != FG_OK) {
        fprintf(stderr, "model build failed: %s\n", err.message);
        fg_test_failures++;
        return -1;
    }
    fg_model_set_keep_probs(n->model, 1); /* tests read the softmax (fg_replica_probs) */
    if (fg_replica_create(n->model, b->be, b->bs, 0, batch, &n->rep, &err) != FG_OK) {
        fprintf(stderr, "replica create failed: %s\n", err.message);
        fg_test_failures++;
        return -1;
    }
    n->sample = fg_shape_numel(fg_model_input_shape(n->model));
    size_t np = fg_model_params_size(n->model), nb = fg_model_buffers_size(n->model);
    n->params = calloc(np ? np : 1, sizeof(float));
    n->buffers = calloc(nb ? nb : 1, sizeof(float));
    n->x = malloc((size_t)batch * n->sample * sizeof(float));
    n->labels = malloc((size_t)batch * sizeof(int32_t));
    fg_model_init_params(n->model, seed, n->params, n->buffers);
    uint64_t key = fg_rng_key(seed, 999);
    for (size_t i = 0; i < (size_t)batch * n->sample; i++)
        n->x[i] = (float)(2.0 * fg_rng_uniform(key, i) - 1.0);
    for (int i = 0; i < batch; i++)
        n->labels[i] = (int32_t)(fg_rng_u64(key, 1000000 + (uint64_t)i) % (uint64_t)classes);
    n->x_dev = tk_dev_alloc(b, (size_t)batch * n->sample);
    n->labels_dev = (int32_t *)tk_dev_alloc(b, (size_t)batch);
    n->scalars_dev = tk_dev_alloc(b, 2);
    fg_replica_set_seed(n->rep, seed);
    tk_net_upload(n);
    return 0;
}

void tk_net_destroy(tk_net *n)
{
    if (n->b) {
        tk_dev_free(n->b, n->x_dev);
        tk_dev_free(n->b, n->labels_dev);
        tk_dev_free(n->b, n->scalars_dev);
    }
    fg_replica_destroy(n->rep);
    fg_model_destroy(n->model);
    fg_config_destroy(n->cfg);
    free(n->params);
    free(n->buffers);
    free(n->x);
    free(n->labels);
}

void tk_net_upload(tk_net *n)
{
    fg_error err = {0};
    CHECK_OK(fg_replica_upload(n->rep, n->b->queue, n->params, n->buffers, &err), &err);
    tk_upload(n->b, n->x_dev, n->x, (size_t)n->batch * n->sample * sizeof(float));
    tk_upload(n->b, n->labels_dev, n->labels, (size_t)n->batch * sizeof(int32_t));
}

double tk_net_loss(tk_net *n, int training)
{
    float zero[2] = {0, 0}, got[2];
    tk_upload(n->b, n->scalars_dev, zero, sizeof zero);
    fg_error err = {0};
    fg_status st = fg_replica_forward(n->rep, n->b->queue, n->x_dev, n->labels_dev, n->batch,
                                      training, &n->scalars_dev[0], &n->scalars_dev[1], &err);
    if (st != FG_OK) {
        fprintf(stderr, "forward failed: %s\n", err.message);
        fg_test_failures++;
        return NAN;
    }
    tk_download(n->b, got, n->scalars_dev, sizeof got);
    return (double)got[0] / n->batch;
}

int tk_net_grads(tk_net *n, int accumulate, float *grads)
{
    if (isnan(tk_net_loss(n, 1)))
        return -1;
    fg_error err = {0};
    fg_status st = fg_replica_backward(n->rep, n->b->queue, n->batch, 1.0f, accumulate, &err);
    if (st != FG_OK) {
        fprintf(stderr, "backward failed: %s\n", err.message);
        fg_test_failures++;
        return -1;
    }
    if (grads)
        tk_download(n->b, grads, fg_replica_grads(n->rep),
                    fg_model_params_size(n->model) * sizeof(float));
    return 0;
}

int tk_alloc_calls;
static const fg_backend_vtable *tk_real_be;

static fg_status tk_counting_alloc(void *state, int device, size_t bytes, void **ptr,
                                   fg_error *err)
{
    tk_alloc_calls++;
    return tk_real_be->alloc(state, device, bytes, ptr, err);
}

fg_backend_vtable tk_counting_backend(const tk_backend *b)
{
    fg_backend_vtable v = *b->be;
    tk_real_be = b->be;
    v.alloc = tk_counting_alloc;
    return v;
}
