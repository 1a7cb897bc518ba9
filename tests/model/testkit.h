/* A small kit for the model tests (checks: tests/common/check.h): a CPU backend opened
 * from its .so with the common fake host, device buffers, and one-call forward/backward
 * helpers. */
#ifndef FG_TEST_MODEL_TESTKIT_H
#define FG_TEST_MODEL_TESTKIT_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "fake_host.h"
#include "fulgur/backend.h"
#include "model.h"

/* Parses text as "cfg.ini"; NULL (and a failure counted) on a syntax error. */
fg_config *tk_config(const char *text);

typedef struct tk_backend {
    const fg_backend_vtable *be;
    void *bs;
    void *queue;
    const fg_plugin *plugin;
    fg_fake_host host; /* the schema's defaults; warnings and errors echoed to stderr */
} tk_backend;

/* Opens the backend .so at path (argv[1] of a test), inits it and creates a queue on
 * device 0. Returns 0 on success. */
int tk_backend_open(tk_backend *b, const char *path);
void tk_backend_close(tk_backend *b);

/* tk_counting_backend(b): a copy of b's vtable whose alloc also counts into tk_alloc_calls,
 * for the checks that nothing is allocated after setup. */
extern int tk_alloc_calls;
fg_backend_vtable tk_counting_backend(const tk_backend *b);

/* Device floats; aborts the test (exit 1) when the backend cannot allocate. */
float *tk_dev_alloc(tk_backend *b, size_t n);
void tk_dev_free(tk_backend *b, void *p);
void tk_upload(tk_backend *b, void *dev, const void *host, size_t bytes);
void tk_download(tk_backend *b, void *host, const void *dev, size_t bytes);

/* A model on the CPU backend with its inputs: everything a gradient test needs. */
typedef struct tk_net {
    tk_backend *b;
    fg_config *cfg;
    fg_model *model;
    fg_replica *rep;
    int batch, classes;
    size_t sample; /* floats per sample */
    float *params, *buffers; /* host copies */
    float *x;                /* host (batch, sample) */
    int32_t *labels;         /* host (batch) */
    float *x_dev;
    int32_t *labels_dev;
    float *scalars_dev; /* loss_sum, correct */
} tk_net;

/* Builds cfg_text for a (shape) input and `classes`, initialises with seed, draws inputs
 * U(-1, 1) and labels from seed too. Returns 0 on success. */
int tk_net_create(tk_net *n, tk_backend *b, const char *cfg_text, const int64_t *shape,
                  int rank, int classes, int batch, uint64_t seed);
void tk_net_destroy(tk_net *n);
/* Uploads the host params, buffers and inputs. */
void tk_net_upload(tk_net *n);
/* Forward at the current device state; returns the mean loss (NAN on error). */
double tk_net_loss(tk_net *n, int training);
/* Forward + backward (loss scale 1); grads into host `grads` (params_size floats) when not
 * NULL. */
int tk_net_grads(tk_net *n, int accumulate, float *grads);

#endif
