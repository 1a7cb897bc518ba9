/* config.json's rope_scaling in and out (hf_rope_scaling.h), with Hugging Face's names:
 * rope_type (or the older "type"), factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings. */
#include "hf_rope_scaling.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static fg_status refuse(const char *path, const char *key, const char *why, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"rope_scaling.%s\" %s", path, key,
                        why);
}

static const char *type_of(const json_t *v)
{
    const json_t *t = json_object_get(v, "rope_type");
    if (!t)
        t = json_object_get(v, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* The keys a type has: 0 "rope_type"/"type", then the numbers it needs. */
static const char *const llama3_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                          "original_max_position_embeddings"};

static fg_status check_known(const char *path, const json_t *v, int numbers, fg_error *err)
{
    const char *key;
    json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        int known = !strcmp(key, "rope_type") || !strcmp(key, "type");
        for (int i = 0; i < numbers; i++)
            known |= !strcmp(key, llama3_keys[i]);
        if (!known)
            return refuse(path, key, "is not a key of this rope_type (fulgur will not guess "
                          "what it changes)", err);
    }
    for (int i = 0; i < numbers; i++)
        if (!json_is_number(json_object_get(v, llama3_keys[i])))
            return refuse(path, llama3_keys[i], json_object_get(v, llama3_keys[i])
                          ? "is not a number" : "is missing (this rope_type needs it)", err);
    return FG_OK;
}

fg_status fg_hf_rope_scaling_read(const char *path, const json_t *v, fg_hf_rope_scaling *out,
                                  fg_error *err)
{
    memset(out, 0, sizeof *out);
    if (!v || json_is_null(v))
        return FG_OK;
    if (!json_is_object(v))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"rope_scaling\" is not an object "
                            "or null", path);
    const char *type = type_of(v);
    if (!type)
        return refuse(path, "rope_type", "is missing or not a string", err);
    int numbers = !strcmp(type, "llama3") ? 4 : !strcmp(type, "linear") ? 1 : 0;
    if (numbers == 0 && strcmp(type, "default") != 0)
        return refuse(path, "rope_type", "is not one fulgur computes (default, llama3, "
                      "linear)", err);
    fg_status st = check_known(path, v, numbers, err);
    if (st != FG_OK || numbers == 0)
        return st;
    out->scaling = numbers == 4 ? FG_ROPE_SCALING_LLAMA3 : FG_ROPE_SCALING_LINEAR;
    out->factor = json_number_value(json_object_get(v, "factor"));
    if (numbers == 1)
        return FG_OK;
    out->low = json_number_value(json_object_get(v, "low_freq_factor"));
    out->high = json_number_value(json_object_get(v, "high_freq_factor"));
    double original = json_number_value(json_object_get(v, llama3_keys[3]));
    if (original < 1 || original != floor(original) || original > 1e9)
        return refuse(path, llama3_keys[3], "is not a positive integer", err);
    out->original = (long long)original;
    return FG_OK;
}

/* The shortest text that reads back as x. */
static void number_text(double x, char *out)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(out, 64, "%.*g", digits, x);
        if (strtod(out, NULL) == x)
            return;
    }
}

int fg_hf_rope_scaling_keys(const fg_hf_rope_scaling *r, const char *key[5],
                            char value[5][64], const char *json_key[5])
{
    if (r->scaling == FG_ROPE_SCALING_NONE)
        return 0;
    key[0] = "rope_scaling";
    json_key[0] = "rope_scaling.rope_type";
    snprintf(value[0], 64, "%s", r->scaling == FG_ROPE_SCALING_LLAMA3 ? "llama3" : "linear");
    key[1] = "rope_factor";
    json_key[1] = "rope_scaling.factor";
    number_text(r->factor, value[1]);
    if (r->scaling == FG_ROPE_SCALING_LINEAR)
        return 2;
    key[2] = "rope_low_freq_factor";
    json_key[2] = "rope_scaling.low_freq_factor";
    number_text(r->low, value[2]);
    key[3] = "rope_high_freq_factor";
    json_key[3] = "rope_scaling.high_freq_factor";
    number_text(r->high, value[3]);
    key[4] = "rope_original_max_position_embeddings";
    json_key[4] = "rope_scaling.original_max_position_embeddings";
    snprintf(value[4], 64, "%lld", r->original);
    return 5;
}

json_t *fg_hf_rope_scaling_json(const fg_layer *l)
{
    if (!l->rope || l->rope_scaling == FG_ROPE_SCALING_NONE)
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    int llama3 = l->rope_scaling == FG_ROPE_SCALING_LLAMA3;
    int bad = json_object_set_new(o, "rope_type", json_string(llama3 ? "llama3" : "linear"));
    bad |= json_object_set_new(o, "factor", json_real(l->rope_factor));
    if (llama3) {
        bad |= json_object_set_new(o, "low_freq_factor", json_real(l->rope_low_freq_factor));
        bad |= json_object_set_new(o, "high_freq_factor", json_real(l->rope_high_freq_factor));
        bad |= json_object_set_new(o, "original_max_position_embeddings",
                                   json_integer((json_int_t)l->rope_original_max_positions));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
