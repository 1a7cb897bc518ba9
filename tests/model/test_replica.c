/* A replica on the CPU backend (argv[1]): the loss against a host reference, gradient
 * accumulation over half batches, no allocation inside a step, evaluation mode (dropout
 * off, batchnorm on running statistics), reproducible dropout, the grad-ready hook, and
 * the errors of misuse. */
#include <math.h>
#include <stdlib.h>

#include "testkit.h"

static const char *conv_net =
    "[layer.conv]\ntype = conv2d\nout_channels = 3\nkernel_size = 3\npadding = 1\n"
    "[layer.relu]\ntype = relu\n[layer.pool]\ntype = maxpool2d\nkernel_size = 2\n"
    "[layer.flat]\ntype = flatten\n[layer.fc]\ntype = linear\nout_features = 4\n";

/* forward + backward over rows [first, first + rows) of the net's batch */
static void step_rows(tk_net *n, int first, int rows, float loss_scale, int accumulate)
{
    fg_error err = {0};
    CHECK_OK(fg_replica_forward(n->rep, n->b->queue, n->x_dev + (size_t)first * n->sample,
                                n->labels_dev + first, rows, 1, &n->scalars_dev[0],
                                &n->scalars_dev[1], &err),
             &err);
    CHECK_OK(fg_replica_backward(n->rep, n->b->queue, rows, loss_scale, accumulate, &err), &err);
}

static void test_accumulate(tk_backend *b)
{
    tk_net n;
    if (tk_net_create(&n, b, conv_net, (int64_t[]){2, 6, 6}, 3, 4, 8, 3) != 0)
        return;
    size_t np = fg_model_params_size(n.model);
    float *full = malloc(np * sizeof(float)), *acc = malloc(np * sizeof(float));
    step_rows(&n, 0, 8, 1.0f, 0);
    tk_download(b, full, fg_replica_grads(n.rep), np * sizeof(float));
    /* two half batches, each mean loss weighted 1/2, the second accumulated */
    step_rows(&n, 0, 4, 0.5f, 0);
    step_rows(&n, 4, 4, 0.5f, 1);
    tk_download(b, acc, fg_replica_grads(n.rep), np * sizeof(float));
    double worst = 0, biggest = 0;
    for (size_t i = 0; i < np; i++) {
        worst = fmax(worst, fabs((double)full[i] - acc[i]));
        biggest = fmax(biggest, fabs(full[i]));
    }
    printf("  accumulate: 2 x 4 vs 8: max |diff| %.2e (largest gradient %.2e)\n", worst, biggest);
    CHECK(worst <= 1e-6);
    CHECK(biggest > 1e-3); /* the comparison means something */
    /* accumulate = 0 overwrites: the same half batch twice gives the same gradient */
    step_rows(&n, 0, 4, 0.5f, 0);
    step_rows(&n, 4, 4, 0.5f, 0);
    tk_download(b, acc, fg_replica_grads(n.rep), np * sizeof(float));
    step_rows(&n, 4, 4, 0.5f, 0);
    tk_download(b, full, fg_replica_grads(n.rep), np * sizeof(float));
    CHECK(memcmp(acc, full, np * sizeof(float)) == 0);
    free(full);
    free(acc);
    tk_net_destroy(&n);
}

/* Logits = x W^T + b and the mean softmax cross-entropy, on the host in double. */
static void test_loss_reference(tk_backend *b)
{
    tk_net n;
    if (tk_net_create(&n, b, "[layer.fc]\ntype = linear\nout_features = 3\n", (int64_t[]){5}, 1,
                      3, 6, 11) != 0)
        return;
    const fg_tensor_info *w = fg_model_tensor(n.model, 0), *bias = fg_model_tensor(n.model, 1);
    double loss = 0;
    int correct = 0;
    for (int r = 0; r < n.batch; r++) {
        double z[3], mx = -1e30, se = 0;
        int arg = 0;
        for (int j = 0; j < 3; j++) {
            z[j] = n.params[bias->offset + (size_t)j];
            for (int k = 0; k < 5; k++)
                z[j] += (double)n.params[w->offset + (size_t)(j * 5 + k)] * n.x[r * 5 + k];
            if (z[j] > mx) {
                mx = z[j];
                arg = j;
            }
        }
        for (int j = 0; j < 3; j++)
            se += exp(z[j] - mx);
        loss += log(se) + mx - z[n.labels[r]];
        correct += arg == n.labels[r];
    }
    double got = tk_net_loss(&n, 0);
    float scalars[2];
    tk_download(b, scalars, n.scalars_dev, sizeof scalars);
    printf("  loss %.7f, reference %.7f; correct %g, reference %d\n", got, loss / n.batch,
           scalars[1], correct);
    CHECK(fabs(got - loss / n.batch) < 1e-5);
    CHECK(scalars[1] == (float)correct);
    /* the device scalars accumulate: a second forward without reset doubles them */
    fg_error err = {0};
    CHECK_OK(fg_replica_forward(n.rep, b->queue, n.x_dev, n.labels_dev, n.batch, 0,
                                &n.scalars_dev[0], &n.scalars_dev[1], &err),
             &err);
    float twice[2];
    tk_download(b, twice, n.scalars_dev, sizeof twice);
    CHECK(fabsf(twice[0] - 2 * scalars[0]) < 1e-5f && twice[1] == 2 * scalars[1]);
    tk_net_destroy(&n);
}

static void test_no_alloc_in_step(tk_backend *b)
{
    fg_backend_vtable wrapped = tk_counting_backend(b);
    tk_backend wb = *b;
    wb.be = &wrapped;
    tk_net n;
    tk_alloc_calls = 0;
    const char *text = "[layer.conv]\ntype = conv2d\nout_channels = 3\nkernel_size = 3\n"
                       "[layer.bn]\ntype = batchnorm\n[layer.gelu]\ntype = gelu\n"
                       "[layer.pool]\ntype = avgpool2d\nkernel_size = 2\n"
                       "[layer.flat]\ntype = flatten\n[layer.drop]\ntype = dropout\n"
                       "[layer.fc]\ntype = linear\nout_features = 4\n";
    if (tk_net_create(&n, &wb, text, (int64_t[]){2, 6, 6}, 3, 4, 8, 5) != 0)
        return;
    int at_setup = tk_alloc_calls;
    CHECK(fg_replica_arena_bytes(n.rep) > 0);
    for (int s = 0; s < 3; s++) {
        fg_replica_set_step(n.rep, (uint64_t)s);
        step_rows(&n, 0, 8 - s, 1.0f, s > 0);
        tk_net_loss(&n, 0);
    }
    printf("  allocations: %d at setup, %d during 3 steps; arena %zu bytes\n", at_setup,
           tk_alloc_calls - at_setup, fg_replica_arena_bytes(n.rep));
    CHECK(tk_alloc_calls == at_setup);
    tk_net_destroy(&n);
}

static void test_eval_and_dropout(tk_backend *b)
{
    const char *with = "[layer.a]\ntype = linear\nout_features = 16\n"
                       "[layer.drop]\ntype = dropout\np = 0.5\n"
                       "[layer.b]\ntype = linear\nout_features = 3\n";
    const char *without = "[layer.a]\ntype = linear\nout_features = 16\n"
                          "[layer.b]\ntype = linear\nout_features = 3\n";
    tk_net d, p;
    if (tk_net_create(&d, b, with, (int64_t[]){5}, 1, 3, 6, 9) != 0 ||
        tk_net_create(&p, b, without, (int64_t[]){5}, 1, 3, 6, 9) != 0)
        return;
    double eval_d = tk_net_loss(&d, 0), eval_p = tk_net_loss(&p, 0);
    CHECK(eval_d == eval_p); /* evaluation: dropout is the identity, bit for bit */
    fg_replica_set_step(d.rep, 1);
    double s1 = tk_net_loss(&d, 1), s1_again = tk_net_loss(&d, 1);
    fg_replica_set_step(d.rep, 2);
    double s2 = tk_net_loss(&d, 1);
    fg_replica_set_seed(d.rep, 10);
    fg_replica_set_step(d.rep, 1);
    double other_seed = tk_net_loss(&d, 1);
    printf("  dropout: eval %.6f, step 1 %.6f (again %.6f), step 2 %.6f, seed 10 %.6f\n",
           eval_d, s1, s1_again, s2, other_seed);
    CHECK(s1 == s1_again);
    CHECK(s1 != eval_d && s1 != s2 && s1 != other_seed);
    /* backward needs a training forward */
    fg_error err = {0};
    tk_net_loss(&d, 0);
    CHECK(fg_replica_backward(d.rep, b->queue, 6, 1.0f, 0, &err) == FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "no training forward") != NULL);
    tk_net_loss(&d, 1);
    CHECK(fg_replica_backward(d.rep, b->queue, 5, 1.0f, 0, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "backward: batch 5 differs from the forward's batch 6");
    CHECK(fg_replica_forward(d.rep, b->queue, d.x_dev, d.labels_dev, 7, 1, &d.scalars_dev[0],
                             &d.scalars_dev[1], &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "forward: batch 7 is outside 1..6 (the replica's max batch)");
    CHECK(fg_replica_input_grad(d.rep) == NULL);
    tk_net_destroy(&d);
    tk_net_destroy(&p);
}

/* Running statistics move with momentum in training and are used, unchanged, in eval. */
static void test_batchnorm_running(tk_backend *b)
{
    tk_net n;
    const char *text = "[layer.bn]\ntype = batchnorm\nmomentum = 0.25\n"
                       "[layer.fc]\ntype = linear\nout_features = 2\n";
    if (tk_net_create(&n, b, text, (int64_t[]){3}, 1, 2, 5, 13) != 0)
        return;
    float stats[2][3];
    const fg_tensor_info *rm = fg_model_tensor(n.model, 2), *rv = fg_model_tensor(n.model, 3);
    CHECK(strcmp(rm->name, "bn.running_mean") == 0 && strcmp(rv->name, "bn.running_var") == 0);
    tk_net_loss(&n, 1);
    tk_download(b, stats[0], fg_replica_buffers(n.rep) + rm->offset, sizeof stats[0]);
    tk_download(b, stats[1], fg_replica_buffers(n.rep) + rv->offset, sizeof stats[1]);
    for (int c = 0; c < 3; c++) {
        double mean = 0, var = 0;
        for (int r = 0; r < 5; r++)
            mean += n.x[r * 3 + c] / 5.0;
        for (int r = 0; r < 5; r++)
            var += (n.x[r * 3 + c] - mean) * (n.x[r * 3 + c] - mean) / 4.0; /* unbiased */
        CHECK(fabs(stats[0][c] - 0.25 * mean) < 1e-6);
        CHECK(fabs(stats[1][c] - (0.75 + 0.25 * var)) < 1e-6);
    }
    float after[3];
    tk_net_loss(&n, 0);
    tk_download(b, after, fg_replica_buffers(n.rep) + rm->offset, sizeof after);
    CHECK(memcmp(after, stats[0], sizeof after) == 0); /* eval leaves them alone */
    /* batchnorm first: backward still runs through it (it has parameters) */
    CHECK(tk_net_grads(&n, 0, NULL) == 0);
    tk_net_destroy(&n);
}

typedef struct hook_log {
    int calls;
    size_t offset[8], count[8];
} hook_log;

static void record(void *user, size_t offset, size_t count)
{
    hook_log *h = user;
    if (h->calls < 8) {
        h->offset[h->calls] = offset;
        h->count[h->calls] = count;
    }
    h->calls++;
}

static void test_hook(tk_backend *b)
{
    tk_net n;
    if (tk_net_create(&n, b, conv_net, (int64_t[]){2, 6, 6}, 3, 4, 4, 3) != 0)
        return;
    hook_log h = {0};
    fg_replica_set_grad_ready_hook(n.rep, record, &h);
    CHECK(tk_net_grads(&n, 0, NULL) == 0);
    /* last layer first: fc (weight, bias), then conv (weight, bias) */
    const fg_tensor_info *cw = fg_model_tensor(n.model, 0), *cb = fg_model_tensor(n.model, 1);
    const fg_tensor_info *fw = fg_model_tensor(n.model, 2), *fb = fg_model_tensor(n.model, 3);
    CHECK(h.calls == 2);
    CHECK(h.offset[0] == fw->offset && h.count[0] == fb->offset + fb->numel - fw->offset);
    CHECK(h.offset[1] == cw->offset && h.count[1] == cb->offset + cb->numel - cw->offset);
    tk_net_destroy(&n);
}

/* The fused classifier (ABI 1.4, the CPU backend has it): a replica that keeps no softmax
 * has an arena smaller by the (batch, classes) f32 buffer and no fg_replica_probs, trains
 * to the same gradients, and its gradient of the logits serves one backward. */
static void test_fused_loss(tk_backend *b)
{
    tk_net n;
    const char *fc = "[layer.fc]\ntype = linear\nout_features = 7\n";
    if (tk_net_create(&n, b, fc, (int64_t[]){5}, 1, 7, 6, 21) != 0)
        return;
    fg_error err = {0};
    fg_replica *lean = NULL;
    fg_model_set_keep_probs(n.model, 0);
    CHECK_OK(fg_replica_create(n.model, b->be, b->bs, 0, 6, &lean, &err), &err);
    fg_model_set_keep_probs(n.model, 1);
    if (!lean) {
        tk_net_destroy(&n);
        return;
    }
    size_t kept = fg_replica_arena_bytes(n.rep), without = fg_replica_arena_bytes(lean);
    CHECK(kept >= without + 6 * 7 * sizeof(float), "arena %zu bytes with the softmax, %zu "
          "without: the (6, 7) f32 buffer should be the difference", kept, without);
    CHECK(fg_replica_probs(lean) == NULL && fg_replica_probs(n.rep) != NULL,
          "only the replica asked to keep them has probabilities");
    size_t np = fg_model_params_size(n.model);
    float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
    CHECK_OK(fg_replica_upload(lean, b->queue, n.params, n.buffers, &err), &err);
    step_rows(&n, 0, 6, 1.0f, 0);
    tk_download(b, g1, fg_replica_grads(n.rep), np * sizeof(float));
    CHECK_OK(fg_replica_forward(lean, b->queue, n.x_dev, n.labels_dev, 6, 1, &n.scalars_dev[0],
                                &n.scalars_dev[1], &err), &err);
    CHECK_OK(fg_replica_backward(lean, b->queue, 6, 1.0f, 0, &err), &err);
    tk_download(b, g2, fg_replica_grads(lean), np * sizeof(float));
    CHECK(memcmp(g1, g2, np * sizeof(float)) == 0, "the lean replica's gradients differ");
    fg_status st = fg_replica_backward(lean, b->queue, 6, 1.0f, 0, &err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(err.message, "used by an earlier backward"),
          "a second backward from one fused forward: %s", err.message);
    free(g1);
    free(g2);
    fg_replica_destroy(lean);
    tk_net_destroy(&n);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s BACKEND.so\n", argv[0]);
        return 2;
    }
    tk_backend b;
    if (tk_backend_open(&b, argv[1]) != 0)
        return 1;
    test_loss_reference(&b);
    test_accumulate(&b);
    test_no_alloc_in_step(&b);
    test_eval_and_dropout(&b);
    test_batchnorm_running(&b);
    test_hook(&b);
    test_fused_loss(&b);
    tk_backend_close(&b);
    return fg_test_report("model.replica");
}
