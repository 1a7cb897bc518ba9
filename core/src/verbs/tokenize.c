/* fulgur tokenize: the input read in chunks by one thread (tokenize_input.c), encoded by
 * `threads` workers, each chunk's ids written in input order (tokenize_shards.c), so the
 * shards do not depend on the thread count. A fraction of the chunks, spread evenly and
 * chosen by their index alone, goes to the val shards. At most 2 * threads + 2 chunks are
 * in memory at once. */
#define _POSIX_C_SOURCE 200809L
#include "tokenize.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core_util.h"
#include "grow_array.h"
#include "tokenize_input.h"
#include "tokenize_shards.h"
#include "tokenizer.h"

typedef enum slot_state { SLOT_FREE, SLOT_READ, SLOT_TAKEN, SLOT_DONE } slot_state;

typedef struct slot {
    slot_state state;
    fg_tok_chunk chunk;
    fg_token_buf ids;
    fg_status st;
    fg_error err;
} slot;

typedef struct pipeline {
    const fg_tokenizer *tok;
    const fg_tok_inputs *in;
    int32_t eot;
    int32_t doc_end; /* the token after each document; -1: none */
    slot *slots;
    size_t nslots;
    uint64_t read_seq, take_seq; /* chunks handed to slots; chunks taken by workers */
    int closing;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
} pipeline;

static int push_id(fg_token_buf *b, int32_t id)
{
    if (fg_plugin_grow_array(&b->ids, &b->cap, b->len + 1, 4096, sizeof *b->ids) != 0)
        return -1;
    b->ids[b->len++] = id;
    return 0;
}

/* One chunk's ids: the end-of-text token (or BOS) first when it starts a document, and
 * the end-of-sequence token last when it ends one where the tokenizer has BOS. */
static fg_status encode_chunk(pipeline *p, fg_token_encoder *enc, slot *s)
{
    s->ids.len = 0;
    if (s->chunk.doc_start && push_id(&s->ids, p->eot) != 0)
        return fg_error_set(&s->err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
    fg_status st = fg_token_encode(enc, s->chunk.text, s->chunk.len, &s->ids, &s->err);
    if (st != FG_OK) {
        fg_error why = s->err;
        fg_error_set(&s->err, st, "fulgur tokenize: %s (the chunk at byte %lld): %s",
                     p->in->paths[s->chunk.file], (long long)s->chunk.offset, why.message);
        return st;
    }
    if (s->chunk.doc_end && p->doc_end >= 0 && push_id(&s->ids, p->doc_end) != 0)
        return fg_error_set(&s->err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
    return FG_OK;
}

static void *worker(void *arg)
{
    pipeline *p = arg;
    fg_token_encoder *enc = NULL;
    fg_error err = {0};
    fg_status create = fg_token_encoder_create(p->tok, &enc, &err);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->closing && p->take_seq == p->read_seq)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->take_seq == p->read_seq)
            break;
        slot *s = &p->slots[p->take_seq++ % p->nslots];
        s->state = SLOT_TAKEN;
        pthread_mutex_unlock(&p->mu);
        if (create == FG_OK)
            s->st = encode_chunk(p, enc, s);
        else {
            s->st = create;
            s->err = err;
        }
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    fg_token_encoder_free(enc);
    return NULL;
}

/* Whether chunk k goes to val: ceil((k + 1) f) > ceil(k f), so chunk 0 does when f > 0. */
static int is_val_chunk(uint64_t k, double f)
{
    return f > 0 && ceil((double)(k + 1) * f) > ceil((double)k * f);
}

typedef struct run_state {
    fg_shard_writer train, val;
    int64_t chunks;
    double t0, last_progress;
    int tty;
} run_state;

static void progress(run_state *r, const fg_tok_reader *rd, FILE *out, int final, int threads)
{
    double t = fg_now_seconds(), dt = t - r->t0;
    if (!final && t - r->last_progress < (r->tty ? 0.5 : 10.0)) /* a log: a line per 10 s */
        return;
    r->last_progress = t;
    int64_t tokens = r->train.total + r->val.total;
    fprintf(out, "%sfulgur tokenize: %.1f MB, %lld tokens (train %lld, val %lld), %.1f s, "
            "%.0f tokens/s on %d thread%s%s", r->tty ? "\r" : "", (double)rd->bytes_read / 1e6,
            (long long)tokens, (long long)r->train.total, (long long)r->val.total, dt,
            dt > 0 ? (double)tokens / dt : 0.0, threads, threads == 1 ? "" : "s",
            final || !r->tty ? "\n" : "");
    fflush(out);
}

/* Writes the oldest chunk once it is done; its slot is free again. */
static fg_status drain_one(pipeline *p, uint64_t seq, run_state *r, const fg_tokenize_options *o,
                           fg_error *err)
{
    slot *s = &p->slots[seq % p->nslots];
    pthread_mutex_lock(&p->mu);
    while (s->state != SLOT_DONE)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    fg_status st = s->st;
    if (st != FG_OK)
        *err = s->err;
    else
        st = fg_shard_writer_put(is_val_chunk(seq, o->val_fraction) ? &r->val : &r->train,
                                 s->ids.ids, s->ids.len, err);
    free(s->chunk.text);
    s->chunk.text = NULL;
    s->state = SLOT_FREE;
    return st;
}

static fg_status run_pipeline(pipeline *p, const fg_tokenize_options *o, run_state *r,
                              FILE *out, fg_error *err)
{
    fg_tok_reader rd;
    fg_tok_reader_init(&rd, p->in, (size_t)o->chunk_bytes);
    uint64_t written = 0;
    fg_status st = FG_OK;
    int more = 1;
    while (st == FG_OK && (more || written < p->read_seq)) {
        if (more && p->read_seq - written < p->nslots) {
            slot *s = &p->slots[p->read_seq % p->nslots];
            int rc = fg_tok_reader_next(&rd, &s->chunk, err);
            if (rc < 0)
                st = FG_INVALID_ARGUMENT;
            more = rc > 0;
            if (rc > 0) {
                pthread_mutex_lock(&p->mu);
                s->state = SLOT_READ;
                p->read_seq++;
                pthread_cond_signal(&p->work);
                pthread_mutex_unlock(&p->mu);
            }
            continue;
        }
        st = drain_one(p, written++, r, o, err);
        progress(r, &rd, out, 0, o->threads);
    }
    while (written < p->read_seq) /* after a failure: let the workers finish, drop the rest */
        drain_one(p, written++, r, o, &(fg_error){0});
    if (st == FG_OK)
        progress(r, &rd, out, 1, o->threads);
    fg_tok_reader_close(&rd);
    return st;
}

static fg_status check_options(const fg_tokenize_options *o, fg_error *err)
{
    if (!o->tokenizer || !o->tokenizer[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize needs --tokenizer PATH "
                            "(a tokenizer.json, or a folder with encoder.json and vocab.bpe)");
    if (!o->out_dir || !o->out_dir[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize needs -o OUTDIR");
    if (o->threads < 1 || o->threads > 1024)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: --threads %d is outside "
                            "[1, 1024]", o->threads);
    if (!(o->val_fraction >= 0 && o->val_fraction < 1))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: --val-fraction %g is "
                            "outside [0, 1)", o->val_fraction);
    if (o->shard_tokens < 1 || o->shard_tokens > INT32_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: --shard-tokens %lld is "
                            "outside [1, 2^31 - 1] (llm.c's header counts in int32)",
                            (long long)o->shard_tokens);
    if (o->chunk_bytes < 1024 || o->chunk_bytes > (1 << 30))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: --chunk-bytes %lld is "
                            "outside [1024, 2^30]", (long long)o->chunk_bytes);
    return FG_OK;
}

/* The output folder, created when absent; refused when it already holds shards. */
static fg_status prepare_out(const char *dir, fg_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0 && mkdir(dir, 0777) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: -o %s: cannot create "
                            "the folder: %s", dir, strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: -o %s: not a folder", dir);
    static const char *const first[] = {"train_000000.bin", "val_000000.bin"};
    char path[4200];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, first[i]);
        if (stat(path, &sb) == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: %s already exists: "
                                "remove the old shards or choose another -o folder", path);
    }
    return FG_OK;
}

/* The token before each document: --eot's; else a SentencePiece model's BOS (a sequence
 * starts with it, as Llama's do); else the end-of-text token (GPT-2's separator). */
static fg_status pick_eot(const fg_tokenizer *tok, const fg_tokenize_options *o, int32_t *eot,
                          fg_error *err)
{
    int32_t bos = fg_tokenizer_bos(tok);
    *eot = o->eot && o->eot[0] ? fg_tokenizer_special(tok, o->eot)
         : bos >= 0            ? bos
                               : fg_tokenizer_eot(tok);
    if (*eot >= 0)
        return FG_OK;
    return o->eot && o->eot[0]
               ? fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: --eot %s: the "
                              "tokenizer %s has no such token", o->eot, o->tokenizer)
               : fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: the tokenizer %s "
                              "declares none of BOS, <|endoftext|>, <|end_of_text|>, </s>: name "
                              "the token that separates documents with --eot TEXT", o->tokenizer);
}

static fg_status start_and_run(pipeline *p, const fg_tokenize_options *o, FILE *out,
                               fg_error *err)
{
    run_state r = {0};
    fg_shard_writer_init(&r.train, o->out_dir, "train", o->shard_tokens);
    fg_shard_writer_init(&r.val, o->out_dir, "val", o->shard_tokens);
    r.t0 = r.last_progress = fg_now_seconds();
    r.tty = isatty(fileno(out));
    pthread_t *tids = calloc((size_t)o->threads, sizeof *tids);
    if (!tids)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
    int started = 0;
    while (started < o->threads && pthread_create(&tids[started], NULL, worker, p) == 0)
        started++;
    fg_status st = started == o->threads ? run_pipeline(p, o, &r, out, err)
                 : fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: cannot start %d "
                                "threads", o->threads);
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    if (st == FG_OK)
        st = fg_shard_writer_finish(&r.train, err);
    if (st == FG_OK)
        st = fg_shard_writer_finish(&r.val, err);
    fg_shard_writer_abandon(&r.train);
    fg_shard_writer_abandon(&r.val);
    if (st == FG_OK)
        fprintf(out, "fulgur tokenize: wrote %d train shard%s and %d val shard%s to %s\n",
                r.train.shards, r.train.shards == 1 ? "" : "s", r.val.shards,
                r.val.shards == 1 ? "" : "s", o->out_dir);
    return st;
}

fg_status fg_tokenize(const fg_tokenize_options *o, FILE *out, fg_error *err)
{
    fg_status st = check_options(o, err);
    if (st != FG_OK)
        return st;
    fg_tokenizer *tok = NULL;
    fg_tok_inputs in = {0};
    pipeline p = {0};
    if ((st = fg_tokenizer_load(o->tokenizer, &tok, err)) != FG_OK)
        return st;
    if (fg_tokenizer_vocab_size(tok) > 65536)
        st = fg_error_set(err, FG_UNAVAILABLE, "fulgur tokenize: the tokenizer %s has %d ids; "
                          "llm.c's shards hold uint16 ids (at most 65536)", o->tokenizer,
                          fg_tokenizer_vocab_size(tok));
    if (st == FG_OK)
        st = pick_eot(tok, o, &p.eot, err);
    /* a sequence that starts with BOS (SentencePiece) ends with EOS: generate stops there */
    p.doc_end = st == FG_OK && fg_tokenizer_bos(tok) >= 0 ? fg_tokenizer_eot(tok) : -1;
    if (st == FG_OK)
        st = fg_tok_inputs_list(o->inputs, o->input_count, &in, err);
    if (st == FG_OK)
        st = prepare_out(o->out_dir, err);
    p.tok = tok;
    p.in = &in;
    p.nslots = 2 * (size_t)o->threads + 2;
    if (st == FG_OK && !(p.slots = calloc(p.nslots, sizeof *p.slots)))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
    if (st == FG_OK) {
        pthread_mutex_init(&p.mu, NULL);
        pthread_cond_init(&p.work, NULL);
        pthread_cond_init(&p.done, NULL);
        st = start_and_run(&p, o, out ? out : stderr, err);
        pthread_mutex_destroy(&p.mu);
        pthread_cond_destroy(&p.work);
        pthread_cond_destroy(&p.done);
    }
    for (size_t i = 0; p.slots && i < p.nslots; i++)
        fg_token_buf_free(&p.slots[i].ids);
    free(p.slots);
    fg_tok_inputs_free(&in);
    fg_tokenizer_free(tok);
    return st;
}
