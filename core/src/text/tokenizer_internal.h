/* The tokenizer's parts, shared by the loaders (tokenizer_gpt2.c, tokenizer_json.c) and
 * tokenizer.c. */
#ifndef FG_TOKENIZER_INTERNAL_H
#define FG_TOKENIZER_INTERNAL_H

#include "bpe_model.h"
#include "pretokenizer.h"
#include "spm.h"
#include "tokenizer.h"

struct fg_tokenizer {
    fg_bpe_model model;
    fg_pretokenizer *pre;
    fg_bytes_map special; /* spelling -> id (v0) of added and special tokens */
    int32_t eot;
    fg_spm *spm; /* a SentencePiece model: everything above unused */
};

/* encoder.json + vocab.bpe (or vocab.json + merges.txt) into t. */
fg_status fg_tokenizer_load_gpt2(fg_tokenizer *t, const char *vocab_path,
                                 const char *merges_path, fg_error *err);
/* A tokenizer.json into t. */
fg_status fg_tokenizer_load_json(fg_tokenizer *t, const char *path, fg_error *err);

/* A vocabulary entry spelled in the byte-level alphabet; `where` names it in messages. */
fg_status fg_tokenizer_add_spelled(fg_tokenizer *t, const char *spelled, int32_t id,
                                   const char *where, fg_error *err);
/* A merge line's two spellings, as rank. */
fg_status fg_tokenizer_add_merge(fg_tokenizer *t, const char *left, size_t left_len,
                                 const char *right, size_t right_len, int32_t rank,
                                 const char *where, fg_error *err);
/* An added or special token, its text as is. */
fg_status fg_tokenizer_add_special(fg_tokenizer *t, const char *text, int32_t id,
                                   const char *where, fg_error *err);

#endif
