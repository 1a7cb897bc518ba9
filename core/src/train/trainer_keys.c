/* Reading the [trainer] and [data] loader keys, with Lightning's fraction-or-count keys
 * and max_time's clock formats. */
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "core_schema.h"
#include "trainer_internal.h"
#include "trainer_keys.h"

static fg_status read_int(fg_trainer *t, const char *section, const char *key, int64_t *out,
                          fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_core_schema(section, &n);
    return fg_section_read_int(t->cfg, section, opts, n, key, out, err);
}

static fg_status read_bool(fg_trainer *t, const char *section, const char *key, int *out,
                           fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_core_schema(section, &n);
    return fg_section_read_bool(t->cfg, section, opts, n, key, out, err);
}

static const char *read_string(fg_trainer *t, const char *section, const char *key,
                               const char **origin)
{
    size_t n;
    const fg_option *opts = fg_core_schema(section, &n);
    const char *v = fg_section_value(t->cfg, section, opts, n, key, origin);
    return v ? v : "";
}

static fg_status parse_limit(fg_trainer *t, const char *key, fg_batch_limit *out, fg_error *err)
{
    const char *origin;
    const char *v = read_string(t, "trainer", key, &origin);
    char *end;
    memset(out, 0, sizeof *out);
    if (strchr(v, '.')) {
        double f = strtod(v, &end);
        if (*end || end == v || !(f >= 0.0 && f <= 1.0))
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] %s = '%s': a fraction "
                                "must be in [0.0, 1.0] (a count is written without a '.')",
                                origin, key, v);
        out->is_fraction = 1;
        out->fraction = f;
        return FG_OK;
    }
    long long c = strtoll(v, &end, 10);
    if (*end || end == v || c < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] %s = '%s' is neither a "
                            "fraction (0.25) nor a count of batches (100)", origin, key, v);
    out->count = c;
    return FG_OK;
}

int64_t fg_batch_limit_apply(const fg_batch_limit *l, int64_t available)
{
    if (l->is_fraction) {
        int64_t n = (int64_t)floor(l->fraction * (double)available);
        return l->fraction > 0 && n == 0 && available > 0 ? 1 : n;
    }
    return l->count < available ? l->count : available;
}

/* seconds, HH:MM:SS or DD:HH:MM:SS */
/* The index of s's first control character (a newline, an escape), or -1. */
static ptrdiff_t first_control(const char *s)
{
    for (ptrdiff_t i = 0; s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return i;
    return -1;
}

/* The run folder is default_root_dir/NAME: a name with a '/', empty or a dot folder would
 * write elsewhere; a control character would break the run's config.ini and reach a
 * terminal raw through `fulgur runs` (so the message does not print it, nor an origin, the
 * command line's assignment, that holds it). */
static fg_status check_run_name(fg_trainer *t, fg_error *err)
{
    const char *name = fg_config_get(t->cfg, "trainer", "name");
    const char *origin = fg_config_origin(t->cfg, "trainer", "name");
    if (!name)
        return FG_OK;
    ptrdiff_t bad = first_control(name);
    if (bad >= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] name holds the control "
                            "character 0x%02x at byte %td; a run name is printed and written "
                            "to config.ini, so it takes none",
                            origin && first_control(origin) < 0 ? origin : "command line",
                            (unsigned char)name[bad], bad);
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] name = '%s': a run name "
                            "is one folder name, not empty, without '/' and not '.' or '..'",
                            origin, name);
    return FG_OK;
}

static fg_status parse_max_time(fg_trainer *t, fg_error *err)
{
    const char *origin;
    const char *v = read_string(t, "trainer", "max_time", &origin);
    t->keys.max_time_s = 0;
    if (!*v) return FG_OK;
    double parts[4];
    int n = 0;
    const char *p = v;
    while (n < 4) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || x < 0) break;
        parts[n++] = x;
        if (*end == ':') {
            p = end + 1;
            continue;
        }
        if (*end == 0) {
            p = end;
            break;
        }
        n = 0;
        break;
    }
    if (*p || (n != 1 && n != 3 && n != 4))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] max_time = '%s' is not "
                            "seconds, HH:MM:SS or DD:HH:MM:SS", origin, v);
    double s = 0;
    static const double unit3[] = {3600, 60, 1}, unit4[] = {86400, 3600, 60, 1};
    for (int i = 0; i < n; i++) s += parts[i] * (n == 1 ? 1 : n == 3 ? unit3[i] : unit4[i]);
    t->keys.max_time_s = s;
    return FG_OK;
}

static void copy_string(fg_trainer *t, const char *key, char *dst, size_t size)
{
    const char *origin;
    snprintf(dst, size, "%s", read_string(t, "trainer", key, &origin));
}

fg_status fg_trainer_read_keys(fg_trainer *t, fg_error *err)
{
    fg_status st = FG_OK;
    struct { const char *s, *k; int64_t *v; } ints[] = {
        {"trainer", "max_epochs", &t->keys.max_epochs}, {"trainer", "max_steps", &t->keys.max_steps},
        {"trainer", "accumulate_grad_batches", &t->keys.accumulate},
        {"trainer", "num_sanity_val_steps", &t->keys.num_sanity_val_steps},
        {"trainer", "fast_dev_run", &t->keys.fast_dev_run},
        {"trainer", "check_val_every_n_epoch", &t->keys.check_val_every_n_epoch},
        {"trainer", "log_every_n_steps", &t->keys.log_every}, {"trainer", "seed", &t->keys.seed},
        {"data", "batch_size", &t->keys.batch_size}, {"data", "eval_batch_size", &t->keys.eval_batch_size},
        {"data", "num_workers", &t->keys.num_workers}, {"data", "prefetch", &t->keys.prefetch}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == FG_OK; i++)
        st = read_int(t, ints[i].s, ints[i].k, ints[i].v, err);
    if (st == FG_OK) st = fg_optimizer_read_config(t->cfg, &t->optim, err);
    if (st == FG_OK) st = read_bool(t, "trainer", "test_after_fit", &t->keys.test_after_fit, err);
    if (st == FG_OK) st = read_bool(t, "trainer", "save_on_exception", &t->keys.save_on_exception, err);
    if (st == FG_OK) st = read_bool(t, "data", "pin_memory", &t->keys.pin_memory, err);
    if (st == FG_OK) st = read_bool(t, "data", "shuffle", &t->keys.shuffle, err);
    if (st == FG_OK) st = read_bool(t, "data", "drop_last", &t->keys.drop_last, err);
    if (st == FG_OK) {
        const char *v = read_string(t, "data", "val_split", &t->keys.val_split_origin);
        st = fg_val_split_parse(v, t->keys.val_split_origin, &t->keys.val_split, err);
    }
    if (st == FG_OK) {
        size_t n;
        const fg_option *opts = fg_core_schema("trainer", &n);
        st = fg_section_read_float(t->cfg, "trainer", opts, n, "gradient_clip_val", &t->keys.clip_val, err);
    }
    const char *origin;
    t->keys.clip_by_value = strcmp(read_string(t, "trainer", "gradient_clip_algorithm", &origin), "value") == 0;
    if (st == FG_OK) st = parse_limit(t, "val_check_interval", &t->keys.val_check_interval, err);
    if (st == FG_OK) st = parse_limit(t, "limit_train_batches", &t->keys.limit_train, err);
    if (st == FG_OK) st = parse_limit(t, "limit_val_batches", &t->keys.limit_val, err);
    if (st == FG_OK) st = parse_limit(t, "limit_test_batches", &t->keys.limit_test, err);
    if (st == FG_OK) st = parse_limit(t, "overfit_batches", &t->keys.overfit, err);
    if (st == FG_OK) st = parse_max_time(t, err);
    if (st != FG_OK) return st;
    /* The checkpoint callback hears of steps only through step events: its steps get one. */
    const char *every = fg_config_get(t->cfg, "callback.checkpoint", "every_n_train_steps");
    t->keys.ckpt_every_steps = every ? strtoll(every, NULL, 10) : 0;
    if ((t->keys.val_check_interval.is_fraction && t->keys.val_check_interval.fraction == 0) ||
        (!t->keys.val_check_interval.is_fraction && t->keys.val_check_interval.count == 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] val_check_interval must be "
                            "above 0", fg_config_origin(t->cfg, "trainer", "val_check_interval"));
    st = fg_requeue_configure(&t->requeue, read_string(t, "trainer", "requeue_signal", &origin),
                              origin, err);
    if (st != FG_OK) return st;
    st = read_bool(t, "trainer", "checkpoint_on_interrupt", &t->requeue.checkpoint_on_interrupt,
                   err);
    if (st != FG_OK) return st;
    t->requeue.checkpoint_on_interrupt |= t->keys.save_on_exception;
    st = check_run_name(t, err);
    if (st != FG_OK) return st;
    copy_string(t, "ckpt_path", t->keys.ckpt_path, sizeof t->keys.ckpt_path);
    copy_string(t, "final_checkpoint", t->keys.final_checkpoint, sizeof t->keys.final_checkpoint);
    if (t->keys.eval_batch_size == 0) t->keys.eval_batch_size = t->keys.batch_size;
    if (t->keys.fast_dev_run > 0) {
        /* Lightning's fast_dev_run: N batches of each, one epoch, nothing written. */
        t->keys.max_epochs = 1;
        t->keys.limit_train = t->keys.limit_val = t->keys.limit_test = (fg_batch_limit){0, 0, t->keys.fast_dev_run};
        t->keys.val_check_interval = (fg_batch_limit){1, 1.0, 0};
        t->keys.num_sanity_val_steps = 0;
        t->keys.log_every = 1;
    }
    return FG_OK;
}
