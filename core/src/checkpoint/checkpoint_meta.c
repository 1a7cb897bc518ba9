/* The trainer's metadata in a fulgur checkpoint (format fulgur-checkpoint-1) is checked at
 * open, each field for its type and range, so an edited or corrupt file is refused naming
 * the field instead of loading and failing later somewhere else (a negative global_step
 * blamed on [optimizer] lr); and tensor values are counted for NaN and inf when the caller
 * asks (fg_ckpt_check_finite). */
#include "checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* Counters and steps: anything above 2^53 cannot have been counted step by step. */
#define FG_CKPT_COUNT_MAX (INT64_C(1) << 53)

typedef enum meta_kind { META_COUNT, META_SEED, META_SUM, META_POSITIVE, META_FINITE } meta_kind;

static const struct {
    const char *key;
    meta_kind kind;
} trainer_meta[] = {
    {"epoch", META_COUNT},
    {"batches_done", META_COUNT},
    {"global_step", META_COUNT},
    {"micro_step", META_COUNT},
    {"optimizer_step", META_COUNT},
    {"seed", META_SEED},
    {"epoch_sum_loss", META_SUM},
    {"epoch_sum_correct", META_SUM},
    {"epoch_sum_n", META_SUM},
    {"scheduler_scale", META_POSITIVE},
    {"scheduler_best", META_FINITE},
    {"scheduler_bad_checks", META_COUNT},
    {"scheduler_cooldown_left", META_COUNT},
};

static fg_status check_integer(const char *path, const char *key, const char *v, meta_kind kind,
                               fg_error *err)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' = '%s' is not an "
                            "integer", path, key, v);
    if (errno == ERANGE || x < 0 || (kind == META_COUNT && x > FG_CKPT_COUNT_MAX))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' = '%s' is out of "
                            "range (0 to %lld): the file is corrupt or was edited", path, key, v,
                            kind == META_COUNT ? (long long)FG_CKPT_COUNT_MAX : (long long)INT64_MAX);
    return FG_OK;
}

static fg_status check_number(const char *path, const char *key, const char *v, meta_kind kind,
                              fg_error *err)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' = '%s' is not a number",
                            path, key, v);
    /* scheduler_best starts at +-inf (nothing seen yet); the others are finite. */
    int ok = kind == META_SUM       ? isfinite(x) && x >= 0
             : kind == META_POSITIVE ? isfinite(x) && x > 0
                                     : !isnan(x);
    if (!ok)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' = '%s' is out of range "
                            "(%s): the file is corrupt or was edited", path, key, v,
                            kind == META_SUM ? "a finite sum >= 0"
                            : kind == META_POSITIVE ? "finite and > 0" : "not NaN");
    return FG_OK;
}

fg_status fg_ckpt_check_trainer_meta(const fg_ckpt *c, fg_error *err)
{
    const char *format = fg_ckpt_meta(c, "format");
    if (!format || strcmp(format, "fulgur-checkpoint-1") != 0)
        return FG_OK;
    for (size_t i = 0; i < sizeof trainer_meta / sizeof trainer_meta[0]; i++) {
        const char *v = fg_ckpt_meta(c, trainer_meta[i].key);
        if (!v)
            continue; /* the loader names a missing field it needs */
        meta_kind k = trainer_meta[i].kind;
        fg_status st = k == META_COUNT || k == META_SEED
                           ? check_integer(fg_ckpt_path(c), trainer_meta[i].key, v, k, err)
                           : check_number(fg_ckpt_path(c), trainer_meta[i].key, v, k, err);
        if (st != FG_OK)
            return st;
    }
    return FG_OK;
}

/* Index of the first non-finite value and the count of them, for the float dtypes. */
static size_t count_nonfinite(fg_dtype dtype, const void *data, size_t bytes, size_t *first)
{
    size_t count = 0, n = bytes / fg_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        int bad = 0;
        if (dtype == FG_F32) {
            float x;
            memcpy(&x, (const char *)data + 4 * i, 4);
            bad = !isfinite(x);
        } else if (dtype == FG_F64) {
            double x;
            memcpy(&x, (const char *)data + 8 * i, 8);
            bad = !isfinite(x);
        } else if (dtype == FG_F16 || dtype == FG_BF16) {
            uint16_t h;
            memcpy(&h, (const char *)data + 2 * i, 2);
            bad = dtype == FG_F16 ? (h & 0x7C00u) == 0x7C00u : (h & 0x7F80u) == 0x7F80u;
        }
        if (bad && count++ == 0)
            *first = i;
    }
    return count;
}

fg_status fg_ckpt_check_finite(const fg_ckpt *c, const char *name, fg_dtype dtype,
                               const void *data, size_t bytes, fg_error *err)
{
    size_t first = 0, bad = count_nonfinite(dtype, data, bytes, &first);
    if (bad == 0)
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "%s: tensor '%s' holds %zu non-finite value(s) (NaN or inf; the first "
                        "at flat index %zu): the run had diverged or the file is corrupt; "
                        "--allow-nonfinite (trainer.allow_nonfinite = true) loads it anyway",
                        fg_ckpt_path(c), name, bad, first);
}
