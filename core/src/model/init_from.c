/* Weights from a safetensors file into the model's host regions, by name. */
#include "init_from.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "hf_llama.h"

/* The GPT-2 modules Hugging Face stores as Conv1D: weight (in, out). */
static const fg_hf_rename gpt2_renames[] = {
    {".attn.qkv.", ".attn.c_attn."},
    {".attn.proj.", ".attn.c_proj."},
    {".mlp.fc.", ".mlp.c_fc."},
    {".mlp.proj.", ".mlp.c_proj."},
};

static int has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static fg_weights_layout detect_layout(const fg_ckpt *c)
{
    for (size_t i = 0; i < fg_ckpt_tensor_count(c); i++) {
        const char *name = fg_ckpt_tensor_name(c, i);
        if (has_suffix(name, ".attn.c_attn.weight"))
            return FG_WEIGHTS_HF_GPT2;
        if (strcmp(name, "model.embed_tokens.weight") == 0 ||
            strncmp(name, "model.layers.", strlen("model.layers.")) == 0)
            return FG_WEIGHTS_HF_LLAMA;
    }
    return FG_WEIGHTS_FULGUR;
}

/* Replaces the first `from` in name by `to` into out; 0 when name has no `from`. */
static int replace_once(const char *name, const char *from, const char *to, char *out,
                        size_t cap)
{
    const char *at = strstr(name, from);
    if (!at)
        return 0;
    snprintf(out, cap, "%.*s%s%s", (int)(at - name), name, to, at + strlen(from));
    return 1;
}

/* The file's name for model tensor `name`, and whether it is stored transposed; 0 when
 * the file has no such tensor. */
static int file_name_of(const fg_ckpt *c, fg_weights_layout layout, const char *name,
                        char *out, size_t cap, int *transposed)
{
    *transposed = 0;
    char hf[FG_TENSOR_NAME_MAX + 32];
    snprintf(hf, sizeof hf, "%s", name);
    if (layout == FG_WEIGHTS_HF_GPT2)
        for (size_t i = 0; i < sizeof gpt2_renames / sizeof *gpt2_renames; i++)
            if (replace_once(name, gpt2_renames[i].ours, gpt2_renames[i].theirs, hf,
                             sizeof hf)) {
                *transposed = has_suffix(name, ".weight");
                break;
            }
    const char *prefixes[] = {"", "transformer."};
    for (int p = 0; p < (layout == FG_WEIGHTS_HF_GPT2 ? 2 : 1); p++) {
        snprintf(out, cap, "%s%s", prefixes[p], hf);
        if (fg_ckpt_tensor_info(c, out, NULL, NULL, NULL, NULL) == FG_OK)
            return 1;
    }
    return 0;
}

static float half_to_float(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v = exp == 0    ? ldexpf((float)mant, -24)
              : exp == 31 ? (mant ? NAN : INFINITY)
                          : ldexpf((float)(mant | 0x400), exp - 25);
    return (h & 0x8000) ? -v : v;
}

static float bf16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* dst[i] = src element i, or of its transpose when (rows, cols) is stored (cols, rows). */
static void widen(const void *src, fg_dtype dtype, size_t n, int transposed, int64_t rows,
                  int64_t cols, float *dst)
{
    for (size_t i = 0; i < n; i++) {
        size_t j = transposed ? (size_t)(i % (size_t)cols) * (size_t)rows + i / (size_t)cols
                              : i;
        switch (dtype) {
        case FG_F32: memcpy(&dst[i], (const char *)src + 4 * j, 4); break;
        case FG_F64: dst[i] = (float)((const double *)src)[j]; break;
        case FG_F16: dst[i] = half_to_float(((const uint16_t *)src)[j]); break;
        default: dst[i] = bf16_to_float(((const uint16_t *)src)[j]); break;
        }
    }
}

static fg_status check_shape(const fg_tensor_info *t, const char *path, const char *fname,
                             fg_dtype dtype, int rank, const int64_t *shape, int transposed,
                             fg_error *err)
{
    char want[64], got[64];
    if (dtype != FG_F32 && dtype != FG_F16 && dtype != FG_BF16 && dtype != FG_F64)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "init_from %s: tensor '%s' is %s; model "
                            "weights are read from F32, F16, BF16 or F64", path, fname,
                            fg_ckpt_dtype_tag(dtype));
    int same = rank == t->rank && (!transposed || rank == 2);
    for (int d = 0; same && d < rank; d++)
        same = shape[transposed ? rank - 1 - d : d] == t->shape[d];
    if (same)
        return FG_OK;
    fg_ckpt_format_shape(want, sizeof want, t->rank, t->shape);
    fg_ckpt_format_shape(got, sizeof got, rank, shape);
    return fg_error_set(err, FG_INVALID_ARGUMENT, "init_from %s: tensor '%s' has shape %s, the "
                        "model's '%s' is %s%s", path, fname, got, t->name, want,
                        transposed ? " (stored transposed, as Hugging Face's Conv1D)" : "");
}

fg_status fg_init_from_tensor(fg_ckpt *c, const fg_tensor_info *t, const char *fname,
                              int transposed, float *dst, fg_error *err)
{
    fg_dtype dtype;
    int rank;
    int64_t shape[FG_MAX_DIMS];
    fg_status st = fg_ckpt_tensor_info(c, fname, &dtype, &rank, shape, err);
    if (st == FG_OK)
        st = check_shape(t, fg_ckpt_path(c), fname, dtype, rank, shape, transposed, err);
    if (st != FG_OK)
        return st;
    void *raw = malloc(t->numel * fg_dtype_size(dtype) + 1);
    if (!raw)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "init_from %s: no memory for '%s'",
                            fg_ckpt_path(c), fname);
    st = fg_ckpt_read_tensor(c, fname, dtype, rank, shape, raw, err);
    if (st == FG_OK)
        widen(raw, dtype, t->numel, transposed, t->rank == 2 ? t->shape[0] : 1,
              t->rank == 2 ? t->shape[1] : 1, dst);
    free(raw);
    return st;
}

void fg_init_from_note_kept(fg_init_from_result *res, const char *name)
{
    size_t len = strlen(res->kept_names);
    if (len + strlen(name) + 6 >= sizeof res->kept_names) {
        if (!has_suffix(res->kept_names, "..."))
            snprintf(res->kept_names + len, sizeof res->kept_names - len, ", ...");
        return;
    }
    snprintf(res->kept_names + len, sizeof res->kept_names - len, "%s%s", len ? ", " : "",
             name);
}

static fg_status load_all(const fg_model *m, fg_ckpt *c, fg_weights_layout layout, int strict,
                          float *params, float *buffers, fg_init_from_result *res,
                          fg_error *err)
{
    for (size_t i = 0; i < fg_model_tensor_count(m); i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        if (fg_tensor_is_fp8_state(t)) /* starts afresh: scales 1, empty histories */
            continue;
        char fname[FG_TENSOR_NAME_MAX + 48];
        int transposed;
        if (!file_name_of(c, layout, t->name, fname, sizeof fname, &transposed)) {
            if (strict)
                return fg_error_set(err, FG_INVALID_ARGUMENT,
                                    "init_from %s: the model's tensor '%s' is not in the file "
                                    "(%zu tensors); set [model] init_strict = false to keep "
                                    "what the file lacks at its initialisation",
                                    fg_ckpt_path(c), t->name, fg_ckpt_tensor_count(c));
            res->kept++;
            fg_init_from_note_kept(res, t->name);
            continue;
        }
        float *dst = (t->is_buffer ? buffers : params) + t->offset;
        fg_status st = fg_init_from_tensor(c, t, fname, transposed, dst, err);
        if (st != FG_OK)
            return st;
        res->loaded++;
    }
    return FG_OK;
}

fg_status fg_model_init_from(const fg_model *m, const char *path, fg_weights_layout layout,
                             int strict, int allow_nonfinite, float *params, float *buffers,
                             fg_init_from_result *res, fg_error *err)
{
    memset(res, 0, sizeof *res);
    fg_ckpt *c = NULL;
    fg_status st = fg_ckpt_open(path, &c, err);
    if (st != FG_OK)
        return st;
    fg_ckpt_refuse_nonfinite(c, !allow_nonfinite);
    res->layout = layout == FG_WEIGHTS_AUTO ? detect_layout(c) : layout;
    st = res->layout == FG_WEIGHTS_HF_LLAMA
             ? fg_init_from_llama(m, c, strict, params, buffers, res, err)
             : load_all(m, c, res->layout, strict, params, buffers, res, err);
    size_t file_tensors = fg_ckpt_tensor_count(c);
    if (res->layout != FG_WEIGHTS_HF_LLAMA) /* which counts its own: extras fail there */
        res->unused = file_tensors > res->loaded ? file_tensors - res->loaded : 0;
    fg_ckpt_close(c);
    return st;
}

static fg_status read_keys(const fg_config *cfg, const char **path, int *strict,
                           fg_weights_layout *layout, fg_error *err)
{
    size_t count;
    const fg_option *opts = fg_model_schema(&count);
    const char *origin, *text;
    *path = fg_section_value(cfg, "model", opts, count, "init_from", &origin);
    text = fg_section_value(cfg, "model", opts, count, "init_layout", &origin);
    *layout = strcmp(text, "hf_gpt2") == 0    ? FG_WEIGHTS_HF_GPT2
              : strcmp(text, "hf_llama") == 0 ? FG_WEIGHTS_HF_LLAMA
              : strcmp(text, "fulgur") == 0   ? FG_WEIGHTS_FULGUR
                                              : FG_WEIGHTS_AUTO;
    return fg_section_read_bool(cfg, "model", opts, count, "init_strict", strict, err);
}

static const char *layout_text(fg_weights_layout layout)
{
    return layout == FG_WEIGHTS_HF_GPT2    ? "Hugging Face GPT-2"
           : layout == FG_WEIGHTS_HF_LLAMA ? "Hugging Face Llama"
                                           : "fulgur";
}

fg_status fg_model_init_from_config(const fg_model *m, const fg_config *cfg, float *params,
                                    float *buffers, char *note, size_t note_cap,
                                    fg_error *err)
{
    note[0] = '\0';
    const char *path = NULL;
    int strict = 1;
    fg_weights_layout layout;
    fg_status st = read_keys(cfg, &path, &strict, &layout, err);
    if (st != FG_OK || !path || !path[0])
        return st;
    fg_init_from_result res;
    int allow_nonfinite = fg_config_is_true(cfg, "trainer", "allow_nonfinite");
    st = fg_model_init_from(m, path, layout, strict, allow_nonfinite, params, buffers, &res,
                            err);
    if (st != FG_OK)
        return st;
    snprintf(note, note_cap, "init_from %s: %zu tensors loaded (%s names)%s%s%s", path,
             res.loaded, layout_text(res.layout),
             res.kept ? "; kept at their initialisation: " : "", res.kept_names,
             res.unused ? "; file tensors no model tensor takes were skipped" : "");
    return FG_OK;
}
