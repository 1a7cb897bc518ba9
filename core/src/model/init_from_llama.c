/* init_from in the Hugging Face Llama layout: each model tensor read from its file tensors
 * (attn.qkv from q_proj, k_proj and v_proj, row ranges of one tensor), then every file
 * tensor checked to have been read: a tensor the model has no place for fails by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "hf_llama.h"
#include "init_from.h"

/* Part p of model tensor t as a tensor of its own: rows [first_row, first_row + rows). */
static fg_tensor_info part_info(const fg_tensor_info *t, const fg_hf_part *p, int count)
{
    fg_tensor_info part = *t;
    int64_t cols = t->rank == 2 ? t->shape[1] : 1;
    part.shape[0] = p->rows;
    part.numel = (size_t)(p->rows * cols);
    if (count > 1)
        snprintf(part.name, sizeof part.name, "%.60s rows %lld..%lld", t->name,
                 (long long)p->first_row, (long long)(p->first_row + p->rows - 1));
    return part;
}

static int file_index(const fg_ckpt *c, const char *name)
{
    for (size_t i = 0; i < fg_ckpt_tensor_count(c); i++)
        if (strcmp(fg_ckpt_tensor_name(c, i), name) == 0)
            return (int)i;
    return -1;
}

static fg_status missing(const fg_ckpt *c, const fg_tensor_info *t, const char *fname,
                         fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "init_from %s: tensor '%s' (the model's "
                        "'%s') is not in the file (%zu tensors, Hugging Face Llama names); set "
                        "[model] init_strict = false to keep what the file lacks at its "
                        "initialisation", fg_ckpt_path(c), fname, t->name,
                        fg_ckpt_tensor_count(c));
}

/* Model tensor t from its parts; *found = 0 when the file has none of them. */
static fg_status load_parts(fg_ckpt *c, const fg_tensor_info *t, const fg_hf_part *parts,
                            int count, float *dst, unsigned char *used, int *found,
                            fg_error *err)
{
    int64_t cols = t->rank == 2 ? t->shape[1] : 1;
    int present = 0;
    for (int p = 0; p < count; p++)
        present += file_index(c, parts[p].name) >= 0;
    *found = present > 0;
    for (int p = 0; p < count && present > 0; p++) {
        int at = file_index(c, parts[p].name);
        if (at < 0)
            return missing(c, t, parts[p].name, err);
        fg_tensor_info part = part_info(t, &parts[p], count);
        fg_status st = fg_init_from_tensor(c, &part, parts[p].name, 0,
                                           dst + parts[p].first_row * cols, err);
        if (st != FG_OK)
            return st;
        used[at] = 1;
    }
    return FG_OK;
}

static int head_is_tied(const fg_model *m)
{
    for (size_t l = 0; l < fg_model_layer_count(m); l++)
        if (fg_model_layer(m, l)->tied)
            return 1;
    return 0;
}

/* Every file tensor was read (or is derived from the config). */
static fg_status check_all_used(const fg_model *m, const fg_ckpt *c, const unsigned char *used,
                                fg_init_from_result *res, fg_error *err)
{
    for (size_t i = 0; i < fg_ckpt_tensor_count(c); i++) {
        const char *name = fg_ckpt_tensor_name(c, i);
        if (used[i])
            continue;
        if (fg_hf_llama_is_derived(name)) {
            res->unused++;
            continue;
        }
        int tied_head = strcmp(name, "lm_head.weight") == 0 && head_is_tied(m);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "init_from %s: tensor '%s' has no place "
                            "in the model%s", fg_ckpt_path(c), name,
                            tied_head ? " (its lm_head is tied to the embedding, "
                                        "tie_word_embeddings: the file's own lm_head.weight "
                                        "would be ignored)"
                                      : "");
    }
    return FG_OK;
}

fg_status fg_init_from_llama(const fg_model *m, fg_ckpt *c, int strict, float *params,
                             float *buffers, fg_init_from_result *res, fg_error *err)
{
    unsigned char *used = calloc(fg_ckpt_tensor_count(c) + 1, 1);
    if (!used)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "init_from %s: out of memory",
                            fg_ckpt_path(c));
    fg_status st = FG_OK;
    for (size_t i = 0; st == FG_OK && i < fg_model_tensor_count(m); i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        if (fg_tensor_is_fp8_state(t)) /* starts afresh: scales 1, empty histories */
            continue;
        fg_hf_part parts[3];
        int count = 0, found = 0;
        st = fg_hf_llama_parts(m, i, parts, &count, err);
        if (st == FG_OK)
            st = load_parts(c, t, parts, count, (t->is_buffer ? buffers : params) + t->offset,
                            used, &found, err);
        if (st != FG_OK || found) {
            res->loaded += found;
            continue;
        }
        if (strict)
            st = missing(c, t, parts[0].name, err);
        res->kept++;
        fg_init_from_note_kept(res, t->name);
    }
    if (st == FG_OK)
        st = check_all_used(m, c, used, res, err);
    free(used);
    return st;
}
