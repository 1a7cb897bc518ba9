/* A byte-level BPE tokenizer (GPT-2, Llama 3): loaded from a Hugging Face tokenizer.json
 * or from GPT-2's encoder.json + vocab.bpe (vocab.json + merges.txt), text encoded into ids
 * and ids decoded back into the exact bytes; or a SentencePiece model (a .model file,
 * through libsentencepiece: spm.h), text encoded a line at a time as spm_encode does. Text is encoded as ordinary text: a special
 * token's spelling in it (e.g. "<|endoftext|>") is split like any other text, as
 * tiktoken's encode_ordinary and GPT-2's encoder do; special tokens come from the caller
 * (fg_tokenizer_special). Loaded once and then read-only: threads share one, each with its
 * own fg_token_encoder. */
#ifndef FG_TOKENIZER_H
#define FG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

typedef struct fg_tokenizer fg_tokenizer;
typedef struct fg_token_encoder fg_token_encoder;

/* path: a tokenizer.json file, a SentencePiece .model file, or a folder holding
 * tokenizer.json, encoder.json and vocab.bpe, vocab.json and merges.txt, or tokenizer.model
 * (looked for in that order). Refuses, naming the file and what is wrong, anything but a
 * byte-level BPE or a SentencePiece model (and a .model when fulgur was built without
 * SentencePiece). */
fg_status fg_tokenizer_load(const char *path, fg_tokenizer **out, fg_error *err);
void fg_tokenizer_free(fg_tokenizer *t);

/* The largest id + 1. */
int32_t fg_tokenizer_vocab_size(const fg_tokenizer *t);
/* The id of a token spelled `text` (special and added tokens included), or -1. */
int32_t fg_tokenizer_special(const fg_tokenizer *t, const char *text);
/* The end-of-text token: a SentencePiece model's eos_id; else the first of <|endoftext|>,
 * <|end_of_text|>, </s> the files declare; or -1. */
int32_t fg_tokenizer_eot(const fg_tokenizer *t);
/* The token a sequence starts with: a SentencePiece model's bos_id (-1 when it has none);
 * -1 for byte-level BPE (GPT-2 separates documents with its end-of-text token). */
int32_t fg_tokenizer_bos(const fg_tokenizer *t);
/* Whether text is encoded a line at a time, newlines not encoded (SentencePiece). */
int fg_tokenizer_by_line(const fg_tokenizer *t);
/* The bytes of token id (for decoding), or NULL when no token has this id. */
const unsigned char *fg_tokenizer_bytes(const fg_tokenizer *t, int32_t id, size_t *n);

/* Ids, grown by the encoder. */
typedef struct fg_token_buf {
    int32_t *ids;
    size_t len, cap;
} fg_token_buf;
void fg_token_buf_free(fg_token_buf *b);

fg_status fg_token_encoder_create(const fg_tokenizer *t, fg_token_encoder **out, fg_error *err);
void fg_token_encoder_free(fg_token_encoder *e);
/* Appends the ids of text (len bytes) to out. Text that is not valid UTF-8 is refused with
 * the offset of the first bad byte (the reference encoders take Unicode strings). */
fg_status fg_token_encode(fg_token_encoder *e, const char *text, size_t len, fg_token_buf *out,
                          fg_error *err);

#endif
