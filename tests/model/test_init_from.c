/* [model] init_from: a weights-only safetensors file written from a PyTorch state dict
 * (init_from_torch.py) initialises conv, batchnorm (bf16 parameters, f16 running
 * statistics) and linear tensors with PyTorch's values; a missing tensor is an error
 * naming it unless strict is off (then it is listed as kept); a mis-shaped tensor is an
 * error naming both shapes.
 * Usage: test_model_init_from FOLDER (written by init_from_torch.py) */
#include <stdlib.h>

#include "init_from.h"
#include "testkit.h"

static const char *net =
    "[model]\ninput = 3,6,6\n"
    "[layer.conv]\ntype = conv2d\nout_channels = 4\nkernel_size = 3\n"
    "[layer.bn]\ntype = batchnorm\n"
    "[layer.flat]\ntype = flatten\n"
    "[layer.fc]\ntype = linear\nout_features = 5\n";

static const char *order[] = {"conv.weight", "conv.bias", "bn.weight", "bn.bias",
                              "bn.running_mean", "bn.running_var", "fc.weight", "fc.bias"};

static const fg_tensor_info *find(const fg_model *m, const char *name)
{
    for (size_t i = 0; i < fg_model_tensor_count(m); i++)
        if (strcmp(fg_model_tensor(m, i)->name, name) == 0)
            return fg_model_tensor(m, i);
    return NULL;
}

static float *read_expected(const char *folder, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/expected.f32", folder);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    float *v = malloc(4096 * sizeof *v);
    *n = fread(v, sizeof *v, 4096, f);
    fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
        return 2;
    }
    fg_error err = {0};
    fg_config *cfg = tk_config(net);
    fg_model *m = NULL;
    CHECK_OK(fg_model_build(cfg, NULL, 0, 5, &m, &err), &err);
    if (!m)
        return fg_test_report("init_from");
    float *params = calloc(fg_model_params_size(m), sizeof *params);
    float *buffers = calloc(fg_model_buffers_size(m), sizeof *buffers);
    fg_model_init_params(m, 1, params, buffers);
    char path[512];
    fg_init_from_result res;

    snprintf(path, sizeof path, "%s/full.safetensors", argv[1]);
    CHECK_OK(fg_model_init_from(m, path, FG_WEIGHTS_AUTO, 1, 0, params, buffers, &res, &err), &err);
    CHECK_EQ(res.loaded, 8);
    CHECK_EQ(res.kept, 0);
    CHECK_EQ(res.unused, 1); /* bn.num_batches_tracked */
    CHECK_EQ(res.layout, FG_WEIGHTS_FULGUR);
    size_t n = 0, at = 0;
    float *want = read_expected(argv[1], &n);
    CHECK(want != NULL, "no expected.f32 in %s", argv[1]);
    int mismatches = 0;
    for (size_t k = 0; want && k < sizeof order / sizeof *order; k++) {
        const fg_tensor_info *t = find(m, order[k]);
        CHECK(t != NULL, "the model has no %s", order[k]);
        if (!t)
            continue;
        const float *got = (t->is_buffer ? buffers : params) + t->offset;
        for (size_t i = 0; i < t->numel && at < n; i++, at++)
            mismatches += memcmp(&got[i], &want[at], sizeof *got) != 0;
    }
    CHECK_EQ(at, n);
    CHECK_EQ(mismatches, 0);

    snprintf(path, sizeof path, "%s/missing.safetensors", argv[1]);
    CHECK(fg_model_init_from(m, path, FG_WEIGHTS_AUTO, 1, 0, params, buffers, &res, &err) ==
          FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "'fc.bias' is not in the file") &&
              strstr(err.message, "init_strict = false"),
          "%s", err.message);
    CHECK_OK(fg_model_init_from(m, path, FG_WEIGHTS_AUTO, 0, 0, params, buffers, &res, &err), &err);
    CHECK_EQ(res.kept, 1);
    CHECK(strcmp(res.kept_names, "fc.bias") == 0, "%s", res.kept_names);

    snprintf(path, sizeof path, "%s/misshaped.safetensors", argv[1]);
    CHECK(fg_model_init_from(m, path, FG_WEIGHTS_AUTO, 1, 0, params, buffers, &res, &err) ==
          FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "'fc.weight' has shape (64, 5), the model's 'fc.weight' is "
                              "(5, 64)") != NULL, "%s", err.message);

    free(want);
    free(params);
    free(buffers);
    fg_model_destroy(m);
    fg_config_destroy(cfg);
    return fg_test_report("init_from");
}
