/* Without libsentencepiece at build time (spm.h): every .model is refused, saying so. */
#include "spm.h"

#ifndef FULGUR_HAVE_SENTENCEPIECE
fg_status fg_spm_load(const char *path, fg_spm **out, fg_error *err)
{
    *out = NULL;
    return fg_error_set(err, FG_UNAVAILABLE, "tokenizer: %s is a SentencePiece model, and this "
                        "fulgur was built without SentencePiece (install libsentencepiece-dev, "
                        "tests/install-deps.sh, and build again)", path);
}

void fg_spm_free(fg_spm *s)
{
    (void)s;
}

int32_t fg_spm_vocab_size(const fg_spm *s)
{
    (void)s;
    return 0;
}

int32_t fg_spm_bos(const fg_spm *s)
{
    (void)s;
    return -1;
}

int32_t fg_spm_eos(const fg_spm *s)
{
    (void)s;
    return -1;
}

int32_t fg_spm_piece_id(const fg_spm *s, const char *piece)
{
    (void)s;
    (void)piece;
    return -1;
}

const unsigned char *fg_spm_bytes(const fg_spm *s, int32_t id, size_t *n)
{
    (void)s;
    (void)id;
    *n = 0;
    return NULL;
}

fg_status fg_spm_encode(const fg_spm *s, const char *text, size_t len, struct fg_token_buf *out,
                        fg_error *err)
{
    (void)s;
    (void)text;
    (void)len;
    (void)out;
    return fg_error_set(err, FG_UNAVAILABLE, "tokenizer: fulgur was built without SentencePiece");
}
#else
typedef int fg_spm_absent_unused; /* ISO C wants a translation unit to declare something */
#endif
