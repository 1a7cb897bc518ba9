/* The learning-rate range test (Smith 2017; Lightning's lr_find): an exponential schedule
 * from a tiny to a large lr over a fixed number of steps, the loss recorded at each step,
 * and the suggestion where the smoothed loss falls fastest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fulgur/fulgur.h"
#include "runtime.h"

#define MIN_LR 1e-6
#define MAX_LR 1.0
#define MAX_OVERRIDES 256

typedef struct curve {
    double *lr, *loss;
    int count, capacity;
    double best;
    int diverged;
} curve;

/* Records a point; stops once the loss is non-finite or four times the best so far. */
static int observe(void *user, int64_t step, double lr, double loss)
{
    curve *c = user;
    if (c->count < c->capacity) {
        c->lr[c->count] = lr;
        c->loss[c->count] = loss;
        c->count++;
    }
    if (loss < c->best) c->best = loss;
    c->diverged = !isfinite(loss) || (c->count > 10 && loss > 4.0 * c->best);
    return c->diverged;
}

/* Exponential moving average with bias correction (beta 0.98), in place. */
static void smooth(double *v, int n)
{
    double avg = 0, beta = 0.98;
    for (int i = 0; i < n; i++) {
        avg = beta * avg + (1 - beta) * v[i];
        v[i] = avg / (1 - pow(beta, i + 1));
    }
}

/* Index of the steepest descent of the smoothed loss, skipping the first 10 points. */
static int steepest(const double *v, int n)
{
    int best = -1;
    double best_grad = INFINITY;
    for (int i = 10; i + 1 < n; i++) {
        double g = (v[i + 1] - v[i - 1]) / 2;
        if (isfinite(g) && g < best_grad) {
            best_grad = g;
            best = i;
        }
    }
    return best;
}

static fg_status run_range(const fg_runtime_options *opts, const char *path,
                           const char *const *overrides, int count, int steps, const char *root,
                           curve *c, fg_error *err)
{
    char lr[64], gamma[64], max_steps[64], dir[320];
    snprintf(lr, sizeof lr, "optimizer.lr=%.17g", MIN_LR);
    snprintf(gamma, sizeof gamma, "scheduler.gamma=%.17g", pow(MAX_LR / MIN_LR, 1.0 / (steps - 1)));
    snprintf(max_steps, sizeof max_steps, "trainer.max_steps=%d", steps);
    snprintf(dir, sizeof dir, "trainer.default_root_dir=%s", root);
    const char *fixed[] = {lr, gamma, max_steps, dir, "scheduler.name=exponential",
                           "scheduler.interval=step", "trainer.max_epochs=1000000",
                           "trainer.log_every_n_steps=1", "trainer.test_after_fit=false",
                           "trainer.check_val_every_n_epoch=0", "trainer.num_sanity_val_steps=0",
                           "trainer.gradient_clip_val=0", "trainer.accumulate_grad_batches=1"};
    const char *over[MAX_OVERRIDES + sizeof fixed / sizeof fixed[0]];
    int n = 0;
    for (int i = 0; i < count && n < MAX_OVERRIDES; i++) over[n++] = overrides[i];
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) over[n++] = fixed[i];
    FILE *quiet = fopen("/dev/null", "w");
    if (!quiet) return fg_error_set(err, FG_INTERNAL, "cannot open /dev/null");
    fg_runtime_options o = *opts;
    o.out = quiet;
    o.verbosity = FG_LOG_ERROR;
    fg_runtime *rt = NULL;
    fg_status st = fg_runtime_create(&o, &rt, err);
    if (st == FG_OK) {
        rt->step_observer = observe;
        rt->step_observer_user = c;
        st = fg_runtime_configure(rt, path, over, n, err);
    }
    if (st == FG_OK) st = fg_runtime_run(rt, FG_VERB_FIT, err);
    fg_runtime_destroy(rt);
    fclose(quiet);
    return st;
}

fg_status fg_tune_lr(const fg_runtime_options *opts, const char *path,
                     const char *const *overrides, int override_count, int steps, FILE *out,
                     double *suggestion, fg_error *err)
{
    if (!out) out = stdout;
    if (steps < 20) return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tune lr: at least 20 steps");
    curve c = {calloc((size_t)steps, sizeof(double)), calloc((size_t)steps, sizeof(double)), 0, steps, INFINITY, 0};
    char root[256];
    snprintf(root, sizeof root, "%s/fulgur-tune-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    fg_status st = c.lr && c.loss ? FG_OK : fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    if (st == FG_OK && !mkdtemp(root)) st = fg_error_set(err, FG_INTERNAL, "cannot create %s", root);
    if (st == FG_OK) {
        fprintf(out, "learning-rate range test on %s: lr %.0e to %.0e over %d steps\n", path, MIN_LR,
                MAX_LR, steps);
        st = run_range(opts, path, overrides, override_count, steps, root, &c, err);
        char cmd[300];
        if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", root) < (int)sizeof cmd && system(cmd) != 0)
            fprintf(stderr, "fulgur tune: could not remove %s\n", root);
    }
    int best = -1;
    if (st == FG_OK) {
        double *raw = malloc((size_t)c.count * sizeof(double) + 1);
        if (raw) memcpy(raw, c.loss, (size_t)c.count * sizeof(double));
        smooth(c.loss, c.count);
        best = steepest(c.loss, c.count);
        for (int i = 0; i < c.count; i += (c.count + 19) / 20)
            fprintf(out, "  lr %-10.3g loss %-8.4f smoothed %.4f\n", c.lr[i], raw ? raw[i] : NAN, c.loss[i]);
        free(raw);
        if (best < 0)
            st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: the loss never fell in %d steps; "
                              "nothing to suggest", path, c.count);
    }
    if (st == FG_OK) {
        *suggestion = c.lr[best];
        fprintf(out, "%d steps ran%s; the loss falls fastest at lr %.3g\nsuggested lr: %.3g\n",
                c.count, c.diverged ? " (stopped: the loss diverged)" : "", c.lr[best], c.lr[best]);
    }
    free(c.lr);
    free(c.loss);
    return st;
}
