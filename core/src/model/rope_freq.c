/* Rope scaling's keys and its table of inverse frequencies (rope_freq.h). Llama 3's rule,
 * per pair of wavelength w = 2 pi / f against the original context L: w < L / high keeps
 * f, w > L / low divides it by factor, and between the two it blends f / factor and f by
 * s = (L / w - low) / (high - low). Linear divides every f by factor. */
#include <math.h>
#include <string.h>

#include "rope_freq.h"

static fg_status refuse(const fg_layer *l, const fg_config *cfg, const char *key,
                        const char *why, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] %s: %s",
                        fg_config_origin(cfg, l->section, key), l->section, key, why);
}

static int scaling_of(const char *v)
{
    if (v && strcmp(v, "llama3") == 0)
        return FG_ROPE_SCALING_LLAMA3;
    if (v && strcmp(v, "linear") == 0)
        return FG_ROPE_SCALING_LINEAR;
    return FG_ROPE_SCALING_NONE;
}

/* llama3's three parameters besides factor. */
static const char *const llama3_keys[] = {"rope_low_freq_factor", "rope_high_freq_factor",
                                          "rope_original_max_position_embeddings"};

static fg_status read_values(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    int64_t original = 0;
    const fg_layer_key keys[] = {
        {"rope_factor", .f = &l->rope_factor},
        {llama3_keys[0], .f = &l->rope_low_freq_factor},
        {llama3_keys[1], .f = &l->rope_high_freq_factor},
        {llama3_keys[2], .i = &original},
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
    l->rope_original_max_positions = (double)original;
    return st;
}

/* Each key the scaling uses is set; none it does not use is. */
static fg_status check_keys(const fg_layer *l, const fg_config *cfg, fg_error *err)
{
    static const char *const all[] = {"rope_factor", "rope_low_freq_factor",
                                      "rope_high_freq_factor",
                                      "rope_original_max_position_embeddings"};
    int used = l->rope_scaling == FG_ROPE_SCALING_LLAMA3   ? 4
               : l->rope_scaling == FG_ROPE_SCALING_LINEAR ? 1
                                                           : 0;
    for (int k = 0; k < 4; k++) {
        int set = fg_config_get(cfg, l->section, all[k]) != NULL;
        if (k < used && !set)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] rope_scaling = %s needs "
                                "%s (Hugging Face's rope_scaling.%s; there is no default)",
                                fg_config_origin(cfg, l->section, "rope_scaling"), l->section,
                                fg_config_get(cfg, l->section, "rope_scaling"), all[k],
                                k == 3 ? "original_max_position_embeddings" : all[k] + 5);
        if (k >= used && set)
            return refuse(l, cfg, all[k], used == 0 ? "only with rope_scaling = llama3 or "
                          "linear" : "only with rope_scaling = llama3", err);
    }
    return FG_OK;
}

fg_status fg_rope_scaling_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    l->rope_scaling = scaling_of(fg_config_get(cfg, l->section, "rope_scaling"));
    if (l->rope_scaling != FG_ROPE_SCALING_NONE && !l->rope)
        return refuse(l, cfg, "rope_scaling", "only with position = rope", err);
    fg_status st = read_values(l, cfg, err);
    if (st == FG_OK)
        st = check_keys(l, cfg, err);
    if (st != FG_OK || l->rope_scaling == FG_ROPE_SCALING_NONE)
        return st;
    if (l->rope_scaling == FG_ROPE_SCALING_LLAMA3 &&
        !(l->rope_low_freq_factor > 0 && l->rope_high_freq_factor > l->rope_low_freq_factor))
        return refuse(l, cfg, "rope_high_freq_factor", "must be greater than "
                      "rope_low_freq_factor, and that > 0 (Llama 3 blends the frequencies "
                      "between the two)", err);
    if (l->rope_scaling == FG_ROPE_SCALING_LLAMA3 && l->rope_original_max_positions < 1)
        return refuse(l, cfg, "rope_original_max_position_embeddings", "must be >= 1", err);
    return FG_OK;
}

double fg_rope_inv_freq(int scaling, double theta, double factor, double low, double high,
                        double original, int i, int64_t head_dim)
{
    double f = 1.0 / pow(theta, 2.0 * i / (double)head_dim);
    if (scaling == FG_ROPE_SCALING_LINEAR)
        return f / factor;
    if (scaling != FG_ROPE_SCALING_LLAMA3)
        return f;
    double wavelen = 2 * 3.14159265358979323846 / f; /* math.py's pi, as Hugging Face's */
    if (wavelen < original / high)
        return f;
    if (wavelen > original / low)
        return f / factor;
    double smooth = (original / wavelen - low) / (high - low);
    return (1 - smooth) * f / factor + smooth * f;
}

fg_status fg_rope_scaling_plan(fg_layer *l, int64_t head_dim, fg_error *err)
{
    if (!l->rope || l->rope_scaling == FG_ROPE_SCALING_NONE)
        return FG_OK;
    if (head_dim / 2 > FG_ROPE_MAX_PAIRS)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] rope_scaling: head_dim = "
                            "%lld, at most %d with a scaled rope", l->origin, l->section,
                            (long long)head_dim, 2 * FG_ROPE_MAX_PAIRS);
    for (int i = 0; i < head_dim / 2; i++)
        l->rope_inv_freq[i] = fg_rope_inv_freq(l->rope_scaling, l->rope_theta, l->rope_factor,
                                               l->rope_low_freq_factor,
                                               l->rope_high_freq_factor,
                                               l->rope_original_max_positions, i, head_dim);
    return FG_OK;
}
