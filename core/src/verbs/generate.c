/* fulgur generate: the continuation of [generate] prompt by a language model, its tokens
 * bytes (vocab 256) or, with [generate] tokenizer, the tokenizer's (generate_text.c; the
 * text stops at its end-of-text token), printed as UTF-8 with invalid sequences replaced. The
 * next token is sampled from the softmax at the last position of the last `context`
 * tokens (the prompt left-aligned and zero-padded while shorter: causal attention never
 * looks right), with temperature and top-k, by a generator seeded from [generate] seed
 * alone.
 *
 * Without the KV cache (kv_cache = false) each token is one forward of that window. With
 * it (decode.h), the prompt is one forward and each later token one position against the
 * blocks' cached keys and values, while the text fits the context; once it is longer, the
 * window slides by one per token and every position moves, so (with learned absolute
 * position embeddings) no cached key stays valid: each such token is again one forward of
 * the window, which refills the cache. Either way the probabilities are the full forward's
 * (to rounding), so the text is the same.
 *
 * With [generate] chat = true (fulgur chat) each line of stdin is a user's turn: its
 * template's tokens join the conversation and run through the cache one position at a time
 * (the cache outlives the turn), then the reply is sampled as above and printed on a line. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core_schema.h"
#include "core_util.h"
#include "decode.h"
#include "generate.h"
#include "generate_text.h"
#include "train_services.h"
#include "utf8.h"


typedef struct gen_options {
    const char *prompt, *tokenizer, *chat_template;
    int64_t max_new, top_k, seed;
    double temperature;
    int kv_cache, chat;
} gen_options;

/* [generate] keys (validated with the config), their defaults from the core schema. */
static fg_status read_options(const fg_config *cfg, gen_options *o, fg_error *err)
{
    size_t n = 0;
    const fg_option *opts = fg_core_schema("generate", &n);
    const char *origin;
    o->prompt = fg_section_value(cfg, "generate", opts, n, "prompt", &origin);
    o->tokenizer = fg_section_value(cfg, "generate", opts, n, "tokenizer", &origin);
    o->chat_template = fg_section_value(cfg, "generate", opts, n, "chat_template", &origin);
    fg_status st = fg_section_read_int(cfg, "generate", opts, n, "max_new_tokens", &o->max_new,
                                       err);
    if (st == FG_OK)
        st = fg_section_read_int(cfg, "generate", opts, n, "top_k", &o->top_k, err);
    if (st == FG_OK)
        st = fg_section_read_int(cfg, "generate", opts, n, "seed", &o->seed, err);
    if (st == FG_OK)
        st = fg_section_read_float(cfg, "generate", opts, n, "temperature", &o->temperature, err);
    if (st == FG_OK)
        st = fg_section_read_bool(cfg, "generate", opts, n, "kv_cache", &o->kv_cache, err);
    if (st == FG_OK)
        st = fg_section_read_bool(cfg, "generate", opts, n, "chat", &o->chat, err);
    return st;
}

static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A token from probabilities p (vocab): greedy at temperature 0, else p^(1/T) over the top
 * k, drawn with one uniform number. w is scratch of vocab doubles. */
static int sample_token(const float *p, int vocab, const gen_options *o, uint64_t *rng,
                        double *w)
{
    int best = 0;
    for (int i = 1; i < vocab; i++)
        best = p[i] > p[best] ? i : best;
    if (o->temperature <= 0)
        return best;
    double kth = 0; /* the k-th largest probability: tokens below it are out */
    if (o->top_k > 0 && o->top_k < vocab) {
        for (int i = 0; i < vocab; i++)
            w[i] = p[i];
        for (int64_t k = 0; k < o->top_k; k++) { /* k passes over the vocabulary */
            int m = 0;
            for (int i = 1; i < vocab; i++)
                m = w[i] > w[m] ? i : m;
            kth = w[m];
            w[m] = -1;
        }
    }
    double total = 0;
    for (int i = 0; i < vocab; i++) {
        w[i] = p[i] > 0 && p[i] >= kth ? exp(log((double)p[i]) / o->temperature) : 0.0;
        total += w[i];
    }
    double u = (double)(next_u64(rng) >> 11) * 0x1.0p-53 * total;
    for (int i = 0; i < vocab; i++) {
        if (u < w[i])
            return i;
        u -= w[i];
    }
    return best;
}

/* Bytes as UTF-8 text: every invalid or truncated sequence becomes U+FFFD. */
static void print_utf8(FILE *out, const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t len = fg_utf8_sequence(s + i, n - i);
        if (len) {
            fwrite(s + i, 1, len, out);
            i += len;
        } else {
            fputs("\xef\xbf\xbd", out);
            i++;
        }
    }
}

/* Bytes of a UTF-8 sequence its lead byte announces (0: not a lead byte). */
static size_t utf8_announced(unsigned char c)
{
    return c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

/* Where printing may stop now: before a trailing sequence that is not complete yet but
 * may still become valid (its continuation bytes are still to be generated). */
static size_t utf8_printable(const unsigned char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xc0) == 0x80)
            continue; /* a continuation byte: look further back for its lead */
        size_t want = utf8_announced(c);
        return want > back ? n - back : n;
    }
    return n;
}

/* The text as it grows: everything up to a sequence still being written, flushed, so a
 * reader sees each token as it comes (Ctrl-C keeps what was printed, `| head` ends it). */
typedef struct text_stream {
    FILE *out;
    size_t printed;
} text_stream;

static fg_status stream_text(text_stream *ts, const unsigned char *text, size_t len, int final,
                             fg_error *err)
{
    size_t upto = final ? len : utf8_printable(text, len);
    if (upto > ts->printed) {
        print_utf8(ts->out, text + ts->printed, upto - ts->printed);
        ts->printed = upto;
    }
    if (final)
        fputc('\n', ts->out);
    if (fflush(ts->out) != 0 || ferror(ts->out)) /* a closed pipe, a full disk: stop */
        return fg_error_set(err, FG_IO_ERROR, "fulgur generate: cannot write the text: %s",
                            strerror(errno));
    return FG_OK;
}

static fg_status check_model(const fg_verb_model *vm, int *context, int *vocab, fg_error *err)
{
    *context = fg_model_positions(vm->model);
    *vocab = fg_model_num_classes(vm->model);
    size_t sample = fg_shape_numel(fg_model_input_shape(vm->model));
    if (fg_model_input_dtype(vm->model) != FG_I32 || *context < 1 || sample != (size_t)*context)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur generate needs a language model: "
                            "token ids in (an embedding first) and one score per position and "
                            "token out");
    return FG_OK;
}

/* Probabilities of position `at` of the replica's last forward (or decode step) into p. */
static fg_status read_probs(const fg_verb_model *vm, void *primary, int at, float *p, fg_error *err)
{
    fg_replica *r = fg_train_stage_model(primary);
    void *queue = fg_train_stage_queue(primary);
    int vocab = fg_model_num_classes(vm->model);
    fg_status st = vm->be->copy(vm->bs, queue, p, -1,
                               fg_replica_probs(r) + (size_t)at * vocab,
                               fg_train_stage_device(primary), (size_t)vocab * sizeof(float),
                               err);
    if (st == FG_OK)
        st = vm->be->queue_sync(vm->bs, queue, err);
    return st;
}

/* One forward of `window` (context ids); probs of position `at` into p. */
static fg_status next_probs(const fg_verb_model *vm, void *primary, const int32_t *window,
                            const int32_t *labels, int context, int at, float *p,
                            fg_error *err)
{
    const fg_train_services *svc = vm->svc;
    fg_batch b = {sizeof b, (const float *)(const void *)window, labels, 1, context, NULL, context,
                  window, FG_I32, labels, FG_I32};
    fg_status st = svc->forward(svc->ctx, primary, 0, &b, 0, NULL, 0, err);
    return st == FG_OK ? read_probs(vm, primary, at, p, err) : st;
}

/* The KV cache, or NULL when off or when the model has no incremental path (said once on
 * stderr: the text is the same, only slower). */
static fg_decoder *open_cache(void *primary, const gen_options *o)
{
    fg_decoder *dec = NULL;
    fg_error why = {0};
    if (o->kv_cache && fg_decoder_create(fg_train_stage_model(primary), &dec, &why) != FG_OK)
        fprintf(stderr, "fulgur generate: no KV cache (%s); a full forward per token\n",
                why.message);
    return dec;
}

/* Scratch of one generation, taken once. */
typedef struct gen_scratch {
    int32_t *window, *labels;
    float *p;
    double *w;
} gen_scratch;

/* The next token's probabilities into s->p: against the cache when the window still
 * starts at the text's first token (`cached` positions held; NO_FORWARD before the first
 * forward), the positions not yet cached run one at a time; else one forward of the last
 * `context` tokens. */
#define NO_FORWARD SIZE_MAX
static fg_status probs_for(const fg_verb_model *vm, void *primary, fg_decoder *dec, gen_scratch *s,
                           int context, const int32_t *text, size_t len, size_t *cached,
                           fg_error *err)
{
    if (dec && len >= 1 && len <= (size_t)context && *cached != NO_FORWARD && *cached < len) {
        /* the positions since the last step (a chat's next turn: several), one at a time */
        void *queue = fg_train_stage_queue(primary);
        fg_status st = FG_OK;
        for (size_t pos = *cached; st == FG_OK && pos + 1 < len; pos++) {
            st = fg_decoder_step(dec, queue, text[pos], (int)pos, err);
            if (st == FG_OK)
                st = vm->be->queue_sync(vm->bs, queue, err);
        }
        int pos = (int)len - 1;
        if (st == FG_OK)
            st = fg_decoder_step(dec, queue, text[pos], pos, err);
        if (st == FG_OK)
            st = read_probs(vm, primary, pos, s->p, err);
        *cached = len;
        return st;
    }
    size_t n = len < (size_t)context ? len : (size_t)context; /* the last n tokens */
    memset(s->window, 0, (size_t)context * sizeof *s->window);
    for (size_t i = 0; i < n; i++)
        s->window[i] = text[len - n + i];
    /* after a slide the next window slides too: nothing cached stays at its position */
    *cached = len <= (size_t)context ? len : 0;
    /* nothing yet: predict from a single zero byte (its row is not kept) */
    return next_probs(vm, primary, s->window, s->labels, context, n ? (int)n - 1 : 0, s->p,
                      err);
}

/* What stays from one reply to the next: scratch, the KV cache and what it holds, the
 * generator. */
typedef struct gen_session {
    gen_scratch s;
    fg_decoder *dec;
    size_t cached;
    uint64_t rng;
    double first_s, rest_s; /* the first token's time (the prompt), the others' */
    int64_t made;
} gen_session;

static fg_status session_open(gen_session *ss, void *primary, const gen_options *o, int context,
                              int vocab, fg_error *err)
{
    memset(ss, 0, sizeof *ss);
    ss->s = (gen_scratch){calloc((size_t)context, sizeof *ss->s.window),
                          calloc((size_t)context, sizeof *ss->s.labels),
                          malloc((size_t)vocab * sizeof *ss->s.p),
                          malloc((size_t)vocab * sizeof *ss->s.w)};
    ss->cached = NO_FORWARD;
    ss->rng = (uint64_t)o->seed;
    if (!ss->s.window || !ss->s.labels || !ss->s.p || !ss->s.w)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur generate: out of memory");
    ss->dec = open_cache(primary, o);
    return FG_OK;
}

static void session_close(gen_session *ss)
{
    fg_decoder_destroy(ss->dec);
    free(ss->s.window);
    free(ss->s.labels);
    free(ss->s.p);
    free(ss->s.w);
}

/* Up to max_new tokens after g's text, each streamed; *eos: whether the end-of-text token
 * (not pushed) ended it. */
static fg_status reply(const fg_verb_model *vm, void *primary, const gen_options *o, gen_session *ss,
                       int context, int vocab, fg_gen_text *g, text_stream *ts, int *eos,
                       fg_error *err)
{
    fg_status st = FG_OK;
    *eos = 0;
    for (int64_t made = 0; st == FG_OK && !*eos && made < o->max_new; made++) {
        double t0 = fg_now_seconds();
        st = probs_for(vm, primary, ss->dec, &ss->s, context, g->ids, g->len, &ss->cached, err);
        int32_t id = -1;
        if (st == FG_OK) {
            fg_gen_text_mask(g, ss->s.p, vocab);
            id = sample_token(ss->s.p, vocab, o, &ss->rng, ss->s.w);
            *eos = id == g->eot; /* the end of the text: not printed */
        }
        if (st == FG_OK && !*eos)
            st = fg_gen_text_push(g, id, err);
        if (st == FG_OK && !*eos)
            st = stream_text(ts, g->bytes, g->nbytes, 0, err);
        *(ss->made++ == 0 ? &ss->first_s : &ss->rest_s) += fg_now_seconds() - t0;
    }
    return st;
}

static void print_speed(const gen_session *ss)
{
    if (ss->made > 1)
        fprintf(stderr, "fulgur generate: %" PRId64 " tokens in %.3f s: the first (the prompt) "
                "%.3f s, then %.1f tokens/s (KV cache %s)\n", ss->made, ss->first_s + ss->rest_s,
                ss->first_s, ss->rest_s > 0 ? (double)(ss->made - 1) / ss->rest_s : 0.0,
                ss->dec ? "on" : "off");
}

static fg_status generate(const fg_verb_model *vm, void *primary, const gen_options *o, int context,
                          int vocab, fg_gen_text *g, text_stream *ts, fg_error *err)
{
    gen_session ss;
    int eos = 0;
    fg_status st = session_open(&ss, primary, o, context, vocab, err);
    if (st == FG_OK)
        st = reply(vm, primary, o, &ss, context, vocab, g, ts, &eos, err);
    if (st == FG_OK)
        print_speed(&ss);
    session_close(&ss);
    return st;
}

/* A chat: each line of stdin a user's turn, put in the template (generate_text.h), the
 * reply printed on its own line; the KV cache keeps the conversation between turns. */
static fg_status chat(const fg_verb_model *vm, void *primary, const gen_options *o, int context,
                      int vocab, fg_gen_text *g, FILE *out, fg_error *err)
{
    gen_session ss;
    fg_status st = session_open(&ss, primary, o, context, vocab, err);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    for (int turn = 1; st == FG_OK && (n = getline(&line, &cap, stdin)) >= 0; turn++) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        st = fg_gen_text_turn(g, line, err);
        text_stream ts = {out, g->nbytes};
        size_t context_len = g->len, made = 0;
        int eos = 0;
        if (st == FG_OK)
            st = reply(vm, primary, o, &ss, context, vocab, g, &ts, &eos, err);
        if (st == FG_OK) {
            made = g->len - context_len;
            st = stream_text(&ts, g->bytes, g->nbytes, 1, err);
        }
        if (st == FG_OK) {
            fprintf(stderr, "fulgur chat: turn %d: %zu tokens of context, a reply of %zu "
                    "(ended by %s):", turn, context_len, made, eos ? "EOS" : "max_new_tokens");
            for (size_t i = context_len; i < g->len; i++)
                fprintf(stderr, " %d", (int)g->ids[i]);
            fputc('\n', stderr);
            st = fg_gen_text_end_reply(g, err);
        }
    }
    free(line);
    if (st == FG_OK)
        print_speed(&ss);
    session_close(&ss);
    return st;
}

fg_status fg_trainer_generate(const fg_verb_model *vm, fg_error *err)
{
    if (vm->world_size != 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur generate runs in one process; "
                            "start it without mpirun");
    gen_options o;
    int context, vocab;
    fg_status st = read_options(vm->cfg, &o, err);
    if (st == FG_OK)
        st = check_model(vm, &context, &vocab, err);
    void *primary = st == FG_OK ? vm->strategy->primary_replica(vm->strategy_state) : NULL;
    if (st == FG_OK && !primary)
        st = fg_error_set(err, FG_UNAVAILABLE, "fulgur generate: [strategy] %s keeps no whole "
                          "model on one device; generate under strategy.single",
                          vm->strategy_name);
    if (st != FG_OK)
        return st;
    fg_gen_text g;
    if ((st = fg_gen_text_open(&g, o.tokenizer, o.prompt, vocab, err)) != FG_OK)
        return st;
    text_stream ts = {vm->text_out ? vm->text_out : stdout, 0};
    if (o.chat) {
        st = fg_gen_text_chat(&g, o.tokenizer, o.chat_template, o.prompt, err);
        if (st == FG_OK)
            st = chat(vm, primary, &o, context, vocab, &g, ts.out, err);
        fg_gen_text_close(&g);
        return st;
    }
    st = stream_text(&ts, g.bytes, g.nbytes, 0, err);
    if (st == FG_OK)
        st = generate(vm, primary, &o, context, vocab, &g, &ts, err);
    if (st == FG_OK)
        st = stream_text(&ts, g.bytes, g.nbytes, 1, err);
    fg_gen_text_close(&g);
    return st;
}
