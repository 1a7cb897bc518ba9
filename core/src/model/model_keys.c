/* Reading [model] and [layer.NAME] keys against their schemas: values, defaults, origins,
 * typed and range-checked. */
#include "model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading keys ------------------------------------------------------------------- */

static const fg_option *find_option(const fg_option *opts, size_t count, const char *key)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(opts[i].key, key) == 0)
            return &opts[i];
    return NULL;
}

const char *fg_section_value(const fg_config *cfg, const char *section, const fg_option *opts,
                             size_t count, const char *key, const char **origin)
{
    const char *v = cfg ? fg_config_get(cfg, section, key) : NULL;
    if (v) {
        *origin = fg_config_origin(cfg, section, key);
        return v;
    }
    const fg_option *opt = find_option(opts, count, key);
    *origin = "default";
    return opt ? opt->default_value : NULL;
}

/* The checked text of a key; the caller parses it. */
static fg_status section_text(const fg_config *cfg, const char *section, const fg_option *opts,
                              size_t count, const char *key, const char **out, fg_error *err)
{
    const fg_option *opt = find_option(opts, count, key);
    if (!opt)
        return fg_error_set(err, FG_INTERNAL, "[%s] reads undeclared key '%s'", section, key);
    const char *origin;
    const char *v = fg_section_value(cfg, section, opts, count, key, &origin);
    if (!v) {
        const char *where = cfg ? fg_config_origin(cfg, section, NULL) : NULL;
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] needs key '%s' (%s)",
                            where ? where : "config", section, key, opt->help);
    }
    if (strcmp(origin, "default") != 0) {
        fg_status st = fg_option_check(opt, v, origin, section, err);
        if (st != FG_OK)
            return st;
    }
    *out = v;
    return FG_OK;
}

/* Reads key's checked text as `type` into out: an int64_t (FG_OPT_INT), a double
 * (FG_OPT_FLOAT) or an int (FG_OPT_BOOL). */
static fg_status section_read(const fg_config *cfg, const char *section, const fg_option *opts,
                              size_t count, const char *key, fg_option_type type, void *out,
                              fg_error *err)
{
    const char *v = NULL;
    fg_status st = section_text(cfg, section, opts, count, key, &v, err);
    if (st != FG_OK)
        return st;
    const char *what;
    if (type == FG_OPT_INT) {
        st = fg_option_parse_int(v, out);
        what = "an integer";
    } else if (type == FG_OPT_FLOAT) {
        st = fg_option_parse_float(v, out);
        what = "a number";
    } else {
        st = fg_option_parse_bool(v, out);
        what = "a boolean";
    }
    if (st != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] %s = '%s' is not %s", section, key,
                            v, what);
    return FG_OK;
}

fg_status fg_section_read_int(const fg_config *cfg, const char *section, const fg_option *opts,
                              size_t count, const char *key, int64_t *out, fg_error *err)
{
    return section_read(cfg, section, opts, count, key, FG_OPT_INT, out, err);
}

fg_status fg_section_read_float(const fg_config *cfg, const char *section,
                                const fg_option *opts, size_t count, const char *key,
                                double *out, fg_error *err)
{
    return section_read(cfg, section, opts, count, key, FG_OPT_FLOAT, out, err);
}

fg_status fg_section_read_bool(const fg_config *cfg, const char *section,
                               const fg_option *opts, size_t count, const char *key, int *out,
                               fg_error *err)
{
    return section_read(cfg, section, opts, count, key, FG_OPT_BOOL, out, err);
}

fg_status fg_layer_read_int(const fg_layer *l, const fg_config *cfg, const char *key,
                            int64_t *out, fg_error *err)
{
    return fg_section_read_int(cfg, l->section, l->ops->options, l->ops->option_count, key, out,
                               err);
}

fg_status fg_layer_read_float(const fg_layer *l, const fg_config *cfg, const char *key,
                              double *out, fg_error *err)
{
    return fg_section_read_float(cfg, l->section, l->ops->options, l->ops->option_count, key,
                                 out, err);
}

fg_status fg_layer_read_bool(const fg_layer *l, const fg_config *cfg, const char *key,
                             int *out, fg_error *err)
{
    return fg_section_read_bool(cfg, l->section, l->ops->options, l->ops->option_count, key,
                                out, err);
}

fg_status fg_layer_read_keys(const fg_layer *l, const fg_config *cfg, const fg_layer_key *keys,
                             size_t count, fg_error *err)
{
    for (size_t i = 0; i < count; i++) {
        const fg_layer_key *k = &keys[i];
        fg_status st = k->i   ? fg_layer_read_int(l, cfg, k->key, k->i, err)
                       : k->f ? fg_layer_read_float(l, cfg, k->key, k->f, err)
                              : fg_layer_read_bool(l, cfg, k->key, k->b, err);
        if (st != FG_OK)
            return st;
    }
    return FG_OK;
}
