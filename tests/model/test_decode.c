/* fulgur generate's KV cache (core/src/model/decode.h) on the CPU backend (argv[1]): after a
 * forward of a prompt, each decode step's probabilities at position pos equal those of a
 * full forward of the window tokens[0..pos] (relative error per probability), with the
 * backend's attention_decode and with it taken away (the attention_forward fallback), for a
 * GPT and for a Llama-style stack (grouped-query attention, rope, SwiGLU); the
 * steps allocate nothing; models without an incremental path are refused with a message
 * naming the layer. */
#include <math.h>
#include <stdlib.h>

#include "decode.h"
#include "init.h"
#include "testkit.h"

#define T 16
#define VOCAB 256
#define TOL 1e-5 /* relative, per probability */

/* A GPT: tied head, dropout (the identity at inference), four heads. */
static const char *gpt =
    "[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 32\n"
    "[layer.wpe]\ntype = position_embedding\nmax_positions = 16\n"
    "[layer.h]\ntype = transformer_block\nheads = 4\nrepeat = 2\n"
    "[layer.drop]\ntype = dropout\np = 0.1\n"
    "[layer.ln_f]\ntype = layernorm\n"
    "[layer.head]\ntype = linear\nout_features = 256\nbias = false\ntie = wte\n";

/* Every position-wise kind the cache runs through views: rmsnorm, gelu, a linear with bias. */
static const char *mixed =
    "[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 24\n"
    "[layer.wpe]\ntype = position_embedding\nmax_positions = 32\n"
    "[layer.h]\ntype = transformer_block\nheads = 3\nmlp_ratio = 2\n"
    "[layer.norm]\ntype = rmsnorm\n[layer.fc]\ntype = linear\nout_features = 40\n"
    "[layer.act]\ntype = gelu\n[layer.head]\ntype = linear\nout_features = 256\n";

/* Llama-style: no position table (rope in the blocks, keys cached rotated), grouped-query
 * attention (4 query heads on 2 cached key/value heads), RMSNorm, SwiGLU, no biases. */
static const char *llama =
    "[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 32\n"
    "[layer.h]\ntype = transformer_block\nheads = 4\nkv_heads = 2\nnorm = rmsnorm\n"
    "mlp = swiglu\nmlp_hidden = 48\nposition = rope\nbias = false\nrepeat = 2\n"
    "[layer.norm]\ntype = rmsnorm\n"
    "[layer.head]\ntype = linear\nout_features = 256\nbias = false\n";

typedef struct lm {
    tk_net n;
    int32_t tokens[T];
    int32_t *window_dev, *labels_dev; /* (T) each */
    float ref[T][VOCAB];              /* full forward of tokens[0..pos], row pos */
} lm;

/* One forward of tokens[0..len) zero-padded to T, batch 1. */
static void forward_window(lm *m, int len)
{
    int32_t w[T] = {0};
    for (int i = 0; i < len; i++)
        w[i] = m->tokens[i];
    tk_upload(m->n.b, m->window_dev, w, sizeof w);
    fg_error err = {0};
    CHECK_OK(fg_replica_forward(m->n.rep, m->n.b->queue, m->window_dev, m->labels_dev, 1, 0,
                                NULL, NULL, &err), &err);
}

static void probs_row(lm *m, int pos, float *out)
{
    tk_download(m->n.b, out, fg_replica_probs(m->n.rep) + (size_t)pos * VOCAB,
                VOCAB * sizeof(float));
}

static int lm_create(lm *m, tk_backend *b, const char *text, uint64_t seed)
{
    if (tk_net_create(&m->n, b, text, (int64_t[]){T}, 1, VOCAB, 2, seed) != 0)
        return -1;
    m->window_dev = (int32_t *)tk_dev_alloc(b, T);
    m->labels_dev = (int32_t *)tk_dev_alloc(b, T);
    int32_t zeros[T] = {0};
    tk_upload(b, m->labels_dev, zeros, sizeof zeros);
    uint64_t key = fg_rng_key(seed, 77);
    for (int i = 0; i < T; i++)
        m->tokens[i] = (int32_t)(fg_rng_u64(key, (uint64_t)i) % VOCAB);
    for (int len = 1; len <= T; len++) {
        forward_window(m, len);
        probs_row(m, len - 1, m->ref[len - 1]);
    }
    return 0;
}

static void lm_destroy(lm *m)
{
    tk_dev_free(m->n.b, m->window_dev);
    tk_dev_free(m->n.b, m->labels_dev);
    tk_net_destroy(&m->n);
}

/* Worst relative difference of row pos against the reference; *peak: its largest p. */
static double row_error(const lm *m, int pos, const float *p, double *peak)
{
    double worst = 0;
    for (int v = 0; v < VOCAB; v++) {
        double f = m->ref[pos][v];
        worst = fmax(worst, fabs((double)p[v] - f) / fmax(f, 1e-30));
        *peak = fmax(*peak, f);
    }
    return worst;
}

/* Prefill tokens[0..prompt), then decode the rest one position at a time. */
static void check_decode(lm *m, int prompt, const char *what)
{
    fg_error err = {0};
    fg_decoder *d = NULL;
    CHECK_OK(fg_decoder_create(m->n.rep, &d, &err), &err);
    if (!d)
        return;
    forward_window(m, prompt);
    double worst = 0, peak = 0;
    float p[VOCAB];
    int calls = tk_alloc_calls;
    for (int pos = prompt; pos < T; pos++) {
        CHECK_OK(fg_decoder_step(d, m->n.b->queue, m->tokens[pos], pos, &err), &err);
        probs_row(m, pos, p);
        worst = fmax(worst, row_error(m, pos, p, &peak));
    }
    CHECK_EQ(tk_alloc_calls, calls);
    printf("  %s, prompt %d: positions %d..%d, worst relative error %.2e (largest p %.3f)\n",
           what, prompt, prompt, T - 1, worst, peak);
    CHECK(worst <= TOL, "%s: relative error %.3e above %.0e", what, worst, TOL);
    CHECK(peak > 1.5 / VOCAB, "%s: the distributions are uniform (peak %.4f)", what, peak);
    /* out of the context */
    CHECK(fg_decoder_step(d, m->n.b->queue, 1, T, &err) == FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "outside the model's context of 16") != NULL, "%s", err.message);
    fg_decoder_destroy(d);
}

static void test_model(tk_backend *b, const char *text, const char *what)
{
    lm m;
    if (lm_create(&m, b, text, 21) != 0)
        return;
    check_decode(&m, 1, what);
    check_decode(&m, 6, what);
    lm_destroy(&m);
}

/* The CPU backend without attention_decode: attention_forward over rows [0, pos]. */
static void test_without_decode_entry(tk_backend *b)
{
    fg_backend_vtable v = *b->be;
    v.attention_decode = NULL;
    tk_backend nb = *b;
    nb.be = &v;
    test_model(&nb, gpt, "gpt, attention_forward fallback");
    test_model(&nb, llama, "llama, attention_forward fallback");
}

static void expect_refused(tk_backend *b, const char *text, const char *needle)
{
    lm m;
    if (tk_net_create(&m.n, b, text, (int64_t[]){T}, 1, VOCAB, 1, 3) != 0)
        return;
    fg_error err = {0};
    fg_decoder *d = (fg_decoder *)&m; /* must be reset */
    CHECK(fg_decoder_create(m.n.rep, &d, &err) == FG_UNAVAILABLE);
    CHECK(d == NULL);
    CHECK(strstr(err.message, needle) != NULL, "'%s' lacks '%s'", err.message, needle);
    tk_net_destroy(&m.n);
}

static void test_refused(tk_backend *b)
{
    expect_refused(b,
                   "[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 8\n"
                   "[layer.h]\ntype = transformer_block\nheads = 2\ncausal = false\n"
                   "[layer.head]\ntype = linear\nout_features = 256\n",
                   "[layer.h] causal = false");
    expect_refused(b,
                   "[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 8\n"
                   "[layer.a]\ntype = linear\nout_features = 8\n"
                   "[layer.sum]\ntype = add\ninput = wte, a\n"
                   "[layer.head]\ntype = linear\nout_features = 256\n",
                   "name their inputs");
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
    fg_backend_vtable counted = tk_counting_backend(&b);
    tk_backend cb = b;
    cb.be = &counted;
    test_model(&cb, gpt, "gpt");
    test_model(&cb, mixed, "rmsnorm, gelu, linear");
    test_model(&cb, llama, "llama: gqa, rope, rmsnorm, swiglu, no bias");
    test_without_decode_entry(&cb);
    test_refused(&b);
    tk_backend_close(&b);
    return fg_test_report("model.decode");
}
