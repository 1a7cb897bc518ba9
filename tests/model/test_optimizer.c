/* Optimizers: the [optimizer] config (defaults by kind, keys of the other kind refused),
 * and with a backend (argv[1]) three steps of sgd (momentum, dampening, nesterov, weight
 * decay) and adamw against a double-precision reference of PyTorch's update rules. */
#include <math.h>
#include <stdlib.h>

#include "optimizer.h"
#include "testkit.h"

#define N 7
#define STEPS 3

static const char *read_message(const char *text, fg_optimizer_config *oc)
{
    static fg_error err;
    memset(&err, 0, sizeof err);
    fg_config *cfg = tk_config(text);
    if (!cfg)
        return "(no config)";
    if (fg_optimizer_read_config(cfg, oc, &err) == FG_OK)
        err.message[0] = '\0';
    fg_config_destroy(cfg);
    return err.message;
}

static void test_config(void)
{
    fg_optimizer_config oc;
    CHECK_STR(read_message("[trainer]\nmax_epochs = 1\n", &oc), "");
    CHECK(oc.kind == FG_OPTIMIZER_SGD && oc.lr == 0.01 && oc.weight_decay == 0 &&
          oc.momentum == 0 && !oc.nesterov);
    CHECK_STR(read_message("[optimizer]\nname = adamw\nlr = 3e-4\n", &oc), "");
    CHECK(oc.kind == FG_OPTIMIZER_ADAMW && oc.lr == 3e-4 && oc.weight_decay == 0.01 &&
          oc.beta1 == 0.9 && oc.beta2 == 0.999 && oc.eps == 1e-8);
    CHECK_STR(read_message("[optimizer]\nname = adamw\nweight_decay = 0\n", &oc), "");
    CHECK(oc.weight_decay == 0);
    CHECK_STR(read_message("[optimizer]\nname = sgd\nmomentum = 0.9\nnesterov = true\n"
                           "weight_decay = 5e-4\n",
                           &oc),
              "");
    CHECK(oc.momentum == 0.9 && oc.nesterov && oc.weight_decay == 5e-4);
    CHECK_STR(read_message("[optimizer]\nname = adamw\nmomentum = 0.9\n", &oc),
              "cfg.ini:3: [optimizer] momentum is an sgd key but name = adamw; adamw uses "
              "beta1, beta2, eps, weight_decay");
    CHECK_STR(read_message("[optimizer]\nlr = 0.1\nbeta1 = 0.8\n", &oc),
              "cfg.ini:3: [optimizer] beta1 is an adamw key but name = sgd; sgd uses momentum, "
              "dampening, nesterov, weight_decay");
    CHECK_STR(read_message("[optimizer]\nname = sgd\nnesterov = true\n", &oc),
              "cfg.ini:3: [optimizer] nesterov = true needs momentum > 0 and dampening = 0");
    const char *msg = read_message("[optimizer]\nname = adam\n", &oc);
    CHECK(strstr(msg, "cfg.ini:2") && strstr(msg, "adam"));
    msg = read_message("[optimizer]\nlr = -1\n", &oc);
    CHECK(strstr(msg, "cfg.ini:2") && strstr(msg, "lr"));
    msg = read_message("[optimizer]\nmomentun = 0.9\n", &oc);
    CHECK(strstr(msg, "cfg.ini:2") && strstr(msg, "momentum"));
    CHECK(read_message("[optimizer]\nname = adamw\nweight_decay_params = matrices\n"
                       "no_decay = *.bias, ln_*\n", &oc)[0] == '\0');
    CHECK(oc.decay_matrices_only && strcmp(oc.no_decay, "*.bias, ln_*") == 0);
    CHECK(read_message("[optimizer]\nname = adamw\n", &oc)[0] == '\0');
    CHECK(!oc.decay_matrices_only && oc.no_decay[0] == '\0'); /* the default: all decay */
    char text[400] = "[optimizer]\nno_decay = ";
    memset(text + strlen(text), 'a', 300);
    CHECK(strstr(read_message(text, &oc), "cfg.ini:2: [optimizer] no_decay is 300 characters; "
                              "at most 255") != NULL);
    size_t n = 0;
    const fg_option *o = fg_optimizer_schema(&n);
    CHECK(o && n == 11 && strcmp(o[0].key, "name") == 0);
}

/* ---- the update rules, in double ---------------------------------------------------- */

static double grad_at(int t, int i) { return sin(1.7 * i + 0.9 * t) + 0.1 * i; }

static void sgd_reference(const fg_optimizer_config *oc, double lr, double *p)
{
    double buf[N] = {0};
    for (int t = 1; t <= STEPS; t++)
        for (int i = 0; i < N; i++) {
            double g = grad_at(t, i) + oc->weight_decay * p[i];
            if (oc->momentum != 0) {
                buf[i] = t == 1 ? g : oc->momentum * buf[i] + (1 - oc->dampening) * g;
                g = oc->nesterov ? g + oc->momentum * buf[i] : buf[i];
            }
            p[i] -= lr * g;
        }
}

static void adamw_reference(const fg_optimizer_config *oc, double lr, double *p)
{
    double m[N] = {0}, v[N] = {0};
    for (int t = 1; t <= STEPS; t++)
        for (int i = 0; i < N; i++) {
            double g = grad_at(t, i);
            p[i] *= 1 - lr * oc->weight_decay;
            m[i] = oc->beta1 * m[i] + (1 - oc->beta1) * g;
            v[i] = oc->beta2 * v[i] + (1 - oc->beta2) * g * g;
            double mh = m[i] / (1 - pow(oc->beta1, t)), vh = v[i] / (1 - pow(oc->beta2, t));
            p[i] -= lr * mh / (sqrt(vh) + oc->eps);
        }
}

/* Three steps on the backend, each over two ranges ([0, 3) and [3, N)), against the
 * reference. */
static void check_steps(tk_backend *b, const char *name, const char *text, double lr)
{
    fg_config *cfg = tk_config(text);
    fg_optimizer *opt = NULL;
    fg_error err = {0};
    CHECK_OK(fg_optimizer_create(cfg, b->be, b->bs, 0, N, &opt, &err), &err);
    fg_config_destroy(cfg);
    if (!opt)
        return;
    double ref[N];
    float p[N], g[N];
    for (int i = 0; i < N; i++)
        p[i] = (float)(ref[i] = 0.5 - 0.2 * i);
    float *p_dev = tk_dev_alloc(b, N), *g_dev = tk_dev_alloc(b, N);
    tk_upload(b, p_dev, p, sizeof p);
    CHECK(fg_optimizer_step(opt, b->queue, (float)lr, p_dev, g_dev, 0, N, &err) ==
          FG_INVALID_ARGUMENT); /* before set_step */
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++)
            g[i] = (float)grad_at(t, i);
        tk_upload(b, g_dev, g, sizeof g);
        fg_optimizer_set_step(opt, t);
        CHECK_OK(fg_optimizer_step(opt, b->queue, (float)lr, p_dev, g_dev, 0, 3, &err), &err);
        CHECK_OK(fg_optimizer_step(opt, b->queue, (float)lr, p_dev, g_dev, 3, N - 3, &err), &err);
    }
    CHECK(fg_optimizer_get_step(opt) == STEPS);
    tk_download(b, p, p_dev, sizeof p);
    const fg_optimizer_config *oc = fg_optimizer_get_config(opt);
    if (oc->kind == FG_OPTIMIZER_SGD)
        sgd_reference(oc, lr, ref);
    else
        adamw_reference(oc, lr, ref);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double e = fabs(p[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
        worst = fmax(worst, e);
        if (e > 2e-6)
            fprintf(stderr, "  %s p[%d]: %.8f, reference %.8f\n", name, i, p[i], ref[i]);
    }
    printf("  %-24s worst relative error %.2e\n", name, worst);
    CHECK(worst <= 2e-6);
    CHECK(fg_optimizer_step(opt, b->queue, (float)lr, p_dev, g_dev, 5, 3, &err) ==
          FG_INVALID_ARGUMENT); /* past the end */
    tk_dev_free(b, p_dev);
    tk_dev_free(b, g_dev);
    fg_optimizer_destroy(opt);
}

static void test_state(tk_backend *b)
{
    fg_optimizer_config oc = {.kind = FG_OPTIMIZER_ADAMW, .lr = 1e-3, .beta1 = 0.9,
                              .beta2 = 0.999, .eps = 1e-8};
    fg_optimizer *opt = NULL;
    fg_error err = {0};
    CHECK_OK(fg_optimizer_create_with(&oc, b->be, b->bs, 0, N, &opt, &err), &err);
    if (!opt)
        return;
    const char *name = NULL;
    CHECK(fg_optimizer_state_count(opt) == 2);
    float z[N];
    float *m = fg_optimizer_state(opt, 0, &name);
    CHECK(m && name && strcmp(name, "exp_avg") == 0);
    tk_download(b, z, m, sizeof z);
    for (int i = 0; i < N; i++)
        CHECK(z[i] == 0.0f); /* zeroed at creation */
    CHECK(fg_optimizer_state(opt, 1, &name) && strcmp(name, "exp_avg_sq") == 0);
    CHECK(fg_optimizer_state(opt, 2, &name) == NULL);
    CHECK(fg_optimizer_get_step(opt) == 0); /* no step made */
    fg_optimizer_set_step(opt, 42);
    CHECK(fg_optimizer_get_step(opt) == 42);
    fg_optimizer_destroy(opt);

    oc = (fg_optimizer_config){.kind = FG_OPTIMIZER_SGD, .lr = 0.1};
    CHECK_OK(fg_optimizer_create_with(&oc, b->be, b->bs, 0, N, &opt, &err), &err);
    if (opt) {
        CHECK(fg_optimizer_state_count(opt) == 0); /* plain sgd keeps no state */
        fg_optimizer_destroy(opt);
    }
}

/* STEPS AdamW steps over [0, 3) and [3, N) (across the runs' edges), plain or fused, with
 * `runs` of a region that starts 2 values before the optimizer's range (a shard's). */
static void run_steps(tk_backend *b, double wd, const fg_decay_run *runs, size_t n, int fused,
                      float *out)
{
    fg_optimizer_config oc = {.kind = FG_OPTIMIZER_ADAMW, .lr = 0.05, .weight_decay = wd,
                              .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    fg_optimizer *opt = NULL;
    fg_error err = {0};
    CHECK_OK(fg_optimizer_create_with(&oc, b->be, b->bs, 0, N, &opt, &err), &err);
    if (!opt) return;
    if (runs) CHECK_OK(fg_optimizer_set_decay_runs(opt, runs, n, 2, &err), &err);
    float g[N];
    for (int i = 0; i < N; i++) out[i] = (float)(0.5 - 0.2 * i);
    float *p_dev = tk_dev_alloc(b, N), *g_dev = tk_dev_alloc(b, N);
    tk_upload(b, p_dev, out, N * sizeof(float));
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++) g[i] = (float)grad_at(t, i);
        tk_upload(b, g_dev, g, sizeof g);
        fg_optimizer_set_step(opt, t);
        for (int part = 0; part < 2; part++) {
            size_t lo = part ? 3 : 0, cnt = part ? N - 3 : 3;
            CHECK_OK(fused ? fg_optimizer_step_fused(opt, b->queue, 0.05f, p_dev + lo, g_dev + lo,
                                                     lo, cnt, NULL, NULL, FG_F32, &err)
                           : fg_optimizer_step(opt, b->queue, 0.05f, p_dev, g_dev, lo, cnt, &err),
                     &err);
        }
    }
    tk_download(b, out, p_dev, N * sizeof(float));
    tk_dev_free(b, p_dev);
    tk_dev_free(b, g_dev);
    fg_optimizer_destroy(opt);
}

/* Weight decay per run: the decayed values bitwise a run decaying everything, the others
 * bitwise one without decay, fused and plain; runs that leave a gap are refused. */
static void test_decay_runs(tk_backend *b)
{
    /* region [0, N + 2): the optimizer's range is [2, N + 2), so relative [0, 2) decays,
     * [2, 5) does not, [5, N) does */
    const fg_decay_run runs[] = {{0, 4, 1}, {4, 7, 0}, {7, N + 2, 1}};
    float all[N], none[N], mixed[N], fused[N];
    run_steps(b, 0.3, NULL, 0, 0, all);
    run_steps(b, 0.0, NULL, 0, 0, none);
    run_steps(b, 0.3, runs, 3, 0, mixed);
    run_steps(b, 0.3, runs, 3, 1, fused);
    int differ = 0;
    for (int i = 0; i < N; i++) {
        int decays = i < 2 || i >= 5;
        CHECK(mixed[i] == (decays ? all[i] : none[i]));
        CHECK(fused[i] == mixed[i]);
        differ += all[i] != none[i];
    }
    CHECK(differ == N); /* the decay moves every value: the checks above can fail */
    fg_optimizer_config oc = {.kind = FG_OPTIMIZER_SGD, .lr = 0.1, .weight_decay = 0.1};
    fg_optimizer *opt = NULL;
    fg_error err = {0};
    CHECK_OK(fg_optimizer_create_with(&oc, b->be, b->bs, 0, N, &opt, &err), &err);
    if (!opt) return;
    const fg_decay_run gap[] = {{0, 4, 1}, {6, N + 2, 0}};
    CHECK(fg_optimizer_set_decay_runs(opt, gap, 2, 2, &err) == FG_INTERNAL);
    CHECK(strstr(err.message, "cover") != NULL);
    fg_optimizer_destroy(opt);
}

int main(int argc, char **argv)
{
    test_config();
    if (argc > 1) {
        tk_backend b;
        if (tk_backend_open(&b, argv[1]) != 0)
            return 1;
        check_steps(&b, "sgd", "[optimizer]\nname = sgd\n", 0.1);
        check_steps(&b, "sgd momentum dampening wd",
                    "[optimizer]\nmomentum = 0.9\ndampening = 0.1\nweight_decay = 0.01\n", 0.05);
        check_steps(&b, "sgd nesterov wd",
                    "[optimizer]\nmomentum = 0.8\nnesterov = true\nweight_decay = 0.05\n", 0.1);
        check_steps(&b, "adamw", "[optimizer]\nname = adamw\n", 0.01);
        check_steps(&b, "adamw betas wd",
                    "[optimizer]\nname = adamw\nbeta1 = 0.8\nbeta2 = 0.99\neps = 1e-6\n"
                    "weight_decay = 0.1\n",
                    0.05);
        test_state(&b);
        test_decay_runs(&b);
        tk_backend_close(&b);
    }
    return fg_test_report(argc > 1 ? "model.optimizer" : "model.optimizer_config");
}
