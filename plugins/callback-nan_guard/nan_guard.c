/* fulgur-callback-nan_guard.so: ends the run at the first metric that is NaN or infinite.
 *
 *   [callback.nan_guard]
 *   monitor =            ; comma-separated metric names to watch; empty: every metric
 *   action = stop        ; stop: end training gracefully; error: fail the run (FG_FATAL)
 *   check_every_n_steps = 1 ; the trainer checks loss, gradients and input every n steps
 *
 * With check_every_n_steps > 0 the trainer checks, before the optimizer update of every
 * n-th step, the loss, the reduced gradients (one sum of squares over the model, then
 * layer by layer when that is not finite) and the step's input batches, and sends
 * FG_EVENT_NONFINITE when one is not finite. The run stops there, before the update, with
 * a reason naming the step, the epoch and the layer:
 *   "step 17 (epoch 1): the loss is nan; non-finite gradients in layer fc3 (the first in
 *    backward order, 3 layers affected); the input batch holds 784 non-finite values"
 * Otherwise (and for val/... metrics) the reason names the metric of an event:
 *   "train/step_loss is nan at step 1234 (epoch 3)". Only the first non-finite value is
 * reported: what follows it is a consequence. Under dynamic loss scaling the gradients
 * are not checked: an overflow there is the scaler's to skip.
 *
 * Metrics arrive reduced across ranks (and the gradients checked are the reduced ones),
 * so every rank sees the same values and takes the same decision. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/callback.h>

#include "plugin_created.h"

#ifndef NAN_GUARD_VERSION
#define NAN_GUARD_VERSION "1.0.0"
#endif

#define NAN_GUARD_MAX_NAMES 64

typedef struct nan_guard {
    const fg_host *host;
    int fail;                 /* action = error */
    int name_count;           /* 0: watch every metric */
    char *names[NAN_GUARD_MAX_NAMES];
    unsigned char seen[NAN_GUARD_MAX_NAMES]; /* the metric appeared in some event */
    int tripped;              /* a non-finite value was already reported */
    int64_t check_every;      /* the trainer's per-step check; 0: off */
} nan_guard;

static const fg_option nan_guard_options[] = {
    {.key = "monitor", .type = FG_OPT_LIST, .default_value = "", .min = 1, .max = 0,
     .help = "metrics to watch, comma-separated (empty: every metric of every event)"},
    {.key = "action", .type = FG_OPT_ENUM, .default_value = "stop", .min = 1, .max = 0,
     .choices = "stop|error", .help = "stop: end training gracefully; error: fail the run"},
    {.key = "check_every_n_steps", .type = FG_OPT_INT, .default_value = "1", .min = 0,
     .max = 1e12, .help = "check loss, gradients (naming the layer) and input every n "
                          "optimizer steps, before the update; a check costs a device sync "
                          "and one pass over the gradients (0: only the logged metrics)"},
};

static void nan_guard_deinit(void *state)
{
    nan_guard *g = state;
    if (g == NULL)
        return;
    for (int i = 0; i < g->name_count; i++)
        free(g->names[i]);
    free(g);
}

/* Splits "a, b,c" into trimmed names; an empty item is an error the host's LIST check
 * also gives, repeated here for hosts that do not validate. */
static fg_status parse_monitor(nan_guard *g, const char *list, fg_error *err)
{
    const char *p = list;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0')
        return FG_OK;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *b = p, *e = end;
        while (b < e && (*b == ' ' || *b == '\t'))
            b++;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (b == e)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "monitor = '%s' has an empty item", list);
        if (g->name_count == NAN_GUARD_MAX_NAMES)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "monitor = '%s' names more than %d "
                                "metrics", list, NAN_GUARD_MAX_NAMES);
        char *name = malloc((size_t)(e - b) + 1);
        if (name == NULL)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
        memcpy(name, b, (size_t)(e - b));
        name[e - b] = '\0';
        g->names[g->name_count++] = name;
        if (!comma)
            return FG_OK;
        p = comma + 1;
    }
}

static fg_status nan_guard_init(const fg_host *host, void **state, fg_error *err)
{
    const char *monitor = NULL, *action = NULL;
    int64_t every = 1;
    if (host->get_string(host, "monitor", &monitor) != FG_OK ||
        host->get_string(host, "action", &action) != FG_OK ||
        host->get_int(host, "check_every_n_steps", &every) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "the host did not serve the declared options");
    if (strcmp(action, "stop") != 0 && strcmp(action, "error") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "action = '%s': expected stop or error", action);
    nan_guard *g = calloc(1, sizeof *g);
    if (g == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    g->host = host;
    g->fail = strcmp(action, "error") == 0;
    g->check_every = every > 0 ? every : 0;
    fg_status st = parse_monitor(g, monitor, err);
    return FG_PLUGIN_CREATED(st, g, state, nan_guard_deinit);
}

/* Index of name in the watch list; -1 when not watched. With no list every name is
 * watched (index 0 stands for "all"). */
static int watched(const nan_guard *g, const char *name)
{
    if (g->name_count == 0)
        return 0;
    for (int i = 0; i < g->name_count; i++)
        if (strcmp(g->names[i], name) == 0)
            return i;
    return -1;
}

/* A watched name no event carried during fit is most likely a typo; test/... metrics
 * only arrive after fit ends, so they are not held against the list. */
static void warn_unseen(const nan_guard *g, const fg_event *ev)
{
    if (!ev->is_rank_zero || g->host->log == NULL)
        return;
    for (int i = 0; i < g->name_count; i++)
        if (!g->seen[i] && strncmp(g->names[i], "test/", 5) != 0)
            g->host->log(g->host, FG_LOG_WARN, "monitor names %s, but no event carried it "
                         "during fit, so it was never checked", g->names[i]);
}

static const char *value_word(double v)
{
    return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

/* The reason for FG_EVENT_NONFINITE from its metrics and layer. */
static void nonfinite_reason(const fg_event *ev, char *out, size_t cap)
{
    double loss = 0, layers = 0, inputs = 0;
    for (uint32_t i = 0; i < ev->metric_count; i++) {
        const fg_metric *m = &ev->metrics[i];
        if (m->name == NULL) continue;
        if (strcmp(m->name, "train/step_loss") == 0) loss = m->value;
        else if (strcmp(m->name, "grad/nonfinite_layers") == 0) layers = m->value;
        else if (strcmp(m->name, "input/nonfinite_values") == 0) inputs = m->value;
    }
    const char *layer = FG_HAS_FIELD(ev, fg_event, nonfinite_layer) ? ev->nonfinite_layer : NULL;
    size_t n = (size_t)snprintf(out, cap, "step %lld (epoch %lld):", (long long)ev->global_step,
                                (long long)ev->epoch + 1);
    const char *sep = " ";
    if (!isfinite(loss) && n < cap) {
        n += (size_t)snprintf(out + n, cap - n, "%sthe loss is %s", sep, value_word(loss));
        sep = "; ";
    }
    if (layers != 0 && n < cap) {
        if (layer != NULL)
            n += (size_t)snprintf(out + n, cap - n, "%snon-finite gradients in layer %s (the "
                                  "first in backward order, %.0f layer%s affected)", sep, layer,
                                  layers, layers == 1 ? "" : "s");
        else
            n += (size_t)snprintf(out + n, cap - n, "%snon-finite gradients (the strategy "
                                  "cannot tell in which layer)", sep);
        sep = "; ";
    }
    if (inputs > 0 && n < cap) {
        n += (size_t)snprintf(out + n, cap - n, "%sthe input batch holds %.0f non-finite "
                              "value%s", sep, inputs, inputs == 1 ? "" : "s");
        sep = "; ";
    }
    if (sep[0] == ' ' && n < cap)
        snprintf(out + n, cap - n, " a non-finite value");
}

/* Thread rule (callback.h): the trainer's thread, every rank, in event order. */
static fg_status nan_guard_on_event(void *state, const fg_event *ev, fg_callback_action *action,
                                    fg_error *err)
{
    nan_guard *g = state;
    if (!FG_HAS_FIELD(ev, fg_event, run_dir) || !FG_HAS_FIELD(action, fg_callback_action, reason))
        return fg_error_set(err, FG_INCOMPATIBLE, "event or action struct from an older host "
                            "is too small (%u, %u bytes)", ev ? (unsigned)ev->struct_size : 0u,
                            action ? (unsigned)action->struct_size : 0u);
    if (ev->type == FG_EVENT_NONFINITE) {
        if (g->tripped)
            return FG_OK;
        g->tripped = 1;
        char reason[sizeof action->reason];
        nonfinite_reason(ev, reason, sizeof reason);
        if (g->fail)
            return fg_error_set(err, FG_FATAL, "%s", reason);
        memcpy(action->reason, reason, sizeof reason);
        action->stop = 1;
        return FG_OK;
    }
    for (uint32_t i = 0; i < ev->metric_count; i++) {
        const fg_metric *m = &ev->metrics[i];
        int w = m->name ? watched(g, m->name) : -1;
        if (w < 0)
            continue;
        g->seen[w] = 1;
        if (g->tripped || isfinite(m->value))
            continue;
        g->tripped = 1;
        char reason[sizeof action->reason];
        snprintf(reason, sizeof reason, "%s is %s at step %lld (epoch %lld)", m->name,
                 value_word(m->value), (long long)ev->global_step, (long long)ev->epoch + 1);
        if (g->fail)
            return fg_error_set(err, FG_FATAL, "%s", reason);
        memcpy(action->reason, reason, sizeof reason);
        action->stop = 1;
    }
    if (ev->type == FG_EVENT_FIT_END)
        warn_unseen(g, ev);
    return FG_OK;
}

static fg_status nan_guard_requests(void *state, fg_callback_requests *out, fg_error *err)
{
    (void)err;
    const nan_guard *g = state;
    if (g->check_every > 0) {
        out->flags |= FG_REQUEST_FINITE_CHECK;
        out->finite_check_every = g->check_every;
    }
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("nan_guard", NAN_GUARD_VERSION,
                          "stops (or fails) the run at the first non-finite loss, gradient or "
                          "metric, naming the step and the layer",
                          FG_PLUGIN_OPTIONS(nan_guard_options), nan_guard_init, nan_guard_deinit,
                          nan_guard_on_event, nan_guard_requests);
