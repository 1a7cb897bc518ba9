/* PyTorch's default initialisation: U(+-1/sqrt(fan_in)) for linear and conv weights and
 * biases, ones and zeros for batchnorm; bitwise the same for a seed, different across
 * seeds; the generator is splitmix64. */
#include <math.h>
#include <stdlib.h>

#include "init.h"
#include "testkit.h"

static const char *net =
    "[model]\ninput = 3,12,12\n"
    "[layer.conv]\ntype = conv2d\nout_channels = 40\nkernel_size = 5\n"
    "[layer.bn]\ntype = batchnorm\n"
    "[layer.flat]\ntype = flatten\n"
    "[layer.fc]\ntype = linear\nout_features = 10\n";

typedef struct init_net {
    fg_config *cfg;
    fg_model *m;
    float *params, *buffers;
} init_net;

static int init_net_create(init_net *n, uint64_t seed)
{
    fg_error err = {0};
    memset(n, 0, sizeof *n);
    if (!(n->cfg = tk_config(net)))
        return -1;
    CHECK_OK(fg_model_build(n->cfg, NULL, 0, 10, &n->m, &err), &err);
    if (!n->m)
        return -1;
    n->params = malloc(fg_model_params_size(n->m) * sizeof(float));
    n->buffers = malloc(fg_model_buffers_size(n->m) * sizeof(float));
    /* garbage first: init must set every float, padding included */
    memset(n->params, 0xff, fg_model_params_size(n->m) * sizeof(float));
    memset(n->buffers, 0xff, fg_model_buffers_size(n->m) * sizeof(float));
    fg_model_init_params(n->m, seed, n->params, n->buffers);
    return 0;
}

static void init_net_destroy(init_net *n)
{
    fg_model_destroy(n->m);
    fg_config_destroy(n->cfg);
    free(n->params);
    free(n->buffers);
}

static const fg_tensor_info *find(const fg_model *m, const char *name)
{
    for (size_t i = 0; i < fg_model_tensor_count(m); i++)
        if (strcmp(fg_model_tensor(m, i)->name, name) == 0)
            return fg_model_tensor(m, i);
    fprintf(stderr, "no tensor %s\n", name);
    fg_test_failures++;
    return NULL;
}

/* U(-b, b): inside the bound, mean ~0, variance ~b^2/3, and the range is used. */
static void check_uniform(const init_net *n, const char *name, double fan_in)
{
    const fg_tensor_info *t = find(n->m, name);
    if (!t)
        return;
    CHECK(t->init == FG_INIT_UNIFORM);
    double b = 1.0 / sqrt(fan_in), sum = 0, sq = 0, lo = 1, hi = -1;
    const float *x = n->params + t->offset;
    for (size_t i = 0; i < t->numel; i++) {
        CHECK(fabs(x[i]) <= b);
        sum += x[i];
        sq += (double)x[i] * x[i];
        lo = fmin(lo, x[i]);
        hi = fmax(hi, x[i]);
    }
    double nn = (double)t->numel, mean = sum / nn, var = sq / nn - mean * mean;
    double se = b / sqrt(3 * nn); /* standard error of the mean */
    printf("  %-12s n=%5zu bound %.4f mean %+.5f (4 se %.5f) var/(b^2/3) %.3f range [%.4f, %.4f]\n",
           name, t->numel, b, mean, 4 * se, var / (b * b / 3), lo, hi);
    CHECK(fabs(mean) < 4 * se);
    if (nn >= 1000)
        CHECK(fabs(var / (b * b / 3) - 1) < 0.1);
    CHECK(lo < -0.8 * b && hi > 0.8 * b);
}

static void check_constant(const init_net *n, const char *name, float v)
{
    const fg_tensor_info *t = find(n->m, name);
    if (!t)
        return;
    const float *x = (t->is_buffer ? n->buffers : n->params) + t->offset;
    for (size_t i = 0; i < t->numel; i++)
        CHECK(x[i] == v);
}

/* Floats not covered by any tensor (alignment padding) are zero. */
static void check_padding(const init_net *n)
{
    size_t np = fg_model_params_size(n->m);
    char *covered = calloc(np, 1);
    for (size_t i = 0; i < fg_model_tensor_count(n->m); i++) {
        const fg_tensor_info *t = fg_model_tensor(n->m, i);
        if (!t->is_buffer)
            memset(covered + t->offset, 1, t->numel);
    }
    size_t pad = 0;
    for (size_t i = 0; i < np; i++)
        if (!covered[i]) {
            pad++;
            CHECK(n->params[i] == 0.0f);
        }
    CHECK(pad > 0); /* conv.bias (40) leaves 8 floats before bn.weight */
    free(covered);
}

int main(void)
{
    /* splitmix64 from state 0: the reference's first output */
    CHECK(fg_rng_u64(0, 0) == 0xe220a8397b1dcdafull);
    CHECK(fg_mix64(0) == 0);

    init_net a, b, c;
    if (init_net_create(&a, 1234) || init_net_create(&b, 1234) || init_net_create(&c, 1235))
        return fg_test_report("model.init");
    check_uniform(&a, "conv.weight", 3 * 5 * 5);
    check_uniform(&a, "conv.bias", 3 * 5 * 5);
    check_uniform(&a, "fc.weight", 40 * 8 * 8);
    check_uniform(&a, "fc.bias", 40 * 8 * 8);
    check_constant(&a, "bn.weight", 1.0f);
    check_constant(&a, "bn.bias", 0.0f);
    check_constant(&a, "bn.running_mean", 0.0f);
    check_constant(&a, "bn.running_var", 1.0f);
    check_padding(&a);

    size_t np = fg_model_params_size(a.m);
    CHECK(memcmp(a.params, b.params, np * sizeof(float)) == 0);
    CHECK(memcmp(a.buffers, b.buffers, fg_model_buffers_size(a.m) * sizeof(float)) == 0);
    size_t same = 0, random = 0;
    for (size_t i = 0; i < fg_model_tensor_count(a.m); i++) {
        const fg_tensor_info *t = fg_model_tensor(a.m, i);
        if (t->init != FG_INIT_UNIFORM)
            continue;
        for (size_t j = 0; j < t->numel; j++) {
            same += a.params[t->offset + j] == c.params[t->offset + j];
            random++;
        }
    }
    printf("  seed 1234 vs 1235: %zu of %zu random values equal\n", same, random);
    CHECK(random > 0 && same < random / 1000 + 1);
    /* tensors draw from their own streams: conv.weight and conv.bias share a bound, so one
     * stream would give them the same first values */
    const fg_tensor_info *w = find(a.m, "conv.weight"), *bias = find(a.m, "conv.bias");
    if (w && bias)
        CHECK(memcmp(a.params + w->offset, a.params + bias->offset, 4 * sizeof(float)) != 0);

    init_net_destroy(&a);
    init_net_destroy(&b);
    init_net_destroy(&c);
    return fg_test_report("model.init");
}
