/* [model] loss = mse | bce_with_logits through a replica (a linear layer of one output):
 * prints the inputs, parameters, mean loss, metric and parameter gradients for
 * loss_torch.py to recompute with PyTorch. Usage: test_model_loss CPU_PLUGIN mse|bce */
#include <math.h>
#include <stdlib.h>

#include "testkit.h"

enum { BATCH = 16, FEATURES = 5 };

static void print_row(const char *name, const float *v, size_t n)
{
    printf("%s", name);
    for (size_t i = 0; i < n; i++)
        printf(" %.9g", (double)v[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "mse") != 0 && strcmp(argv[2], "bce") != 0)) {
        fprintf(stderr, "usage: %s CPU_PLUGIN mse|bce\n", argv[0]);
        return 2;
    }
    int mse = strcmp(argv[2], "mse") == 0;
    tk_backend b;
    if (tk_backend_open(&b, argv[1]) != 0)
        return 1;
    char cfg[256];
    snprintf(cfg, sizeof cfg, "[model]\nloss = %s\n[layer.fc]\ntype = linear\nout_features = 1\n",
             mse ? "mse" : "bce_with_logits");
    tk_net n;
    int64_t shape[1] = {FEATURES};
    if (tk_net_create(&n, &b, cfg, shape, 1, 1, BATCH, 11) != 0)
        return 1;
    CHECK_EQ(fg_model_num_classes(n.model), 1);
    float *t = (float *)n.labels; /* f32 targets in the label buffer, as the loader gives them */
    for (int i = 0; i < BATCH; i++)
        t[i] = mse ? (float)(i % 7) * 0.5f - 1.3f : (i % 3 == 2 ? 0.25f : (float)(i % 2));
    tk_net_upload(&n);
    float got[2];
    float *grads = calloc(fg_model_params_size(n.model), sizeof(float));
    if (!grads || tk_net_grads(&n, 0, grads) != 0)
        return 1;
    tk_download(&b, got, n.scalars_dev, sizeof got);
    const fg_tensor_info *w = fg_model_tensor(n.model, 0), *bias = fg_model_tensor(n.model, 1);
    print_row("x", n.x, (size_t)BATCH * FEATURES);
    print_row("t", t, BATCH);
    print_row("w", n.params + w->offset, w->numel);
    print_row("b", n.params + bias->offset, bias->numel);
    float means[2] = {got[0] / BATCH, got[1] / BATCH};
    print_row("loss", &means[0], 1);
    print_row("metric", &means[1], 1);
    print_row("dw", grads + w->offset, w->numel);
    print_row("db", grads + bias->offset, bias->numel);
    /* i32 class labels are refused for these losses, f32 targets for cross-entropy */
    fg_dataset_info info = {.struct_size = sizeof info, .length = 4, .num_classes = 3,
                            .label_dtype = FG_I32, .label_elems = 1};
    fg_error err = {0};
    CHECK(fg_loss_check_labels(mse ? FG_LOSS_KIND_MSE : FG_LOSS_KIND_BCE_LOGITS, &info, "csv",
                               "train", &err) == FG_INCOMPATIBLE);
    CHECK_CONTAINS(err.message, "takes one f32 target per sample");
    info.label_dtype = FG_F32;
    CHECK(fg_loss_check_labels(FG_LOSS_KIND_XENT, &info, "csv", "train", &err) == FG_INCOMPATIBLE);
    CHECK_CONTAINS(err.message, "they train with [model] loss = mse");
    free(grads);
    tk_net_destroy(&n);
    tk_backend_close(&b);
    return fg_test_report(argv[2]);
}
