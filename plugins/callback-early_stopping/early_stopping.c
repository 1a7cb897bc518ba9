/* fulgur-callback-early_stopping.so: stops training when a monitored metric stops
 * improving, with PyTorch Lightning's EarlyStopping semantics.
 *
 *   [callback.early_stopping]
 *   monitor = val/loss            ; the metric to watch
 *   mode = min                    ; min: lower is better; max: higher is better
 *   patience = 3                  ; checks without improvement before stopping
 *   min_delta = 0.001             ; an improvement must beat the best by more than this
 *   stopping_threshold =          ; stop as soon as the metric is better than this (empty: off)
 *   divergence_threshold =        ; stop as soon as the metric is worse than this (empty: off)
 *   check_finite = true           ; stop when the metric is NaN or infinite
 *   check_on = validation_end     ; or epoch_end (for train/loss, train/acc)
 *
 * Each check runs, in Lightning's order: non-finite value, stopping threshold, divergence
 * threshold, then improvement. "Improved" means current + min_delta < best (min) or
 * current - min_delta > best (max); the best starts at +inf (min) or -inf (max). Without
 * an improvement the wait count grows, and training stops when it reaches patience (so
 * patience = 0 stops at the first check that does not improve).
 *
 * Metrics arrive reduced across ranks and the rule is deterministic, so every rank takes
 * the same decision; is_rank_zero only gates logging. Epochs in messages count from 1, as
 * the trainer's own output does. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/callback.h>

#ifndef EARLY_STOPPING_VERSION
#define EARLY_STOPPING_VERSION "1.0.0"
#endif

typedef struct early_stopping {
    const fg_host *host;
    /* options */
    const char *monitor;   /* owned by the host */
    int maximize;          /* mode = max */
    int64_t patience;      /* >= 0 */
    double min_delta;      /* >= 0 */
    int has_stop_threshold;
    double stop_threshold;
    int has_divergence_threshold;
    double divergence_threshold;
    int check_finite;
    uint32_t check_event;  /* FG_EVENT_VALIDATION_END or FG_EVENT_EPOCH_END */
    /* state */
    double best;           /* +inf (min) or -inf (max) until the first improvement */
    int64_t best_epoch;    /* 0-based; -1: none yet */
    int64_t wait_count;
    int64_t checks;
    int stopped;
} early_stopping;

static const fg_option early_stopping_options[] = {
    {.key = "monitor", .type = FG_OPT_STRING, .default_value = "val/loss", .min = 1, .max = 0,
     .help = "metric to watch, e.g. val/loss, val/acc, train/loss (with check_on = epoch_end)"},
    {.key = "mode", .type = FG_OPT_ENUM, .default_value = "min", .min = 1, .max = 0,
     .choices = "min|max", .help = "min: lower is better; max: higher is better"},
    {.key = "patience", .type = FG_OPT_INT, .default_value = "3", .min = 0, .max = 1e9,
     .help = "checks with no improvement before stopping (0: stop at the first)"},
    {.key = "min_delta", .type = FG_OPT_FLOAT, .default_value = "0", .min = 0, .max = 1e300,
     .help = "smallest change of the metric that counts as an improvement"},
    {.key = "stopping_threshold", .type = FG_OPT_STRING, .default_value = "", .min = 1, .max = 0,
     .help = "stop as soon as the metric is better than this number (empty: off)"},
    {.key = "divergence_threshold", .type = FG_OPT_STRING, .default_value = "", .min = 1,
     .max = 0, .help = "stop as soon as the metric is worse than this number (empty: off)"},
    {.key = "check_finite", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "stop when the metric is NaN or infinite"},
    {.key = "check_on", .type = FG_OPT_ENUM, .default_value = "validation_end", .min = 1,
     .max = 0, .choices = "validation_end|epoch_end",
     .help = "event at which the metric is checked (epoch_end carries train/loss, train/acc)"},
};

/* ---- options ------------------------------------------------------------------------- */

/* A threshold is a STRING option because a FLOAT has no "unset": empty (or "off", "none")
 * turns it off, anything else must be a finite number. */
static fg_status parse_threshold(const fg_host *host, const char *key, int *present,
                                 double *value, fg_error *err)
{
    const char *text = NULL;
    if (host->get_string(host, key, &text) != FG_OK || text == NULL)
        return fg_error_set(err, FG_INTERNAL, "the host does not serve the declared key %s", key);
    *present = 0;
    if (text[0] == '\0' || strcmp(text, "off") == 0 || strcmp(text, "none") == 0)
        return FG_OK;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s = '%s' is not a finite number; leave it empty to turn it off",
                            key, text);
    *present = 1;
    *value = v;
    return FG_OK;
}

static fg_status read_options(early_stopping *es, const fg_host *host, fg_error *err)
{
    const char *mode = NULL, *check_on = NULL;
    if (host->get_string(host, "monitor", &es->monitor) != FG_OK ||
        host->get_string(host, "mode", &mode) != FG_OK ||
        host->get_int(host, "patience", &es->patience) != FG_OK ||
        host->get_float(host, "min_delta", &es->min_delta) != FG_OK ||
        host->get_bool(host, "check_finite", &es->check_finite) != FG_OK ||
        host->get_string(host, "check_on", &check_on) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "the host did not serve the declared options");
    /* The host validated these against the schema; a host that did not still gets a
     * clear answer instead of undefined behaviour. */
    if (es->monitor == NULL || es->monitor[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "monitor is empty; name a metric such as val/loss");
    if (strcmp(mode, "min") != 0 && strcmp(mode, "max") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "mode = '%s': expected min or max", mode);
    if (es->patience < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "patience = %lld: must be >= 0",
                            (long long)es->patience);
    if (!(es->min_delta >= 0) || !isfinite(es->min_delta))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "min_delta = %g: must be a finite number >= 0",
                            es->min_delta);
    if (strcmp(check_on, "validation_end") == 0)
        es->check_event = FG_EVENT_VALIDATION_END;
    else if (strcmp(check_on, "epoch_end") == 0)
        es->check_event = FG_EVENT_EPOCH_END;
    else
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "check_on = '%s': expected validation_end or epoch_end", check_on);
    es->maximize = strcmp(mode, "max") == 0;
    fg_status st = parse_threshold(host, "stopping_threshold", &es->has_stop_threshold,
                                   &es->stop_threshold, err);
    if (st == FG_OK)
        st = parse_threshold(host, "divergence_threshold", &es->has_divergence_threshold,
                             &es->divergence_threshold, err);
    return st;
}

static fg_status early_stopping_init(const fg_host *host, void **state, fg_error *err)
{
    early_stopping *es = calloc(1, sizeof *es);
    if (es == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    es->host = host;
    es->best_epoch = -1;
    fg_status st = read_options(es, host, err);
    if (st == FG_OK) {
        es->best = es->maximize ? -INFINITY : INFINITY;
        *state = es;
    } else {
        free(es);
    }
    return st;
}

static void early_stopping_deinit(void *state) { free(state); }

/* ---- the rule ------------------------------------------------------------------------ */

static const char *event_name(uint32_t type)
{
    return type == FG_EVENT_VALIDATION_END ? "validation_end" : "epoch_end";
}

static int better(const early_stopping *es, double a, double b)
{
    return es->maximize ? a > b : a < b;
}

/* A metric value as the trainer prints it (%.4f), with significant digits kept for the
 * tiny values %.4f would show as 0.0000. */
static void format_value(char *buf, size_t cap, double v)
{
    snprintf(buf, cap, fabs(v) >= 1e-3 || v == 0 ? "%.4f" : "%.4g", v);
}

/* "; best 0.3123 at epoch 4", or a note that no check improved on the start value. */
static void format_best(const early_stopping *es, char *buf, size_t cap)
{
    char value[32];
    format_value(value, sizeof value, es->best);
    if (es->best_epoch < 0)
        snprintf(buf, cap, "; no earlier value to compare");
    else
        snprintf(buf, cap, "; best %s at epoch %lld", value, (long long)es->best_epoch + 1);
}

/* The monitored metric is missing: fail with what the event did carry, so a typo in
 * monitor (or a check_on that never sees the metric) cannot silently disable stopping. */
static fg_status missing_metric(const early_stopping *es, const fg_event *ev, fg_error *err)
{
    char present[FG_ERROR_MESSAGE_MAX / 2];
    size_t used = 0;
    present[0] = '\0';
    for (uint32_t i = 0; i < ev->metric_count && used < sizeof present; i++)
        used += (size_t)snprintf(present + used, sizeof present - used, "%s%s", i ? ", " : "",
                                 ev->metrics[i].name ? ev->metrics[i].name : "?");
    const char *hint = "";
    if (es->check_event == FG_EVENT_VALIDATION_END && strncmp(es->monitor, "train/", 6) == 0)
        hint = " (train/* metrics arrive at epoch_end: set check_on = epoch_end)";
    else if (es->check_event == FG_EVENT_EPOCH_END && strncmp(es->monitor, "val/", 4) == 0)
        hint = " (val/* metrics arrive at validation_end: set check_on = validation_end)";
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "monitor = %s: the %s event of epoch %lld has no such metric; present: "
                        "%s%s", es->monitor, event_name(es->check_event), (long long)ev->epoch + 1,
                        ev->metric_count ? present : "(none)", hint);
}

/* One check; sets action->stop with the reason when training should end. */
static void check(early_stopping *es, double current, int64_t epoch, fg_callback_action *action)
{
    char best[96], value[32];
    const char *word = es->maximize ? "above" : "below";
    format_value(value, sizeof value, current);
    es->checks++;
    if (es->check_finite && !isfinite(current)) {
        format_best(es, best, sizeof best);
        /* Spelled out: printf may write a NaN from 0/0 as "-nan". */
        const char *what = isnan(current) ? "nan" : current > 0 ? "inf" : "-inf";
        snprintf(action->reason, sizeof action->reason, "%s is %s at epoch %lld%s", es->monitor,
                 what, (long long)epoch + 1, best);
    } else if (es->has_stop_threshold && better(es, current, es->stop_threshold)) {
        snprintf(action->reason, sizeof action->reason,
                 "%s = %s at epoch %lld is %s stopping_threshold %g", es->monitor, value,
                 (long long)epoch + 1, word, es->stop_threshold);
    } else if (es->has_divergence_threshold && better(es, es->divergence_threshold, current)) {
        snprintf(action->reason, sizeof action->reason,
                 "%s = %s at epoch %lld is %s divergence_threshold %g", es->monitor, value,
                 (long long)epoch + 1, es->maximize ? "below" : "above", es->divergence_threshold);
    } else {
        double shifted = es->maximize ? current - es->min_delta : current + es->min_delta;
        if (better(es, shifted, es->best)) {
            es->best = current;
            es->best_epoch = epoch;
            es->wait_count = 0;
            return;
        }
        if (++es->wait_count < es->patience)
            return;
        char by[48] = "";
        if (es->min_delta > 0)
            snprintf(by, sizeof by, " by %g", es->min_delta);
        format_best(es, best, sizeof best);
        snprintf(action->reason, sizeof action->reason, "%s did not improve%s for %lld check%s%s",
                 es->monitor, by, (long long)es->wait_count, es->wait_count == 1 ? "" : "s", best);
    }
    action->stop = 1;
    es->stopped = 1;
}

/* ---- events -------------------------------------------------------------------------- */

static const fg_metric *find_metric(const fg_event *ev, const char *name)
{
    for (uint32_t i = 0; i < ev->metric_count; i++)
        if (ev->metrics[i].name && strcmp(ev->metrics[i].name, name) == 0)
            return &ev->metrics[i];
    return NULL;
}

/* A run that never reached a check (no validation split, check_val_every_n_epoch too
 * large) would otherwise never stop early without a word. */
static void warn_if_never_checked(const early_stopping *es, const fg_event *ev)
{
    if (es->checks > 0 || !ev->is_rank_zero || es->host->log == NULL)
        return;
    es->host->log(es->host, FG_LOG_WARN,
                  "no %s event reached this callback, so %s was never checked and training "
                  "was never stopped early", event_name(es->check_event), es->monitor);
}

/* Thread rule (callback.h): the trainer's thread, every rank, in event order. */
static fg_status early_stopping_on_event(void *state, const fg_event *ev,
                                         fg_callback_action *action, fg_error *err)
{
    early_stopping *es = state;
    if (!FG_HAS_FIELD(ev, fg_event, run_dir) || !FG_HAS_FIELD(action, fg_callback_action, reason))
        return fg_error_set(err, FG_INCOMPATIBLE, "event or action struct from an older host "
                            "is too small (%u, %u bytes)", ev ? (unsigned)ev->struct_size : 0u,
                            action ? (unsigned)action->struct_size : 0u);
    if (ev->type == FG_EVENT_FIT_END)
        warn_if_never_checked(es, ev);
    if (ev->type != es->check_event || es->stopped)
        return FG_OK;
    const fg_metric *m = find_metric(ev, es->monitor);
    if (m == NULL)
        return missing_metric(es, ev, err);
    check(es, m->value, ev->epoch, action);
    if (!action->stop && es->best_epoch == ev->epoch && ev->is_rank_zero && es->host->log)
        es->host->log(es->host, FG_LOG_DEBUG, "%s improved to %.4f at epoch %lld", es->monitor,
                      es->best, (long long)ev->epoch + 1);
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("early_stopping", EARLY_STOPPING_VERSION,
                          "stops training when a monitored metric stops improving (Lightning's "
                          "EarlyStopping)",
                          FG_PLUGIN_OPTIONS(early_stopping_options), early_stopping_init,
                          early_stopping_deinit, early_stopping_on_event, NULL);
