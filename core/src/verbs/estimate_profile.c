/* A recorded device profile for fulgur estimate: per-layer forward and backward
 * milliseconds at a batch, read from a small text file (format: verbs/README.md). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

static fg_status profile_key(const char *path, int line, const char *key, const char *value,
                             fg_est_profile *p, fg_error *err)
{
    char *end = NULL;
    double v = strtod(value, &end);
    int number = end != value && *end == '\0';
    if (strcmp(key, "device") == 0) {
        snprintf(p->device, sizeof p->device, "%s", value);
        return FG_OK;
    }
    if (!number || !(v >= 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: %s needs a number >= 0, got '%s'",
                            path, line, key, value);
    if (strcmp(key, "memory_mb") == 0) p->memory_mb = v;
    else if (strcmp(key, "samples") == 0 && v >= 1) p->samples = (int64_t)v;
    else if (strcmp(key, "optimizer_ms") == 0) p->optimizer_ms = v;
    else
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: unknown key '%s' (device, "
                            "memory_mb, samples >= 1, optimizer_ms, or 'layer NAME FWD_MS "
                            "BWD_MS')", path, line, key);
    return FG_OK;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

static fg_status profile_layer(const char *path, int line, const char *text, fg_est_profile *p,
                               fg_error *err)
{
    char name[FG_EST_NAME_MAX], extra;
    double f, b;
    if (sscanf(text, "layer %63s %lf %lf %c", name, &f, &b, &extra) != 3 || !(f >= 0) || !(b >= 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: expected 'layer NAME FWD_MS "
                            "BWD_MS' (milliseconds >= 0), got '%s'", path, line, text);
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->name[i], name) == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: layer '%s' given twice", path,
                                line, name);
    if (p->count == FG_EST_MAX_LAYERS)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: more than %d layers", path, line,
                            FG_EST_MAX_LAYERS);
    memcpy(p->name[p->count], name, sizeof name);
    p->fwd_ms[p->count] = f;
    p->bwd_ms[p->count++] = b;
    return FG_OK;
}

static fg_status profile_line(const char *path, int line, char *text, fg_est_profile *p,
                              fg_error *err)
{
    char *hash = strchr(text, '#');
    if (hash) *hash = '\0';
    char *s = trim(text);
    if (!*s) return FG_OK;
    if (strncmp(s, "layer", 5) == 0 && isspace((unsigned char)s[5]))
        return profile_layer(path, line, s, p, err);
    char *eq = strchr(s, '=');
    if (!eq)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: expected 'key = value' or 'layer "
                            "NAME FWD_MS BWD_MS', got '%s'", path, line, s);
    *eq = '\0';
    return profile_key(path, line, trim(s), trim(eq + 1), p, err);
}

fg_status fg_est_profile_read(const char *path, fg_est_profile *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return fg_error_set(err, FG_NOT_FOUND, "--profile %s: %s", path, strerror(errno));
    char text[1024];
    int line = 0;
    fg_status st = FG_OK;
    while (st == FG_OK && fgets(text, sizeof text, f)) {
        line++;
        text[strcspn(text, "\r\n")] = '\0';
        st = profile_line(path, line, text, out, err);
    }
    fclose(f);
    if (st == FG_OK && out->samples == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: no 'samples = N' line (the batch the "
                          "times were taken at)", path);
    return st;
}

fg_status fg_est_profile_apply(const fg_est_profile *p, const char *path, fg_est_model *m,
                               fg_error *err)
{
    double scale = (double)m->batch / (double)p->samples;
    for (int i = 0; i < m->count; i++) {
        int j = 0;
        while (j < p->count && strcmp(p->name[j], m->layer[i].name) != 0) j++;
        if (j == p->count)
            return fg_error_set(err, FG_NOT_FOUND, "%s: no line for layer '%s' of the config "
                                "('layer %s FWD_MS BWD_MS')", path, m->layer[i].name,
                                m->layer[i].name);
        m->layer[i].fwd_s = p->fwd_ms[j] * 1e-3 * scale;
        m->layer[i].bwd_s = p->bwd_ms[j] * 1e-3 * scale;
    }
    m->other_s = p->optimizer_ms * 1e-3;
    snprintf(m->compute_source, sizeof m->compute_source, "profile %s (%s), times at batch %lld "
             "scaled by %.4g to batch %lld", path, p->device[0] ? p->device : "device not named",
             (long long)p->samples, scale, (long long)m->batch);
    return FG_OK;
}
