/* A byte-level BPE model: the vocabulary (byte strings and their ids, both ways), the
 * merges by rank, and the BPE of one pre-tokenized word: the lowest-ranked adjacent pair
 * merged everywhere it occurs, left to right, until no pair has a merge (GPT-2's bpe()). */
#ifndef FG_BPE_MODEL_H
#define FG_BPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "text_map.h"

typedef struct fg_bpe_model {
    fg_bytes_map vocab;  /* bytes -> id (v0) */
    size_t *id_at;       /* id -> offset of its bytes in `names` */
    uint32_t *id_len;    /* id -> byte count; UINT32_MAX: no such id */
    char *names;
    size_t names_len, names_cap;
    int32_t ids;         /* the largest id + 1 */
    int32_t byte_id[256];
    fg_pair_map merges;
    int ignore_merges;   /* a word that is a vocabulary entry is that token (Llama 3) */
} fg_bpe_model;

typedef enum fg_bpe_add {
    FG_BPE_ADDED = 0,
    FG_BPE_NO_MEMORY = -1,
    FG_BPE_ID_TAKEN = -2,   /* another string has this id */
    FG_BPE_BAD_ID = -3,     /* negative or too large */
} fg_bpe_add;

/* Adds a token; in_vocab: whether BPE may produce it (not an added/special token). */
fg_bpe_add fg_bpe_model_add_token(fg_bpe_model *m, const void *bytes, size_t n, int32_t id,
                                  int in_vocab);
/* The id of byte string s, or -1. */
int32_t fg_bpe_model_find(const fg_bpe_model *m, const void *s, size_t n);
/* Adds the merge of tokens a and b as rank; its result must be in the vocabulary.
 * 0; -1 out of memory; -2 the result is not in the vocabulary. */
int fg_bpe_model_add_merge(fg_bpe_model *m, int32_t a, int32_t b, int32_t rank);
/* After every token: the single-byte ids. The first byte without a token, or -1. */
int fg_bpe_model_finish(fg_bpe_model *m);
/* The bytes of id, or NULL when there is no such id. */
const unsigned char *fg_bpe_model_bytes(const fg_bpe_model *m, int32_t id, size_t *n);
void fg_bpe_model_free(fg_bpe_model *m);

/* The ids of word (n bytes) into out; sym and rank are scratch. All three hold n. Returns
 * the count. */
size_t fg_bpe_encode_word(const fg_bpe_model *m, const unsigned char *word, size_t n,
                          int32_t *sym, int32_t *rank, int32_t *out);

#endif
