/* [model] memory_format (layout.c) at build and setup, without a device: under channels_last
 * the conv, pooling and (c, h, w) batchnorm layers and the elementwise layers between them are
 * NHWC, the first conv transposes the input (its arena grows by two NHWC copies of it), the
 * flatten of an NHWC map is the transposing kind (no alias) and the model's note names them;
 * contiguous (and no key) leaves every layer as before: no NHWC flag, an aliasing flatten, the
 * same arena bytes and no note. Refused at build: a kind without an NHWC form reading a conv's
 * map, an add of an NCHW and an NHWC tensor, an unknown value. At setup the CPU backend
 * (argv[1]) refuses the transposes naming the key; under contiguous nothing new is asked. */
#include <stdlib.h>

#include "layer.h"
#include "testkit.h"

#define CNN(extra)                                                                            \
    "[model]\ninput = 3,12,10\n" extra                                     /* 1-2 (3) */      \
    "[layer.conv1]\ntype = conv2d\nout_channels = 8\nkernel_size = 3\n"     /* 3-6 */          \
    "[layer.bn1]\ntype = batchnorm\n"                                      /* 7-8 */          \
    "[layer.relu1]\ntype = relu\n"                                         /* 9-10 */         \
    "[layer.pool1]\ntype = maxpool2d\nkernel_size = 2\n"                   /* 11-13 */        \
    "[layer.flatten]\ntype = flatten\n"                                    /* 14-15 */        \
    "[layer.fc]\ntype = linear\nout_features = 10\n"                       /* 16-18 */

static fg_model *build(const char *text, fg_error *err)
{
    memset(err, 0, sizeof *err);
    fg_config *cfg = tk_config(text);
    fg_model *m = NULL;
    if (fg_model_build(cfg, NULL, 0, 10, &m, err) != FG_OK)
        m = NULL;
    fg_config_destroy(cfg);
    return m;
}

static const char *build_message(const char *text)
{
    static fg_error err;
    fg_model *m = build(text, &err);
    if (m) {
        fg_model_destroy(m);
        return "";
    }
    return err.message;
}

static void test_channels_last(void)
{
    fg_error err;
    fg_model *m = build(CNN("memory_format = channels_last\n"), &err);
    fg_model *d = build(CNN(""), &err);
    CHECK(m && d);
    if (!m || !d)
        return;
    /* conv1, bn1, pool1, relu1 (relu1 runs after pool1: layer_order.c), flatten, fc */
    static const int nhwc[] = {1, 1, 1, 1, 0, 0};
    for (size_t i = 0; i < 6; i++) {
        const fg_layer *l = fg_model_layer(m, i), *o = fg_model_layer(d, i);
        CHECK(l->nhwc == nhwc[i]);
        CHECK(o->nhwc == 0 && o->nhwc_entry == 0);
        CHECK(l->nhwc_entry == (i == 0));
        if (i > 0) /* the same arena bytes as contiguous */
            CHECK(l->aux_fixed == o->aux_fixed && l->aux_per_sample == o->aux_per_sample);
    }
    /* conv1: two NHWC copies of its (3, 12, 10) f32 input, 64-byte rounded, and alignment room */
    const fg_layer *c = fg_model_layer(m, 0), *c0 = fg_model_layer(d, 0);
    CHECK(c->aux_per_sample == c0->aux_per_sample + 2 * 1472);
    CHECK(c->aux_fixed == c0->aux_fixed + 64);
    const fg_layer *f = fg_model_layer(m, 4), *f0 = fg_model_layer(d, 4);
    CHECK(f->ops == &fg_layer_flatten_nhwc && !(f->ops->flags & FG_LAYER_ALIAS));
    CHECK(f0->ops == &fg_layer_flatten && (f0->ops->flags & FG_LAYER_ALIAS));
    CHECK_STR(fg_model_fp8_note(m),
              "model: [model] memory_format = channels_last: NHWC activations in [layer.conv1], "
              "[layer.bn1], [layer.pool1], [layer.relu1]; NCHW -> NHWC at [layer.conv1]; "
              "NHWC -> NCHW at [layer.flatten]");
    CHECK_STR(fg_model_fp8_note(d), "");
    fg_model_destroy(m);
    fg_model_destroy(d);
    /* contiguous said out loud is the default */
    m = build(CNN("memory_format = contiguous\n"), &err);
    CHECK(m && fg_model_layer(m, 0)->nhwc == 0 && fg_model_layer(m, 4)->ops == &fg_layer_flatten);
    if (m)
        fg_model_destroy(m);
    /* an input seen through a relu first: the conv after it is the entry */
    m = build("[model]\ninput = 3,8,8\nmemory_format = channels_last\n"
              "[layer.r]\ntype = relu\n"
              "[layer.c]\ntype = conv2d\nout_channels = 4\nkernel_size = 3\n"
              "[layer.f]\ntype = flatten\n[layer.fc]\ntype = linear\nout_features = 10\n",
              &err);
    CHECK(m && fg_model_layer(m, 0)->nhwc == 0 && fg_model_layer(m, 1)->nhwc_entry == 1);
    if (m)
        fg_model_destroy(m);
}

static void test_refusals(void)
{
    CHECK_STR(build_message("[model]\ninput = 3,8,8\nmemory_format = channels_last\n"
                            "[layer.c]\ntype = conv2d\nout_channels = 4\nkernel_size = 3\n"
                            "[layer.ln]\ntype = layernorm\n" /* 8-9 */
                            "[layer.f]\ntype = flatten\n[layer.fc]\ntype = linear\n"
                            "out_features = 10\n"),
              "cfg.ini:8: [layer.ln] (layernorm) reads [layer.c]'s (c, h, w) output, which is "
              "channels-last (NHWC) under [model] memory_format = channels_last, and layernorm "
              "has no NHWC form; put a flatten before it, or set memory_format = contiguous");
}

static void test_add_refusal(void)
{
    /* the model input through a relu (NCHW) added to a conv's map (NHWC) */
    CHECK_STR(build_message("[model]\ninput = 4,8,8\nmemory_format = channels_last\n"
                            "[layer.r]\ntype = relu\n"                          /* 4-5 */
                            "[layer.c]\ntype = conv2d\nout_channels = 4\n"      /* 6-8 */
                            "kernel_size = 3\npadding = 1\n"                    /* 9-10 */
                            "[layer.a]\ntype = add\ninput = r, c\n"             /* 11 */
                            "[layer.f]\ntype = flatten\n[layer.fc]\ntype = linear\n"
                            "out_features = 10\n"),
              "cfg.ini:11: [layer.a] (add) adds [layer.r] (NCHW) and [layer.c] (NHWC) under "
              "[model] memory_format = channels_last; both inputs must be in one layout: read "
              "the model input through a conv2d first, or set memory_format = contiguous");
}

/* The setup check's message for text on the CPU backend ("" when met). */
static const char *setup_message(tk_backend *b, const char *text)
{
    static fg_error err;
    fg_model *m = build(text, &err);
    CHECK(m != NULL);
    if (!m)
        return err.message;
    fg_op_needs n = {0};
    CHECK_OK(fg_model_op_needs(m, 1, &n), &err);
    if (fg_backend_check_needs(b->be, b->bs, "cpu", &n, &err) == FG_OK)
        err.message[0] = '\0';
    fg_op_needs_free(&n);
    fg_model_destroy(m);
    return err.message;
}

int main(int argc, char **argv)
{
    test_channels_last();
    test_refusals();
    test_add_refusal();
    CHECK_STR(build_message(CNN("memory_format = nhwc\n")),
              "cfg.ini:3: [model] memory_format = 'nhwc' is not one of contiguous|channels_last");
    if (argc == 2) {
        tk_backend b;
        if (tk_backend_open(&b, argv[1]) != 0)
            return 1;
        CHECK_STR(setup_message(&b, CNN("memory_format = channels_last\n")),
                  "backend.cpu lacks: transpose_batched(f32) for [model] memory_format = "
                  "channels_last");
        CHECK_STR(setup_message(&b, CNN("")), "");
        tk_backend_close(&b);
    }
    return fg_test_report("model.memory_format");
}
