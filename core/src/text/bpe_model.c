/* The byte-level BPE model (bpe_model.h). */
#include "bpe_model.h"
#include "core_util.h"

#include <stdlib.h>
#include <string.h>

#define MAX_IDS (1 << 24)

static int grow_ids(fg_bpe_model *m, int32_t id)
{
    if (id < m->ids)
        return 0;
    int32_t ids = id + 1;
    size_t *at = realloc(m->id_at, (size_t)ids * sizeof *at);
    if (!at)
        return -1;
    m->id_at = at;
    uint32_t *len = realloc(m->id_len, (size_t)ids * sizeof *len);
    if (!len)
        return -1;
    m->id_len = len;
    for (int32_t i = m->ids; i < ids; i++)
        m->id_len[i] = UINT32_MAX;
    m->ids = ids;
    return 0;
}

static int append_name(fg_bpe_model *m, const void *bytes, size_t n)
{
    return fg_append_bytes(&m->names, &m->names_len, &m->names_cap, bytes, n, 1 << 16);
}

fg_bpe_add fg_bpe_model_add_token(fg_bpe_model *m, const void *bytes, size_t n, int32_t id,
                                  int in_vocab)
{
    if (id < 0 || id >= MAX_IDS || n >= UINT32_MAX)
        return FG_BPE_BAD_ID;
    if (grow_ids(m, id) != 0)
        return FG_BPE_NO_MEMORY;
    if (m->id_len[id] != UINT32_MAX) {
        const unsigned char *have = (const unsigned char *)m->names + m->id_at[id];
        int same = m->id_len[id] == n && memcmp(have, bytes, n) == 0;
        return same ? FG_BPE_ADDED : FG_BPE_ID_TAKEN;
    }
    m->id_at[id] = m->names_len;
    m->id_len[id] = (uint32_t)n;
    if (append_name(m, bytes, n) != 0)
        return FG_BPE_NO_MEMORY;
    if (in_vocab && fg_bytes_map_put(&m->vocab, bytes, n, fg_text_hash(bytes, n), id, 0) != 0)
        return FG_BPE_NO_MEMORY;
    return FG_BPE_ADDED;
}

int32_t fg_bpe_model_find(const fg_bpe_model *m, const void *s, size_t n)
{
    const fg_bytes_entry *e = fg_bytes_map_find(&m->vocab, s, n, fg_text_hash(s, n));
    return e ? e->v0 : -1;
}

const unsigned char *fg_bpe_model_bytes(const fg_bpe_model *m, int32_t id, size_t *n)
{
    if (id < 0 || id >= m->ids || m->id_len[id] == UINT32_MAX)
        return NULL;
    *n = m->id_len[id];
    return (const unsigned char *)m->names + m->id_at[id];
}

int fg_bpe_model_add_merge(fg_bpe_model *m, int32_t a, int32_t b, int32_t rank)
{
    size_t na = 0, nb = 0;
    const unsigned char *sa = fg_bpe_model_bytes(m, a, &na), *sb = fg_bpe_model_bytes(m, b, &nb);
    unsigned char stack[512];
    unsigned char *joined = na + nb <= sizeof stack ? stack : malloc(na + nb);
    if (!sa || !sb || !joined)
        return -1;
    memcpy(joined, sa, na);
    memcpy(joined + na, sb, nb);
    int32_t merged = fg_bpe_model_find(m, joined, na + nb);
    if (joined != stack)
        free(joined);
    if (merged < 0)
        return -2;
    return fg_pair_map_add(&m->merges, a, b, rank, merged);
}

int fg_bpe_model_finish(fg_bpe_model *m)
{
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        if ((m->byte_id[b] = fg_bpe_model_find(m, &c, 1)) < 0)
            return b;
    }
    return -1;
}

void fg_bpe_model_free(fg_bpe_model *m)
{
    fg_bytes_map_free(&m->vocab);
    fg_pair_map_free(&m->merges);
    free(m->id_at);
    free(m->id_len);
    free(m->names);
    memset(m, 0, sizeof *m);
}

static int32_t pair_rank(const fg_bpe_model *m, int32_t a, int32_t b)
{
    const fg_pair_entry *e = fg_pair_map_find(&m->merges, a, b);
    return e ? e->rank : INT32_MAX;
}

/* Merges every (a, b) left to right in sym (len symbols) into merged; the new length. */
static size_t merge_everywhere(int32_t *sym, size_t len, int32_t a, int32_t b, int32_t merged)
{
    size_t j = 0;
    for (size_t i = 0; i < len; j++) {
        if (i + 1 < len && sym[i] == a && sym[i + 1] == b) {
            sym[j] = merged;
            i += 2;
        } else {
            sym[j] = sym[i++];
        }
    }
    return j;
}

size_t fg_bpe_encode_word(const fg_bpe_model *m, const unsigned char *word, size_t n,
                          int32_t *sym, int32_t *rank, int32_t *out)
{
    int32_t whole = m->ignore_merges ? fg_bpe_model_find(m, word, n) : -1;
    if (whole >= 0) {
        out[0] = whole;
        return 1;
    }
    size_t len = n;
    for (size_t i = 0; i < n; i++)
        sym[i] = m->byte_id[word[i]];
    for (size_t i = 0; i + 1 < len; i++)
        rank[i] = pair_rank(m, sym[i], sym[i + 1]);
    while (len > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < len; i++)
            best = rank[i] < rank[best] ? i : best;
        if (rank[best] == INT32_MAX)
            break;
        const fg_pair_entry *e = fg_pair_map_find(&m->merges, sym[best], sym[best + 1]);
        len = merge_everywhere(sym, len, sym[best], sym[best + 1], e->merged);
        for (size_t i = best ? best - 1 : 0; i + 1 < len; i++)
            rank[i] = pair_rank(m, sym[i], sym[i + 1]);
    }
    memcpy(out, sym, len * sizeof *out);
    return len;
}
