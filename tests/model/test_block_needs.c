/* The setup check (op_needs.c) on a Llama block: with the CPU backend (argv[1]) the needs of
 * a model with rope, SwiGLU, RMSNorm and no biases are met, and its list names the new ops;
 * with that backend's supports() saying no to the ABI 1.6 ops (as a backend without them
 * answers; the CUDA backend's did before it had them), the run is refused before anything runs, with one
 * message naming each op, its dtype and the layer; a GELU block with learned positions does
 * not ask for them. */
#include <stdlib.h>

#include "testkit.h"

static const fg_backend_vtable *cpu_vt;

/* The CPU backend's answer, but no for rope and swiglu. */
static int supports_without_llama_ops(void *state, uint32_t op, const uint32_t *dtypes)
{
    if (op == FG_OP_ROPE_FORWARD || op == FG_OP_ROPE_BACKWARD || op == FG_OP_SWIGLU_FORWARD ||
        op == FG_OP_SWIGLU_BACKWARD)
        return 0;
    return cpu_vt->supports(state, op, dtypes);
}

/* The setup check's message for the model in text on backend vt ("" when met). */
static const char *check_message(const fg_backend_vtable *vt, void *bs, const char *text,
                                 int training)
{
    static fg_error err;
    memset(&err, 0, sizeof err);
    fg_config *cfg = tk_config(text);
    fg_model *m = NULL;
    fg_op_needs n = {0};
    CHECK_OK(fg_model_build(cfg, (int64_t[]){8}, 1, 256, &m, &err), &err);
    if (m) {
        CHECK_OK(fg_model_op_needs(m, training, &n), &err);
        if (fg_backend_check_needs(vt, bs, "cudalike", &n, &err) == FG_OK)
            err.message[0] = '\0';
        fg_op_needs_free(&n);
        fg_model_destroy(m);
    }
    fg_config_destroy(cfg);
    return err.message;
}

#define EMBED "[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 16\n"
#define HEAD "[layer.head]\ntype = linear\nout_features = 256\nbias = false\n"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s BACKEND.so\n", argv[0]);
        return 2;
    }
    tk_backend b;
    if (tk_backend_open(&b, argv[1]) != 0)
        return 1;
    cpu_vt = b.be;
    fg_backend_vtable cudalike = *b.be;
    cudalike.supports = supports_without_llama_ops;
    const char *llama = EMBED "[layer.h]\ntype = transformer_block\nheads = 4\nkv_heads = 2\n"
                              "norm = rmsnorm\nmlp = swiglu\nmlp_hidden = 24\nposition = rope\n"
                              "bias = false\n" HEAD;
    const char *gpt_gqa = EMBED "[layer.wpe]\ntype = position_embedding\nmax_positions = 8\n"
                                "[layer.h]\ntype = transformer_block\nheads = 4\nkv_heads = 2\n"
                                "norm = rmsnorm\nbias = false\n" HEAD;
    CHECK_STR(check_message(b.be, b.bs, llama, 1), "");
    CHECK_STR(check_message(&cudalike, b.bs, llama, 1),
              "backend.cudalike lacks: swiglu_forward(f32) for [layer.h], rope_forward(f32) for "
              "[layer.h], swiglu_backward(f32) for [layer.h], rope_backward(f32) for [layer.h]");
    CHECK_STR(check_message(&cudalike, b.bs, llama, 0),
              "backend.cudalike lacks: swiglu_forward(f32) for [layer.h], rope_forward(f32) for "
              "[layer.h]");
    CHECK_STR(check_message(&cudalike, b.bs, gpt_gqa, 1), "");
    tk_backend_close(&b);
    return fg_test_report("model.block_op_needs");
}
