/* Activation recomputation of transformer blocks on the CPU backend (argv[1]): the loss and
 * every gradient bit for bit the same as without it, attention dropout on, over several
 * steps, in evaluation and at a smaller batch, with no allocation after setup, for GPT-2's
 * block and a Llama one (multi-query attention, rope, RMSNorm, SwiGLU, no bias); the arena
 * smaller by exactly the saved tensors of all blocks but one (they share one scratch set);
 * [model] recompute reaching every block and a block's own key winning; the key refused,
 * with its file:line, on a kind that cannot recompute; no KV cache for generate from
 * recomputing blocks. */
#include <stdlib.h>

#include "decode.h"
#include "testkit.h"

#define BATCH 8
#define T 5
#define C 8
#define HEADS 2
#define BLOCKS 3

/* a (T, C) input: a linear, BLOCKS blocks with attention dropout, a flat head; BLOCK_KEYS
 * go into [layer.h], MODEL_KEYS into [model] */
static char *gpt_config(const char *model_keys, const char *block_keys)
{
    static char text[1024];
    snprintf(text, sizeof text,
             "[model]\n%s\n[layer.pre]\ntype = linear\nout_features = %d\n"
             "[layer.h]\ntype = transformer_block\nheads = %d\nrepeat = %d\n"
             "attn_dropout = 0.3\n%s\n[layer.flat]\ntype = flatten\n"
             "[layer.head]\ntype = linear\nout_features = 3\n",
             model_keys, C, HEADS, BLOCKS, block_keys);
    return text;
}

/* Counts device allocations (test-only state, reached through a copy of the vtable). */
static int net_create(tk_net *n, tk_backend *b, const char *model_keys, const char *block_keys)
{
    return tk_net_create(n, b, gpt_config(model_keys, block_keys), (int64_t[]){T, C}, 2, 3,
                         BATCH, 7);
}

/* What forward keeps per sample for backward (layer_block.c): 15 T*C values, (4 + heads) T
 * statistics, 4 bytes each. */
static size_t saved_per_sample(void)
{
    return (15 * T * C + (4 + HEADS) * T) * 4;
}

/* forward + backward over the first `rows` samples; the gradients into g */
static void step_rows(tk_net *n, int rows, float *g)
{
    fg_error err = {0};
    CHECK_OK(fg_replica_forward(n->rep, n->b->queue, n->x_dev, n->labels_dev, rows, 1,
                                &n->scalars_dev[0], &n->scalars_dev[1], &err), &err);
    CHECK_OK(fg_replica_backward(n->rep, n->b->queue, rows, 1.0f, 0, &err), &err);
    tk_download(n->b, g, fg_replica_grads(n->rep), fg_model_params_size(n->model) * 4);
}

/* Llama's options (multi-query attention, rope, RMSNorm, SwiGLU, no biases): what forward
 * keeps then is 4 T*C values, qkv of (2 + 2) heads of 4, three (T, 12) MLP tensors. */
#define LLAMA_KEYS                                                                           \
    "kv_heads = 1\nnorm = rmsnorm\nmlp = swiglu\nmlp_hidden = 12\nposition = rope\n"          \
    "bias = false\n"
static size_t llama_saved_per_sample(void)
{
    return (4 * T * C + T * (16 + 3 * 12) + (4 + HEADS) * T) * 4;
}

static void test_bitwise(tk_backend *b, const char *keys, const char *what)
{
    fg_backend_vtable counting = tk_counting_backend(b);
    tk_backend cb = *b;
    cb.be = &counting;
    tk_net plain, rc;
    char rc_keys[256];
    snprintf(rc_keys, sizeof rc_keys, "%srecompute = true\n", keys);
    if (net_create(&plain, b, "", keys) != 0 || net_create(&rc, &cb, "", rc_keys) != 0)
        return;
    int at_setup = tk_alloc_calls;
    size_t np = fg_model_params_size(plain.model);
    float *g0 = malloc(np * sizeof(float)), *g1 = malloc(np * sizeof(float));
    float *prev = calloc(np, sizeof(float));
    for (uint64_t step = 0; step < 3; step++) {
        fg_replica_set_step(plain.rep, step);
        fg_replica_set_step(rc.rep, step);
        double l0 = tk_net_loss(&plain, 1), l1 = tk_net_loss(&rc, 1);
        CHECK(memcmp(&l0, &l1, sizeof l0) == 0, "step %d: loss %.9g vs %.9g with recompute",
              (int)step, l0, l1);
        /* accumulate on the last step: the recomputed backward adds like the stored one */
        tk_net_grads(&plain, step == 2, g0);
        tk_net_grads(&rc, step == 2, g1);
        CHECK(memcmp(g0, g1, np * sizeof(float)) == 0,
              "step %d: gradients differ with recompute", (int)step);
        /* each step draws another dropout mask: the comparison covers the masks */
        CHECK(memcmp(g0, prev, np * sizeof(float)) != 0);
        memcpy(prev, g0, np * sizeof(float));
    }
    /* evaluation (validation, generate): the saved tensors go to the scratch all the same */
    double e0 = tk_net_loss(&plain, 0), e1 = tk_net_loss(&rc, 0);
    CHECK(memcmp(&e0, &e1, sizeof e0) == 0, "eval loss %.9g vs %.9g with recompute", e0, e1);
    /* a batch below the replica's: the workspace's regions are laid out for it */
    step_rows(&plain, BATCH - 3, g0);
    step_rows(&rc, BATCH - 3, g1);
    CHECK(memcmp(g0, g1, np * sizeof(float)) == 0, "batch %d: gradients differ", BATCH - 3);
    CHECK(at_setup > 0); /* the counter sees the replica's allocations */
    CHECK_EQ(tk_alloc_calls, at_setup);
    printf("  bitwise (%s): loss and %zu gradients equal with recompute over 3 steps, attention "
           "dropout 0.3\n", what, np);
    free(g0);
    free(g1);
    free(prev);
    tk_net_destroy(&plain);
    tk_net_destroy(&rc);
}

static size_t arena_of(tk_backend *b, const char *model_keys, const char *block_keys)
{
    tk_net n;
    if (net_create(&n, b, model_keys, block_keys) != 0)
        return 0;
    size_t bytes = fg_replica_arena_bytes(n.rep);
    tk_net_destroy(&n);
    return bytes;
}

static void test_memory(tk_backend *b)
{
    size_t plain = arena_of(b, "", ""), rc = arena_of(b, "", "recompute = true");
    size_t saving = (BLOCKS - 1) * BATCH * saved_per_sample();
    printf("  memory: arena %zu bytes, %zu with recompute (saved %zu = (%d - 1) blocks x %d "
           "samples x %zu)\n", plain, rc, plain - rc, BLOCKS, BATCH, saved_per_sample());
    CHECK(plain > 0 && rc > 0);
    CHECK_EQ(plain - rc, saving); /* BATCH x saved is 315 x 64 bytes: no padding either way */
    /* [model] recompute is every block's default; a block's own key wins */
    CHECK_EQ(arena_of(b, "recompute = true", ""), rc);
    CHECK_EQ(arena_of(b, "recompute = true", "recompute = false"), plain);
    CHECK_EQ(arena_of(b, "recompute = false", "recompute = true"), rc);
    /* a Llama block's saved set follows its shapes */
    size_t lp = arena_of(b, "", LLAMA_KEYS), lrc = arena_of(b, "", LLAMA_KEYS "recompute = true");
    CHECK_EQ(lp - lrc, (BLOCKS - 1) * BATCH * llama_saved_per_sample());
}

static void test_refused(void)
{
    fg_config *cfg = tk_config("[model]\ninput = 4\n[layer.fc]\ntype = linear\n"
                               "out_features = 3\nrecompute = true\n");
    fg_model *m = NULL;
    fg_error err = {0};
    CHECK_STATUS(fg_model_build(cfg, NULL, 0, 3, &m, &err), FG_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK_STR(err.message, "cfg.ini:6: [layer.fc] recompute: a linear layer cannot recompute "
              "its activations; only transformer_block can (set it there, or [model] "
              "recompute = true for every block)");
    fg_config_destroy(cfg);
}

/* fulgur generate's KV cache is a block's saved qkv, which a recomputing block does not
 * keep: the decoder refuses it (generate then runs a full forward per token). */
static void test_no_kv_cache(tk_backend *b)
{
    tk_net n; /* logits per position: a chain the cache runs but for the blocks */
    const char *text = "[layer.pre]\ntype = linear\nout_features = 8\n[layer.h]\n"
                       "type = transformer_block\nheads = 2\nrecompute = true\n"
                       "[layer.head]\ntype = linear\nout_features = 3\n";
    if (tk_net_create(&n, b, text, (int64_t[]){T, C}, 2, 3, 1, 7) != 0)
        return;
    fg_decoder *dec = NULL;
    fg_error err = {0};
    CHECK_STATUS(fg_decoder_create(n.rep, &dec, &err), FG_UNAVAILABLE);
    CHECK(dec == NULL);
    CHECK_CONTAINS(err.message, "[layer.h] recompute = true: the block keeps no K and V");
    tk_net_destroy(&n);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s BACKEND.so\n", argv[0]);
        return 2;
    }
    tk_backend b;
    if (tk_backend_open(&b, argv[1]) != 0)
        return 1;
    test_bitwise(&b, "", "gpt");
    test_bitwise(&b, LLAMA_KEYS, "llama: mqa, rope, rmsnorm, swiglu, no bias");
    test_memory(&b);
    test_refused();
    test_no_kv_cache(&b);
    tk_backend_close(&b);
    return fg_test_report("model.recompute");
}
