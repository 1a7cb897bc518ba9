/* [model] scaled_residual_init: GPT-2's rule (nanoGPT's c_proj.weight) draws every block's
 * attn.proj.weight and mlp.proj.weight with init_std / sqrt(2 * blocks); every other tensor
 * keeps its bits, and without the key nothing moves. Refused, naming the key, on a model
 * without blocks and on blocks drawn uniformly. */
#include <math.h>
#include <stdlib.h>

#include "testkit.h"

#define T 4
#define WIDTH 64
#define BLOCKS 3
#define STD 0.02

static char *gpt_config(const char *model_keys, const char *block_keys)
{
    static char text[1024];
    snprintf(text, sizeof text,
             "[model]\n%s\n[layer.pre]\ntype = linear\nout_features = %d\n"
             "[layer.h]\ntype = transformer_block\nheads = 4\nrepeat = %d\n%s\n"
             "[layer.flat]\ntype = flatten\n[layer.head]\ntype = linear\nout_features = 3\n",
             model_keys, WIDTH, BLOCKS, block_keys);
    return text;
}

typedef struct gpt {
    fg_config *cfg;
    fg_model *m;
    float *params, *buffers;
} gpt;

static int gpt_create(gpt *g, const char *model_keys)
{
    fg_error err = {0};
    memset(g, 0, sizeof *g);
    if (!(g->cfg = tk_config(gpt_config(model_keys, "init_std = 0.02"))))
        return -1;
    CHECK_OK(fg_model_build(g->cfg, (int64_t[]){T, 8}, 2, 3, &g->m, &err), &err);
    if (!g->m)
        return -1;
    g->params = malloc(fg_model_params_size(g->m) * sizeof(float));
    g->buffers = malloc((fg_model_buffers_size(g->m) + 1) * sizeof(float));
    fg_model_init_params(g->m, 42, g->params, g->buffers);
    return 0;
}

static void gpt_destroy(gpt *g)
{
    fg_model_destroy(g->m);
    fg_config_destroy(g->cfg);
    free(g->params);
    free(g->buffers);
}

static int is_projection(const char *name)
{
    size_t n = strlen(name);
    return (n > 17 && strcmp(name + n - 17, ".attn.proj.weight") == 0) ||
           (n > 16 && strcmp(name + n - 16, ".mlp.proj.weight") == 0);
}

static double empirical_std(const float *x, size_t n)
{
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
    return sqrt(sq / (double)n);
}

static void test_scaled(void)
{
    gpt plain, off, scaled;
    if (gpt_create(&plain, "") || gpt_create(&off, "scaled_residual_init = false") ||
        gpt_create(&scaled, "scaled_residual_init = true"))
        return;
    size_t bytes = fg_model_params_size(plain.m) * sizeof(float);
    CHECK(memcmp(plain.params, off.params, bytes) == 0); /* false: the default's bits */
    int projections = 0;
    for (size_t i = 0; i < fg_model_tensor_count(scaled.m); i++) {
        const fg_tensor_info *t = fg_model_tensor(scaled.m, i);
        const float *a = scaled.params + t->offset, *b = plain.params + t->offset;
        if (t->is_buffer) continue;
        if (!is_projection(t->name)) {
            if (memcmp(a, b, t->numel * sizeof(float)) != 0) {
                printf("FAIL: %s changed under scaled_residual_init\n", t->name);
                fg_test_failures++;
            }
            continue;
        }
        projections++;
        double want = STD / sqrt(2.0 * BLOCKS), got = empirical_std(a, t->numel);
        double before = empirical_std(b, t->numel);
        /* the std of n normal draws has a standard error of std / sqrt(2n) */
        double se = want / sqrt(2.0 * (double)t->numel);
        printf("  %-18s n=%6zu std %.6f (want %.6f, 5 se %.6f); unscaled %.6f\n", t->name,
               t->numel, got, want, 5 * se, before);
        CHECK(fabs(got - want) < 5 * se);
        CHECK(fabs(before - STD) < 5 * STD / sqrt(2.0 * (double)t->numel));
    }
    CHECK(projections == 2 * BLOCKS);
    gpt_destroy(&plain);
    gpt_destroy(&off);
    gpt_destroy(&scaled);
}

static void expect_refusal(const char *text, const char *message)
{
    fg_config *cfg = tk_config(text);
    fg_model *m = NULL;
    fg_error err = {0};
    if (!cfg) return;
    CHECK_STATUS(fg_model_build(cfg, (int64_t[]){T, 8}, 2, 3, &m, &err), FG_INVALID_ARGUMENT);
    if (!strstr(err.message, message)) {
        printf("FAIL: '%s', want '%s'\n", err.message, message);
        fg_test_failures++;
    }
    fg_model_destroy(m);
    fg_config_destroy(cfg);
}

static void test_refusals(void)
{
    expect_refusal(gpt_config("scaled_residual_init = true", ""),
                   "[model] scaled_residual_init = true scales GPT-2's normal initialisation, "
                   "but [layer.h] draws h.0.attn.proj.weight uniformly; set init_std");
    expect_refusal("[model]\nscaled_residual_init = true\n[layer.fc]\ntype = linear\n"
                   "out_features = 3\n",
                   "[model] scaled_residual_init = true scales the projections of "
                   "transformer_block layers, and the model has none");
}

int main(void)
{
    test_scaled();
    test_refusals();
    return fg_test_report("model.residual_init");
}
