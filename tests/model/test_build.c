/* fg_model_build: every shape error is found at build time with the section's file:line;
 * the flat layout, names and parameter counts of a good model; the schemas. */
#include <math.h>
#include <stdlib.h>

#include "layer.h"
#include "testkit.h"

/* Builds text for `classes` (input from [model] or `shape`) and returns the error message
 * ("" on success); the model is destroyed. */
static const char *build_message(const char *text, const int64_t *shape, int rank, int classes)
{
    static fg_error err;
    memset(&err, 0, sizeof err);
    fg_config *cfg = tk_config(text);
    if (!cfg)
        return "(no config)";
    fg_model *m = NULL;
    fg_status st = fg_model_build(cfg, shape, rank, classes, &m, &err);
    if (st == FG_OK) {
        CHECK(m != NULL);
        fg_model_destroy(m);
        err.message[0] = '\0';
    } else {
        CHECK(m == NULL);
        CHECK(st == FG_INVALID_ARGUMENT);
    }
    fg_config_destroy(cfg);
    return err.message;
}

/* line 1..: a LeNet-like stack whose pool2 gives (64, 5, 5) */
#define CONV_STACK                                                                            \
    "[model]\n"                                           /* 1 */                            \
    "input = 1,28,28\n"                                   /* 2 */                            \
    "[layer.conv1]\ntype = conv2d\nout_channels = 32\nkernel_size = 5\n" /* 3-6 */           \
    "[layer.pool1]\ntype = maxpool2d\nkernel_size = 2\n" /* 7-9 */                           \
    "[layer.conv2]\ntype = conv2d\nout_channels = 64\nkernel_size = 3\n" /* 10-13 */         \
    "[layer.pool2]\ntype = maxpool2d\nkernel_size = 2\n" /* 14-16 */

static void test_linear_after_conv(void)
{
    CHECK_STR(build_message(CONV_STACK "[layer.fc1]\n"    /* 17 */
                                       "type = linear\nin_features = 3136\nout_features = 10\n",
                            NULL, 0, 10),
              "cfg.ini:17: [layer.fc1] expects 3136 input features but [layer.pool2] gives "
              "(64, 5, 5) = 1600; did you forget a flatten or change a conv?");
    CHECK_STR(build_message(CONV_STACK "[layer.fc1]\ntype = linear\nout_features = 10\n", NULL, 0,
                            10),
              "cfg.ini:17: [layer.fc1] (linear) needs a flat input but [layer.pool2] gives "
              "(64, 5, 5) = 1600 values; add a layer with type = flatten before it");
    /* in_features right and a flatten: fine */
    CHECK_STR(build_message(CONV_STACK "[layer.flat]\ntype = flatten\n"
                                       "[layer.fc1]\ntype = linear\nin_features = 1600\n"
                                       "out_features = 10\n",
                            NULL, 0, 10),
              "");
    /* flat but the wrong count */
    CHECK_STR(build_message("[layer.a]\ntype = linear\nout_features = 30\n"
                            "[layer.b]\ntype = linear\nin_features = 20\nout_features = 3\n",
                            (int64_t[]){8}, 1, 3),
              "cfg.ini:4: [layer.b] expects 20 input features but [layer.a] gives (30) = 30; "
              "did you forget a flatten or change a conv?");
}

static void test_window_errors(void)
{
    CHECK_STR(build_message("[model]\ninput = 784\n"
                            "[layer.conv1]\ntype = conv2d\nout_channels = 4\nkernel_size = 3\n",
                            NULL, 0, 10),
              "cfg.ini:3: [layer.conv1] (conv2d) needs a (channels, height, width) input but "
              "[model] input gives (784); set [model] input = C,H,W or remove the flatten "
              "before it");
    CHECK_STR(build_message("[layer.f]\ntype = flatten\n"
                            "[layer.p]\ntype = avgpool2d\nkernel_size = 2\n",
                            (int64_t[]){1, 4, 4}, 3, 10),
              "cfg.ini:3: [layer.p] (avgpool2d) needs a (channels, height, width) input but "
              "[layer.f] gives (16)");
    CHECK_STR(build_message("[layer.pool]\ntype = maxpool2d\nkernel_size = 5\n",
                            (int64_t[]){1, 4, 4}, 3, 10),
              "cfg.ini:1: [layer.pool] kernel_size 5 is larger than its input: [model] input "
              "gives (1, 4, 4), padded by 0 to 4x4");
    CHECK_STR(build_message("[layer.c]\ntype = conv2d\nout_channels = 2\nkernel_size = 7\n"
                            "padding = 1\n",
                            (int64_t[]){3, 4, 9}, 3, 10),
              "cfg.ini:1: [layer.c] kernel_size 7 is larger than its input: [model] input gives "
              "(3, 4, 9), padded by 1 to 6x11");
    CHECK_STR(build_message("[layer.pool]\ntype = maxpool2d\nkernel_size = 2\npadding = 2\n",
                            (int64_t[]){1, 4, 4}, 3, 10),
              "cfg.ini:4: [layer.pool] padding = 2 is more than half of kernel_size = 2");
}

static void test_classes(void)
{
    CHECK_STR(build_message("[layer.fc1]\ntype = linear\nout_features = 84\n", (int64_t[]){20},
                            1, 10),
              "cfg.ini:1: [layer.fc1] is the last layer and gives 84 outputs but the data set "
              "has 10 classes; its output features must equal num_classes");
    CHECK_STR(build_message("[layer.c]\ntype = conv2d\nout_channels = 2\nkernel_size = 3\n",
                            (int64_t[]){1, 5, 5}, 3, 10),
              "cfg.ini:1: [layer.c] is the last layer and gives (2, 3, 3), but the model must "
              "end in 10 class scores per sample; end with a flatten and a linear with "
              "out_features = 10");
    CHECK_STR(build_message("[trainer]\nmax_epochs = 1\n", (int64_t[]){20}, 1, 10),
              "cfg.ini: the model has no layers; add [layer.NAME] sections with type = one of "
              "linear, conv2d, maxpool2d, avgpool2d, batchnorm, dropout, flatten, relu, gelu, "
              "tanh, sigmoid, add, layernorm, rmsnorm, embedding, position_embedding, "
              "transformer_block");
}

static void test_input(void)
{
    /* [model] input may reshape the data set's samples, never change their size */
    CHECK_STR(build_message("[model]\ninput = 784\n[layer.fc]\ntype = linear\nout_features = 10\n",
                            (int64_t[]){1, 28, 28}, 3, 10),
              "");
    CHECK_STR(build_message("[model]\ninput = 1, 28,28\n[layer.fc]\ntype = linear\n"
                            "out_features = 10\n",
                            (int64_t[]){784}, 1, 10),
              "cfg.ini:3: [layer.fc] (linear) needs a flat input but [model] input gives "
              "(1, 28, 28) = 784 values; add a layer with type = flatten before it");
    CHECK_STR(build_message("[model]\ninput = 1,28,27\n[layer.fc]\ntype = linear\n"
                            "out_features = 10\n",
                            (int64_t[]){784}, 1, 10),
              "cfg.ini:2: [model] input = 1,28,27 (1, 28, 27) holds 756 values but the data "
              "set's samples are (784) = 784");
    CHECK_STR(build_message("[model]\ninput = 1,x\n[layer.fc]\ntype = linear\nout_features = 2\n",
                            NULL, 0, 2),
              "cfg.ini:2: [model] input = 1,x: 'x' is not a positive integer");
    CHECK_STR(build_message("[layer.fc]\ntype = linear\nout_features = 2\n", NULL, 0, 2),
              "cfg.ini: [model] input is not set and no sample shape was given; set input = "
              "C,H,W (or F)");
}

static void test_keys(void)
{
    CHECK_STR(build_message("[layer.fc1]\ntype = linaer\nout_features = 10\n", (int64_t[]){4}, 1,
                            10),
              "cfg.ini:2: [layer.fc1] unknown layer type 'linaer'; did you mean 'linear'? "
              "(types: linear, conv2d, maxpool2d, avgpool2d, batchnorm, dropout, flatten, relu, "
              "gelu, tanh, sigmoid, add, layernorm, rmsnorm, embedding, position_embedding, "
              "transformer_block)");
    CHECK_STR(build_message("[layer.fc1]\nout_features = 10\n", (int64_t[]){4}, 1, 10),
              "cfg.ini:1: [layer.fc1] has no 'type'; set type = one of linear, conv2d, "
              "maxpool2d, avgpool2d, batchnorm, dropout, flatten, relu, gelu, tanh, sigmoid, add, "
              "layernorm, rmsnorm, embedding, position_embedding, transformer_block");
    /* the schemas reach the validator: unknown keys, missing and out-of-range values */
    const char *msg = build_message("[layer.fc1]\ntype = linear\nout_feature = 10\n",
                                    (int64_t[]){4}, 1, 10);
    CHECK(strstr(msg, "cfg.ini:3") && strstr(msg, "out_feature") && strstr(msg, "out_features"));
    msg = build_message("[layer.fc1]\ntype = linear\n", (int64_t[]){4}, 1, 10);
    CHECK(strstr(msg, "out_features") != NULL);
    msg = build_message("[layer.d]\ntype = dropout\np = 1\n[layer.fc]\ntype = linear\n"
                        "out_features = 2\n",
                        (int64_t[]){4}, 1, 2);
    CHECK_STR(msg, "cfg.ini:3: [layer.d] p = 1 is outside [0, 1)");
    msg = build_message("[layer.c]\ntype = conv2d\nout_channels = 0\nkernel_size = 3\n",
                        (int64_t[]){1, 5, 5}, 3, 2);
    CHECK(strstr(msg, "cfg.ini:3") && strstr(msg, "out_channels"));
}

static void test_layout(void)
{
    const char *text = CONV_STACK "[layer.bn2]\ntype = batchnorm\n"
                                  "[layer.flat]\ntype = flatten\n"
                                  "[layer.drop]\ntype = dropout\n"
                                  "[layer.fc1]\ntype = linear\nout_features = 10\nbias = no\n";
    fg_config *cfg = tk_config(text);
    fg_model *m = NULL;
    fg_error err = {0};
    CHECK_OK(fg_model_build(cfg, (int64_t[]){1, 28, 28}, 3, 10, &m, &err), &err);
    if (!m) {
        fg_config_destroy(cfg);
        return;
    }
    CHECK(fg_model_layer_count(m) == 8);
    size_t expect = 32 * 25 + 32 + 64 * 32 * 9 + 64 + 64 + 64 + 1600 * 10;
    CHECK(fg_model_param_count(m) == expect);
    const char *names[] = {"conv1.weight", "conv1.bias",       "conv2.weight",
                           "conv2.bias",   "bn2.weight",       "bn2.bias",
                           "bn2.running_mean", "bn2.running_var", "fc1.weight"};
    CHECK(fg_model_tensor_count(m) == 9);
    size_t params_end = 0, buffers_end = 0, numel = 0;
    for (size_t i = 0; i < fg_model_tensor_count(m) && i < 9; i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        CHECK_STR(t->name, names[i]);
        CHECK(t->offset % FG_TENSOR_ALIGN == 0);
        size_t *end = t->is_buffer ? &buffers_end : &params_end;
        CHECK(t->offset >= *end); /* no overlap, in order */
        *end = t->offset + t->numel;
        numel += t->is_buffer ? 0 : t->numel;
    }
    CHECK(numel == expect);
    CHECK(fg_model_params_size(m) == params_end);
    CHECK(fg_model_buffers_size(m) == buffers_end);
    const fg_tensor_info *w = fg_model_tensor(m, 2);
    CHECK(w->rank == 4 && w->shape[0] == 64 && w->shape[1] == 32 && w->shape[2] == 3 &&
          w->shape[3] == 3);
    CHECK(fg_model_tensor(m, 6)->is_buffer && fg_model_tensor(m, 7)->is_buffer);
    CHECK(fg_model_tensor(m, 1)->offset == 800); /* 32*25 = 800, already aligned */
    CHECK(fg_model_tensor(m, 2)->offset == 832); /* 800 + 32 */
    const fg_layer *pool2 = fg_model_layer(m, 3);
    CHECK(pool2->out.rank == 3 && pool2->out.dims[0] == 64 && pool2->out.dims[1] == 5 &&
          pool2->out.dims[2] == 5);
    fg_model_destroy(m);
    fg_config_destroy(cfg);
}

static void test_schemas(void)
{
    size_t n = 0;
    const fg_option *o = fg_layer_schema("conv2d", &n);
    CHECK(o && n == 7);
    if (o) {
        CHECK_STR(o[0].key, "type");
        CHECK_STR(o[1].key, "input"); /* every kind: the graph's key */
        CHECK_STR(o[2].key, "out_channels");
        CHECK(o[2].default_value == FG_OPT_REQUIRED);
    }
    o = fg_layer_schema("maxpool2d", &n);
    CHECK(o && n == 5);
    CHECK(fg_layer_schema("linaer", &n) == NULL && n == 0);
    const char *types[] = {"linear", "conv2d", "maxpool2d", "avgpool2d", "batchnorm", "dropout",
                           "flatten", "relu", "gelu", "tanh", "sigmoid", "add"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        o = fg_layer_schema(types[i], &n);
        CHECK(o && n >= 1 && strcmp(o[0].key, "type") == 0);
    }
    o = fg_model_schema(&n);
    CHECK(o && n == 14);
    if (o) {
        CHECK_STR(o[0].key, "input");
        CHECK_STR(o[1].default_value, "softmax_cross_entropy");
        CHECK_STR(o[2].key, "ignore_index");
        CHECK_STR(o[3].key, "init_from");
        CHECK_STR(o[4].default_value, "true");
        CHECK_STR(o[5].choices, "auto|fulgur|hf_gpt2|hf_llama");
        CHECK_STR(o[6].key, "hf_config");
        CHECK_STR(o[6].default_value, "");
        CHECK_STR(o[7].key, "recompute");
        CHECK_STR(o[7].default_value, "false");
        CHECK_STR(o[8].key, "pad_vocab_to");
        CHECK_STR(o[8].default_value, "0");
        CHECK_STR(o[9].key, "scaled_residual_init");
        CHECK_STR(o[9].default_value, "false");
        CHECK_STR(o[10].key, "sync_batchnorm");
        CHECK_STR(o[10].default_value, "false");
        CHECK_STR(o[11].key, "memory_format");
        CHECK_STR(o[11].default_value, "contiguous");
        CHECK_STR(o[11].choices, "contiguous|channels_last");
        CHECK_STR(o[12].key, "label_smoothing");
        CHECK_STR(o[12].default_value, "0");
        CHECK_STR(o[13].key, "batch_groups");
        CHECK_STR(o[13].default_value, "1");
    }
    o = fg_layer_schema("transformer_block", &n);
    CHECK(o && n >= 1 && strcmp(o[n - 1].key, "recompute") == 0);
}

/* Graphs: named inputs, add's shapes, every output read; errors name file:line. */
static void test_graph(void)
{
    int64_t in[1] = {8};
    /* lines: a 1-3, b 4-6, sum 7-9, head 10-12 */
    const char *ok = "[layer.a]\ntype = linear\nout_features = 8\n"
                     "[layer.b]\ntype = relu\ninput = a\n"
                     "[layer.sum]\ntype = add\ninput = a, b\n"
                     "[layer.head]\ntype = linear\nout_features = 3\n";
    CHECK_STR(build_message(ok, in, 1, 3), "");
    CHECK_STR(build_message("[layer.a]\ntype = linear\nout_features = 8\n"
                            "[layer.b]\ntype = linear\nout_features = 5\n"
                            "[layer.sum]\ntype = add\ninput = a, b\n"
                            "[layer.head]\ntype = linear\nout_features = 3\n",
                            in, 1, 3),
              "cfg.ini:7: [layer.sum] adds tensors of different shapes: [layer.a] gives (8), "
              "[layer.b] gives (5); both inputs must have one shape");
    CHECK_CONTAINS(build_message("[layer.a]\ntype = linear\nout_features = 8\n"
                                 "[layer.sum]\ntype = add\ninput = a, later\n"
                                 "[layer.later]\ntype = relu\n",
                                 in, 1, 8),
                   "cfg.ini:6: [layer.sum] input = a, later: no earlier layer is named 'later'");
    CHECK_CONTAINS(build_message("[layer.a]\ntype = linear\nout_features = 8\n"
                                 "[layer.sum]\ntype = add\ninput = a\n",
                                 in, 1, 8),
                   "cfg.ini:4: [layer.sum] (add) reads 2 inputs, but input names 1 (input = a, b)");
    CHECK_CONTAINS(build_message("[layer.a]\ntype = linear\nout_features = 8\n"
                                 "[layer.b]\ntype = relu\n"
                                 "[layer.c]\ntype = relu\ninput = a\n",
                                 in, 1, 8),
                   "cfg.ini:4: [layer.b]'s output is never read");
}


/* The layer names of text's model in run order, space-separated, and *swapped the count of
 * relu / max pooling pairs run pooling first. */
static const char *run_order(const char *text, size_t *swapped)
{
    static char names[256];
    static fg_error err;
    names[0] = '\0';
    *swapped = 99;
    fg_config *cfg = tk_config(text);
    fg_model *m = NULL;
    if (!cfg || fg_model_build(cfg, (int64_t[]){1, 8, 8}, 3, 4, &m, &err) != FG_OK) {
        fg_config_destroy(cfg);
        return err.message;
    }
    for (size_t i = 0; i < fg_model_layer_count(m); i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "",
                 fg_model_layer(m, i)->name);
    *swapped = fg_model_relu_after_pool(m);
    fg_model_destroy(m);
    fg_config_destroy(cfg);
    return names;
}

/* transformer_block's Llama options: the tensors a block declares (names as Hugging Face
 * Llama's MLP, shapes with grouped-query attention), and each refused combination with the
 * key at fault. Input (8, 16); lines: the block's section is line 1. */
#define BLOCK_HEAD "[layer.flat]\ntype = flatten\n[layer.fc]\ntype = linear\nout_features = 4\n"
static const char *block_message(const char *keys, int64_t width)
{
    static char text[1024];
    snprintf(text, sizeof text, "[layer.h]\ntype = transformer_block\n%s" BLOCK_HEAD, keys);
    return build_message(text, (int64_t[]){8, width}, 2, 4);
}

static void test_llama_block(void)
{
    fg_config *cfg = tk_config("[layer.h]\ntype = transformer_block\nheads = 4\nkv_heads = 2\n"
                               "norm = rmsnorm\nmlp = swiglu\nmlp_hidden = 24\n"
                               "position = rope\nbias = false\n" BLOCK_HEAD);
    fg_model *m = NULL;
    fg_error err = {0};
    CHECK_OK(fg_model_build(cfg, (int64_t[]){8, 16}, 2, 4, &m, &err), &err);
    if (m) {
        const char *names[] = {"h.ln_1.weight", "h.attn.qkv.weight", "h.attn.proj.weight",
                               "h.ln_2.weight", "h.mlp.gate_proj.weight",
                               "h.mlp.up_proj.weight", "h.mlp.down_proj.weight"};
        const int64_t rows[] = {16, 32, 16, 16, 24, 24, 16}, cols[] = {0, 16, 16, 0, 16, 16, 24};
        CHECK_EQ(fg_model_tensor_count(m), 9); /* and fc's weight and bias */
        for (size_t i = 0; i < 7 && i < fg_model_tensor_count(m); i++) {
            const fg_tensor_info *t = fg_model_tensor(m, i);
            CHECK_STR(t->name, names[i]);
            CHECK(t->shape[0] == rows[i] && (cols[i] == 0 ? t->rank == 1 : t->shape[1] == cols[i]),
                  "%s", names[i]);
        }
        /* (4 + 2 * 2) heads of 4 = 32 qkv rows; 3 SwiGLU matrices of 16 x 24 */
        CHECK_EQ(fg_model_param_count(m), 16 + 32 * 16 + 16 * 16 + 16 + 3 * 16 * 24 +
                                          8 * 16 * 4 + 4);
        fg_model_destroy(m);
    }
    fg_config_destroy(cfg);
    CHECK_STR(block_message("heads = 4\nkv_heads = 3\n", 16),
              "cfg.ini:4: [layer.h] kv_heads = 3 does not divide heads = 4");
    CHECK_STR(block_message("heads = 4\nkv_heads = 8\n", 16),
              "cfg.ini:4: [layer.h] kv_heads = 8 does not divide heads = 4");
    CHECK_STR(block_message("heads = 4\nposition = rope\n", 12),
              "cfg.ini:1: [layer.h] position = rope needs an even head_dim, but C / heads = "
              "12 / 4 = 3");
    CHECK_STR(block_message("heads = 2\nmlp = swiglu\n", 16),
              "cfg.ini:4: [layer.h] mlp: swiglu needs mlp_hidden (Llama's intermediate_size; "
              "there is no default)");
    CHECK_STR(block_message("heads = 2\nmlp = swiglu\nmlp_hidden = 8\nmlp_ratio = 2\n", 16),
              "cfg.ini:6: [layer.h] mlp_ratio: set mlp_hidden or mlp_ratio, not both");
    CHECK_STR(block_message("heads = 2\nrope_theta = 500000\n", 16),
              "cfg.ini:4: [layer.h] rope_theta: only with position = rope");
    CHECK_STR(block_message("heads = 2\nposition = rope\nrope_theta = 1\n", 16),
              "cfg.ini:5: [layer.h] rope_theta = 1 is out of range [2, 1000000000000]");
    CHECK_STR(block_message("heads = 2\nmlp = geglu\n", 16),
              "cfg.ini:4: [layer.h] mlp = 'geglu' is not one of gelu|swiglu; did you mean "
              "'gelu'?");
    CHECK_STR(block_message("heads = 2\nnorm = batchnorm\n", 16),
              "cfg.ini:4: [layer.h] norm = 'batchnorm' is not one of layernorm|rmsnorm");
    /* a gelu MLP of mlp_hidden units: fine */
    CHECK_STR(block_message("heads = 2\nmlp_hidden = 10\n", 16), "");
}

#define LLAMA3 "position = rope\nrope_scaling = llama3\nrope_factor = 8\n"
#define LLAMA3_ALL LLAMA3 "rope_low_freq_factor = 1\nrope_high_freq_factor = 4\n" \
    "rope_original_max_position_embeddings = 128\n"

/* rope_scaling's keys (rope_freq.c): the table the plan computes (Hugging Face's
 * _compute_llama3_parameters in PyTorch gives 1, 0.0427511781, 0.00125, 0.000125 at head_dim
 * 8: one pair kept, one blended, two divided by 8), linear's, and the refusals. */
static void test_rope_scaling(void)
{
    const char *texts[] = {"[layer.h]\ntype = transformer_block\nheads = 2\n" LLAMA3_ALL
                           BLOCK_HEAD,
                           "[layer.h]\ntype = transformer_block\nheads = 2\nposition = rope\n"
                           "rope_scaling = linear\nrope_factor = 4\n" BLOCK_HEAD};
    const double want[2][4] = {{1, 0.0427511781454086, 0.00125, 0.000125},
                               {0.25, 0.025, 0.0025, 0.00025}};
    for (int k = 0; k < 2; k++) {
        fg_config *cfg = tk_config(texts[k]);
        fg_model *m = NULL;
        fg_error err = {0};
        CHECK_OK(fg_model_build(cfg, (int64_t[]){8, 16}, 2, 4, &m, &err), &err);
        for (int i = 0; m && i < 4; i++) {
            double got = fg_model_layer(m, 0)->rope_inv_freq[i];
            CHECK(fabs(got - want[k][i]) <= 1e-7 * want[k][i], "%s pair %d: %.12g, want %.12g",
                  k ? "linear" : "llama3", i, got, want[k][i]);
        }
        fg_model_destroy(m);
        fg_config_destroy(cfg);
    }
    CHECK_STR(block_message("heads = 2\nrope_factor = 8\n", 16),
              "cfg.ini:4: [layer.h] rope_factor: only with rope_scaling = llama3 or linear");
    CHECK_STR(block_message("heads = 2\nrope_scaling = linear\nrope_factor = 2\n", 16),
              "cfg.ini:4: [layer.h] rope_scaling: only with position = rope");
    CHECK_STR(block_message("heads = 2\n" LLAMA3, 16),
              "cfg.ini:5: [layer.h] rope_scaling = llama3 needs rope_low_freq_factor (Hugging "
              "Face's rope_scaling.low_freq_factor; there is no default)");
    CHECK_STR(block_message("heads = 2\nposition = rope\nrope_scaling = linear\n", 16),
              "cfg.ini:5: [layer.h] rope_scaling = linear needs rope_factor (Hugging Face's "
              "rope_scaling.factor; there is no default)");
    CHECK_STR(block_message("heads = 2\nposition = rope\nrope_scaling = linear\nrope_factor = "
                            "2\nrope_high_freq_factor = 4\n", 16),
              "cfg.ini:7: [layer.h] rope_high_freq_factor: only with rope_scaling = llama3");
    CHECK_STR(block_message("heads = 2\n" LLAMA3 "rope_low_freq_factor = 4\n"
                            "rope_high_freq_factor = 2\n"
                            "rope_original_max_position_embeddings = 64\n", 16),
              "cfg.ini:8: [layer.h] rope_high_freq_factor: must be greater than "
              "rope_low_freq_factor, and that > 0 (Llama 3 blends the frequencies between the "
              "two)");
    CHECK_STR(block_message("heads = 2\nposition = rope\nrope_scaling = yarn\n", 16),
              "cfg.ini:5: [layer.h] rope_scaling = 'yarn' is not one of none|llama3|linear");
    CHECK_STR(block_message("heads = 1\n" LLAMA3_ALL, 1040),
              "cfg.ini:1: [layer.h] rope_scaling: head_dim = 1040, at most 512 with a scaled "
              "rope");
}

#define CONV "[layer.conv]\ntype = conv2d\nout_channels = 2\nkernel_size = 3\n"
#define RELU "[layer.relu]\ntype = relu\n"
#define MAXPOOL "[layer.pool]\ntype = maxpool2d\nkernel_size = 2\n"
#define HEAD_4 "[layer.flat]\ntype = flatten\n[layer.fc]\ntype = linear\nout_features = 4\n"

/* layer_order.c: relu then max pooling runs pooling first, only where nothing else can see
 * the difference. */
static void test_relu_after_pool(void)
{
    size_t n = 0;
    CHECK_STR(run_order(CONV RELU MAXPOOL HEAD_4, &n), "conv pool relu flat fc");
    CHECK_EQ(n, 1);
    /* average pooling does not commute with relu */
    CHECK_STR(run_order(CONV RELU "[layer.pool]\ntype = avgpool2d\nkernel_size = 2\n" HEAD_4,
                        &n), "conv relu pool flat fc");
    CHECK_EQ(n, 0);
    /* a relu that names its input, a pooling read by name, a relu read by name: as written */
    CHECK_STR(run_order(CONV "[layer.relu]\ntype = relu\ninput = conv\n" MAXPOOL HEAD_4, &n),
              "conv relu pool flat fc");
    CHECK_EQ(n, 0);
    CHECK_STR(run_order(CONV RELU MAXPOOL "[layer.flat]\ntype = flatten\ninput = pool\n"
                        "[layer.fc]\ntype = linear\nout_features = 4\n", &n),
              "conv relu pool flat fc");
    CHECK_EQ(n, 0);
    CHECK_STR(run_order(CONV RELU MAXPOOL "[layer.p2]\ntype = maxpool2d\nkernel_size = 2\n"
                        "input = relu\n[layer.sum]\ntype = add\ninput = pool, p2\n" HEAD_4, &n),
              "conv relu pool p2 sum flat fc");
    CHECK_EQ(n, 0);
    /* pooling before relu already, and two pairs */
    CHECK_STR(run_order(CONV MAXPOOL RELU HEAD_4, &n), "conv pool relu flat fc");
    CHECK_EQ(n, 0);
    CHECK_STR(run_order(CONV RELU MAXPOOL "[layer.c2]\ntype = conv2d\nout_channels = 2\n"
                        "kernel_size = 1\n[layer.r2]\ntype = relu\n"
                        "[layer.p2]\ntype = maxpool2d\nkernel_size = 1\n" HEAD_4, &n),
              "conv pool relu c2 p2 r2 flat fc");
    CHECK_EQ(n, 2);
}

int main(void)
{
    test_graph();
    test_linear_after_conv();
    test_window_errors();
    test_classes();
    test_input();
    test_keys();
    test_layout();
    test_schemas();
    test_relu_after_pool();
    test_llama_block();
    test_rope_scaling();
    return fg_test_report("model.build");
}
