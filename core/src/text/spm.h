/* A SentencePiece model (.model), through libsentencepiece: the one C++ file of the core
 * is its shim, spm_shim.cc; spm_absent.c stands in when fulgur was built without the
 * library and refuses every model with a message saying so. Loaded once, then read-only:
 * threads encode with one model at once (SentencePieceProcessor::Encode is const). */
#ifndef FG_SPM_H
#define FG_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fg_spm fg_spm;

/* Ids grown by an encoder; the same layout as tokenizer.h's fg_token_buf. */
struct fg_token_buf;

fg_status fg_spm_load(const char *path, fg_spm **out, fg_error *err);
void fg_spm_free(fg_spm *s);

int32_t fg_spm_vocab_size(const fg_spm *s);
/* The ids the model declares (its trainer_spec's bos_id, eos_id), -1 when it has none. */
int32_t fg_spm_bos(const fg_spm *s);
int32_t fg_spm_eos(const fg_spm *s);
/* The id of the piece spelled `piece`, or -1. */
int32_t fg_spm_piece_id(const fg_spm *s, const char *piece);
/* What id contributes to decoded text: a piece with U+2581 as a space, a byte piece
 * <0xNN> as that byte, the unknown piece as U+2047 (as SentencePiece decodes it), control
 * pieces (BOS, EOS, PAD) as nothing; NULL when id is outside the vocabulary. */
const unsigned char *fg_spm_bytes(const fg_spm *s, int32_t id, size_t *n);
/* Appends the ids of text (len bytes, valid UTF-8) to out, one line at a time as spm_encode
 * reads its input: a '\n' ends a line and is not itself encoded. */
fg_status fg_spm_encode(const fg_spm *s, const char *text, size_t len, struct fg_token_buf *out,
                        fg_error *err);

#ifdef __cplusplus
}
#endif

#endif
