/* Gradients of every layer kind against central finite differences of the loss, on the
 * CPU backend: weights, biases, and the layer's input gradient (checked both through the
 * weights of a layer before it and directly against the model input).
 * Usage: test_model_gradcheck BACKEND.so CASE */
#include <math.h>
#include <stdlib.h>

#include "testkit.h"

#define MAX_CHECKED 24 /* elements per tensor: all of a small one, a spread of a big one */
#define RTOL 1e-2
#define ATOL 1e-3

typedef struct gc_case {
    const char *name;
    const char *cfg;
    int64_t shape[3];
    int rank;
    int classes;
    int batch;
    double eps;
} gc_case;

#define PRE_LINEAR "[layer.pre]\ntype = linear\nout_features = 7\n"
#define PRE_CONV "[layer.pre]\ntype = conv2d\nout_channels = 3\nkernel_size = 3\npadding = 1\n"
#define HEAD "[layer.flat]\ntype = flatten\n[layer.head]\ntype = linear\nout_features = 3\n"
#define ACT_CASE(kind, eps)                                                                      \
    {kind, PRE_LINEAR "[layer.act]\ntype = " kind "\n[layer.head]\ntype = linear\n"           \
                      "out_features = 3\n",                                                   \
     {6}, 1, 3, 4, eps}

static const gc_case cases[] = {
    {"linear", PRE_LINEAR "[layer.fc]\ntype = linear\nout_features = 4\n", {6}, 1, 4, 4, 1e-2},
    {"linear_nobias", PRE_LINEAR "[layer.fc]\ntype = linear\nout_features = 4\nbias = false\n",
     {6}, 1, 4, 3, 1e-2},
    {"conv2d",
     PRE_CONV "[layer.conv]\ntype = conv2d\nout_channels = 4\nkernel_size = 3\nstride = 2\n"
              "padding = 1\n" HEAD,
     {2, 6, 6}, 3, 3, 3, 1e-2},
    {"conv2d_nobias",
     PRE_CONV "[layer.conv]\ntype = conv2d\nout_channels = 2\nkernel_size = 2\nbias = false\n"
              HEAD,
     {2, 5, 5}, 3, 3, 2, 1e-2},
    {"maxpool2d", PRE_CONV "[layer.pool]\ntype = maxpool2d\nkernel_size = 2\n" HEAD, {2, 6, 6},
     3, 3, 3, 1e-3},
    {"avgpool2d",
     PRE_CONV "[layer.pool]\ntype = avgpool2d\nkernel_size = 3\nstride = 2\npadding = 1\n" HEAD,
     {2, 6, 6}, 3, 3, 3, 1e-2},
    {"batchnorm2d", PRE_CONV "[layer.bn]\ntype = batchnorm\n" HEAD, {2, 5, 5}, 3, 3, 3, 1e-2},
    {"batchnorm1d",
     PRE_LINEAR "[layer.bn]\ntype = batchnorm\n[layer.head]\ntype = linear\nout_features = 3\n",
     {6}, 1, 3, 5, 1e-2},
    {"dropout",
     PRE_LINEAR "[layer.drop]\ntype = dropout\np = 0.3\n[layer.head]\ntype = linear\n"
                "out_features = 3\n",
     {6}, 1, 3, 4, 1e-2},
    ACT_CASE("relu", 1e-3),
    ACT_CASE("gelu", 1e-2),
    ACT_CASE("tanh", 1e-2),
    ACT_CASE("sigmoid", 1e-2),
    {"layernorm", "[layer.pre]\ntype = linear\nout_features = 6\n[layer.ln]\ntype = layernorm\n"
     HEAD, {5, 4}, 2, 3, 3, 1e-2},
    {"rmsnorm", "[layer.pre]\ntype = linear\nout_features = 6\n[layer.ln]\ntype = rmsnorm\n"
     HEAD, {5, 4}, 2, 3, 3, 1e-2},
    {"position_embedding",
     "[layer.pre]\ntype = linear\nout_features = 6\n[layer.wpe]\ntype = position_embedding\n"
     "max_positions = 7\n" HEAD, {5, 4}, 2, 3, 3, 1e-2},
    {"linear_sequence", "[layer.pre]\ntype = linear\nout_features = 6\n[layer.fc]\n"
     "type = linear\nout_features = 5\n" HEAD, {4, 3}, 2, 3, 3, 1e-2},
    {"transformer_block",
     "[layer.pre]\ntype = linear\nout_features = 8\n[layer.h]\ntype = transformer_block\n"
     "heads = 2\n" HEAD, {5, 4}, 2, 3, 3, 1e-2},
    {"transformer_block_full",
     "[layer.pre]\ntype = linear\nout_features = 6\n[layer.h]\ntype = transformer_block\n"
     "heads = 3\ncausal = false\nmlp_ratio = 2\n" HEAD, {3, 5}, 2, 3, 2, 1e-2},
    /* a ratio past 4 and one below: the saved tensors and backward's scratch follow it */
    {"transformer_block_ratio6",
     "[layer.pre]\ntype = linear\nout_features = 6\n[layer.h]\ntype = transformer_block\n"
     "heads = 2\nmlp_ratio = 6\nrepeat = 2\n" HEAD, {4, 3}, 2, 3, 2, 1e-2},
    {"transformer_block_ratio1_recompute",
     "[layer.pre]\ntype = linear\nout_features = 6\n[layer.h]\ntype = transformer_block\n"
     "heads = 2\nmlp_ratio = 1\nrepeat = 2\nrecompute = true\n" HEAD, {4, 3}, 2, 3, 2, 1e-2},
    {"transformer_block_recompute",
     "[layer.pre]\ntype = linear\nout_features = 8\n[layer.h]\ntype = transformer_block\n"
     "heads = 2\nrepeat = 2\nrecompute = true\n" HEAD, {5, 4}, 2, 3, 3, 1e-2},
    /* Llama's options together: RMSNorm, SwiGLU, grouped-query attention (4 query heads on
     * 2 key/value heads), rope, no biases; then multi-query (1 key/value head) with rope over
     * head_dim 4 (two frequencies), biases kept, recomputed, two blocks */
    {"transformer_block_llama",
     "[layer.pre]\ntype = linear\nout_features = 8\n[layer.h]\ntype = transformer_block\n"
     "heads = 4\nkv_heads = 2\nnorm = rmsnorm\nmlp = swiglu\nmlp_hidden = 12\n"
     "position = rope\nbias = false\n" HEAD, {5, 4}, 2, 3, 3, 1e-2},
    {"transformer_block_llama_mqa_recompute",
     "[layer.pre]\ntype = linear\nout_features = 8\n[layer.h]\ntype = transformer_block\n"
     "heads = 2\nkv_heads = 1\nnorm = rmsnorm\nmlp = swiglu\nmlp_hidden = 6\n"
     "position = rope\nrope_theta = 100\nrepeat = 2\nrecompute = true\n" HEAD,
     {5, 4}, 2, 3, 2, 1e-2},
    /* rope_scaling = llama3 (rope_freq_*): at head_dim 4 one pair blended, one divided */
    {"transformer_block_llama_rope_scaled",
     "[layer.pre]\ntype = linear\nout_features = 8\n[layer.h]\ntype = transformer_block\n"
     "heads = 2\nkv_heads = 1\nnorm = rmsnorm\nmlp = swiglu\nmlp_hidden = 6\n"
     "position = rope\nrope_scaling = llama3\nrope_factor = 8\nrope_low_freq_factor = 1\n"
     "rope_high_freq_factor = 4\nrope_original_max_position_embeddings = 16\nbias = false\n"
     HEAD, {5, 4}, 2, 3, 3, 1e-2},
    {"net",
     "[layer.conv1]\ntype = conv2d\nout_channels = 4\nkernel_size = 3\npadding = 1\n"
     "[layer.bn1]\ntype = batchnorm\n[layer.relu1]\ntype = relu\n"
     "[layer.pool1]\ntype = maxpool2d\nkernel_size = 2\n[layer.flat]\ntype = flatten\n"
     "[layer.drop]\ntype = dropout\np = 0.3\n[layer.fc]\ntype = linear\nout_features = 5\n",
     {1, 8, 8}, 3, 5, 4, 1e-3},
    /* graphs: the stem's output is read by conv_a and by the add, so its gradient is the
     * sum of both paths (and reaches the stem's weights and the input through it) */
    {"residual",
     "[layer.stem]\ntype = conv2d\nout_channels = 3\nkernel_size = 3\npadding = 1\n"
     "[layer.conv_a]\ntype = conv2d\nout_channels = 3\nkernel_size = 3\npadding = 1\n"
     "[layer.bn_a]\ntype = batchnorm\n[layer.relu_a]\ntype = relu\n"
     "[layer.conv_b]\ntype = conv2d\nout_channels = 3\nkernel_size = 3\npadding = 1\n"
     "[layer.bn_b]\ntype = batchnorm\n"
     "[layer.sum]\ntype = add\ninput = stem, bn_b\n[layer.relu]\ntype = relu\n" HEAD,
     {2, 5, 5}, 3, 3, 3, 1e-3},
    /* one tensor read twice by the same add: d(x + x)/dx = 2 */
    {"add_same", PRE_LINEAR "[layer.twice]\ntype = add\ninput = pre, pre\n"
                 "[layer.head]\ntype = linear\nout_features = 3\n", {6}, 1, 3, 4, 1e-2},
    /* a skip over a flatten (an alias of the conv's memory) and a linear */
    {"skip_alias",
     PRE_CONV "[layer.flat]\ntype = flatten\n[layer.fc]\ntype = linear\nout_features = 12\n"
              "[layer.tanh]\ntype = tanh\n[layer.sum]\ntype = add\ninput = tanh, flat\n"
              "[layer.head]\ntype = linear\nout_features = 3\n",
     {2, 2, 2}, 3, 3, 3, 1e-2},
};

typedef struct gc_stats {
    int checked, failed;
    double worst;
} gc_stats;

/* Compares an analytic gradient with the central difference of the loss at one value. */
static void check_value(tk_net *n, float *host, float *dev, size_t i, float analytic, double eps,
                        const char *what, gc_stats *s)
{
    float orig = host[i], v;
    v = (float)(orig + eps);
    tk_upload(n->b, dev + i, &v, sizeof v);
    double fp = tk_net_loss(n, 1);
    v = (float)(orig - eps);
    tk_upload(n->b, dev + i, &v, sizeof v);
    double fm = tk_net_loss(n, 1);
    tk_upload(n->b, dev + i, &orig, sizeof orig);
    double numeric = (fp - fm) / (2 * eps), a = analytic;
    double err = fabs(a - numeric), scale = fmax(fabs(a), fabs(numeric));
    double rel = err / (ATOL / RTOL + scale);
    if (rel > s->worst)
        s->worst = rel;
    s->checked++;
    if (err > ATOL + RTOL * scale) {
        s->failed++;
        fprintf(stderr, "  %s[%zu]: analytic %.6g, numeric %.6g\n", what, i, a, numeric);
    }
}

static void check_range(tk_net *n, float *host, float *dev, const float *analytic, size_t count,
                        double eps, const char *what)
{
    gc_stats s = {0};
    size_t step = count > MAX_CHECKED ? count / MAX_CHECKED : 1;
    for (size_t i = 0; i < count; i += step)
        check_value(n, host, dev, i, analytic[i], eps, what, &s);
    printf("  %-20s %3d values checked, worst |a-n|/(0.1+max) %.2e (limit %.0e)\n", what,
           s.checked, s.worst, RTOL);
    if (s.failed) {
        fprintf(stderr, "%s: %d of %d gradients differ from finite differences\n", what, s.failed,
                s.checked);
        fg_test_failures++;
    }
}

static void run_case(tk_backend *b, const gc_case *c)
{
    tk_net n;
    if (tk_net_create(&n, b, c->cfg, c->shape, c->rank, c->classes, c->batch, 42) != 0)
        return;
    fg_replica_set_step(n.rep, 7);
    fg_replica_set_need_input_grad(n.rep, 1);
    size_t np = fg_model_params_size(n.model), nx = (size_t)n.batch * n.sample;
    float *grads = calloc(np, sizeof(float)), *dx = calloc(nx, sizeof(float));
    if (tk_net_grads(&n, 0, grads) == 0) {
        CHECK(fg_replica_input_grad(n.rep) != NULL);
        tk_download(b, dx, fg_replica_input_grad(n.rep), nx * sizeof(float));
        float *dev = fg_replica_params(n.rep);
        for (size_t t = 0; t < fg_model_tensor_count(n.model); t++) {
            const fg_tensor_info *ti = fg_model_tensor(n.model, t);
            if (!ti->is_buffer)
                check_range(&n, n.params + ti->offset, dev + ti->offset, grads + ti->offset,
                            ti->numel, c->eps, ti->name);
        }
        check_range(&n, n.x, n.x_dev, dx, nx, c->eps, "input");
    }
    free(grads);
    free(dx);
    tk_net_destroy(&n);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s BACKEND.so CASE\n", argv[0]);
        return 2;
    }
    tk_backend b;
    if (tk_backend_open(&b, argv[1]) != 0)
        return 1;
    const gc_case *c = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].name, argv[2]) == 0)
            c = &cases[i];
    if (!c) {
        fprintf(stderr, "no case %s\n", argv[2]);
        return 2;
    }
    printf("gradcheck %s\n", c->name);
    run_case(&b, c);
    tk_backend_close(&b);
    return fg_test_report(c->name);
}
