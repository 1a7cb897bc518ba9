/* Checkpoint file-name templates: "epoch={epoch}-step={step}", "{epoch}-{val/loss}".
 * {epoch} is the 0-based epoch and {step} the global step (Lightning's names); any other
 * {name} is a metric's latest value with %.4f. '/' in the result becomes '_', so a name
 * like "val/loss={val/loss}" stays one file: "val_loss=0.3123". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

static int is_builtin(const char *name, size_t len)
{
    return (len == 5 && memcmp(name, "epoch", 5) == 0) || (len == 4 && memcmp(name, "step", 4) == 0);
}

fg_status ckpt_name_check(const char *tmpl, fg_error *err)
{
    if (tmpl == NULL || tmpl[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "filename is empty; e.g. epoch={epoch}-step={step}");
    for (const char *p = tmpl; *p; p++) {
        if (*p == '}')
            return fg_error_set(err, FG_INVALID_ARGUMENT, "filename = '%s': '}' at position %d "
                                "has no '{'", tmpl, (int)(p - tmpl) + 1);
        if (*p != '{')
            continue;
        const char *close = strchr(p + 1, '}');
        const char *open = strchr(p + 1, '{');
        if (close == NULL)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "filename = '%s': '{' at position %d "
                                "is never closed", tmpl, (int)(p - tmpl) + 1);
        if (open != NULL && open < close)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "filename = '%s': '{' at position %d "
                                "inside another placeholder", tmpl, (int)(open - tmpl) + 1);
        if (close == p + 1)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "filename = '%s': empty {} at position "
                                "%d; name epoch, step or a metric", tmpl, (int)(p - tmpl) + 1);
        p = close;
    }
    return FG_OK;
}

fg_status ckpt_name_each_metric(const char *tmpl, fg_status (*fn)(const char *name, size_t len,
                                                                  void *ctx, fg_error *err),
                                void *ctx, fg_error *err)
{
    for (const char *p = strchr(tmpl, '{'); p != NULL; p = strchr(p, '{')) {
        const char *close = strchr(p, '}');
        if (close == NULL)
            break; /* ckpt_name_check rejected this already */
        size_t len = (size_t)(close - p - 1);
        if (!is_builtin(p + 1, len)) {
            fg_status st = fn(p + 1, len, ctx, err);
            if (st != FG_OK)
                return st;
        }
        p = close + 1;
    }
    return FG_OK;
}

/* Appends n bytes of s, '/' replaced; 0 when it does not fit. */
static int append(char *out, size_t cap, size_t *used, const char *s, size_t n)
{
    if (*used + n >= cap)
        return 0;
    for (size_t i = 0; i < n; i++)
        out[(*used)++] = s[i] == '/' ? '_' : s[i];
    out[*used] = '\0';
    return 1;
}

fg_status ckpt_name_render(const char *tmpl, int64_t epoch, int64_t step,
                           const ckpt_metrics *metrics, char *out, size_t cap, char *missing,
                           size_t missing_cap, fg_error *err)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *p = tmpl; *p;) {
        const char *open = strchr(p, '{');
        size_t lit = open ? (size_t)(open - p) : strlen(p);
        if (!append(out, cap, &used, p, lit))
            goto too_long;
        if (open == NULL)
            break;
        const char *close = strchr(open, '}');
        size_t len = (size_t)(close - open - 1);
        char name[256], value[64];
        snprintf(name, sizeof name, "%.*s", (int)len, open + 1);
        if (strcmp(name, "epoch") == 0) {
            snprintf(value, sizeof value, "%lld", (long long)epoch);
        } else if (strcmp(name, "step") == 0) {
            snprintf(value, sizeof value, "%lld", (long long)step);
        } else {
            const double *v = ckpt_metrics_find(metrics, name);
            if (v == NULL) {
                snprintf(missing, missing_cap, "%s", name);
                return fg_error_set(err, FG_NOT_FOUND, "filename = '%s': no metric %s has been "
                                    "reported yet", tmpl, name);
            }
            if (isnan(*v)) /* printf may write "-nan" */
                snprintf(value, sizeof value, "nan");
            else
                snprintf(value, sizeof value, "%.4f", *v);
        }
        if (!append(out, cap, &used, value, strlen(value)))
            goto too_long;
        p = close + 1;
    }
    return FG_OK;
too_long:
    return fg_error_set(err, FG_INVALID_ARGUMENT, "filename = '%s' renders to more than %zu "
                        "bytes", tmpl, cap - 1);
}
