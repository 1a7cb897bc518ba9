/* fulgur-callback-throughput.so: how fast training runs and where a step's time goes.
 *
 *   [callback.throughput]
 *   log_every_n_events = 1   ; print on every n-th training step event
 *   advise = true            ; add one line of advice when one part dominates
 *   split = true             ; ask the trainer to time each phase of a step
 *
 * Rank 0 prints, for every n-th step event (the trainer sends one per log_every_n_steps):
 *   throughput: 41k samples/s; step 3.1 ms = data wait 0.2 ms (6%) + h2d 0.1 ms (3%) +
 *     forward 1.0 ms (32%) + backward 1.5 ms (48%) + optimizer 0.3 ms (10%) + other ...
 * (one line; "grad sync" joins under a distributed strategy, and a second line says how
 * much communication there was and how much of it hid behind backward), and, when a part
 * other than compute dominates, one line of advice:
 *   throughput: advice: the loader is the bottleneck: raise [data] num_workers or ...
 * At fit start the memory each device holds, by role; at fit end the run's means (weighted
 * by steps), and the advice that applied in most logged intervals, or, for a compute-bound
 * run, how to make compute faster (mixed precision, more devices).
 *
 * split = true makes the trainer time the host-to-device copy, forward, backward and
 * optimizer phases with the host clock, waiting for the device queue after each one: the
 * CPU backend runs its ops synchronously, so that costs nothing there; an asynchronous
 * backend (CUDA) loses a little overlap while this callback is configured. Without it,
 * or from a trainer that sends no phases, a step shows as data wait + compute. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callback_plugin.h"
#include "config_value.h"
#include "throughput_format.h"
#include "throughput_stats.h"

#ifndef THROUGHPUT_VERSION
#define THROUGHPUT_VERSION "1.0.0"
#endif

#define LINE_MAX_CHARS 640

typedef struct throughput {
    const fg_host *host;
    const char *section;
    int64_t log_every; /* >= 1 */
    int advise;
    int split;           /* ask for the phase timing */
    int64_t events_seen; /* step events since fit start */
    int warned;          /* the "no time metrics" warning was given */
    throughput_reader reader;
    throughput_totals totals;
    const char *strategy; /* [strategy] name, NULL when unknown */
} throughput;

static const fg_option throughput_options[] = {
    {.key = "log_every_n_events", .type = FG_OPT_INT, .default_value = "1", .min = 1,
     .max = 1e9, .help = "print on every n-th training step event (one per log_every_n_steps)"},
    {.key = "advise", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "print one line of advice when one part of the step dominates"},
    {.key = "split", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "time the copy, forward, backward and optimizer phases (waits for the device "
             "queue between them: free on the CPU backend, a little lost overlap on CUDA)"},
};

/* [strategy] name from the resolved config, NULL where the host cannot say. */
static const char *configured_strategy(const fg_host *host)
{
    const char *name = NULL;
    if (!fg_plugin_config_value(host, "strategy", "name", &name)) return NULL;
    return name ? name : "single";
}

static fg_status throughput_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.throughput";
    int64_t every = 1;
    int advise = 1;
    if (host->get_int(host, "log_every_n_events", &every) != FG_OK || every < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] log_every_n_events = %lld: must be an integer >= 1", section,
                            (long long)every);
    int split = 1;
    if (host->get_bool(host, "advise", &advise) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] advise: not a boolean", section);
    if (host->get_bool(host, "split", &split) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] split: not a boolean", section);
    throughput *tp = calloc(1, sizeof *tp);
    if (tp == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    tp->host = host;
    tp->section = section;
    tp->log_every = every;
    tp->advise = advise != 0;
    tp->split = split != 0;
    tp->strategy = configured_strategy(host);
    *state = tp;
    return FG_OK;
}

static void throughput_deinit(void *state)
{
    free(state);
}

/* Lines go to stdout beside the trainer's own, flushed so they interleave in order. */
static void print_line(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static void print_advice(tp_bottleneck b, const char *strategy)
{
    char line[LINE_MAX_CHARS];
    snprintf(line, sizeof line, "throughput: advice: %s is the bottleneck: %s",
             throughput_subject(b), throughput_advice(b, strategy));
    print_line(line);
}

static void print_sample(const throughput_sample *s, const char *prefix)
{
    char part[LINE_MAX_CHARS - 64], line[LINE_MAX_CHARS];
    throughput_format_breakdown(part, sizeof part, s);
    snprintf(line, sizeof line, "throughput: %s%s", prefix, part);
    print_line(line);
    throughput_format_comm(part, sizeof part, s);
    if (part[0] != '\0') {
        snprintf(line, sizeof line, "throughput: %s", part);
        print_line(line);
    }
}

static void on_step(throughput *tp, const fg_event *event)
{
    throughput_sample s = throughput_sample_read(&tp->reader, event->metrics, event->metric_count);
    if (!s.has[TP_RATE] && !s.has[TP_STEP]) {
        if (!tp->warned && event->is_rank_zero && tp->host->log != NULL)
            tp->host->log(tp->host, FG_LOG_WARN, "[%s] the trainer sends no "
                          "throughput/samples_per_s or time/step_s metrics: nothing to report",
                          tp->section);
        tp->warned = 1;
        return;
    }
    throughput_totals_add(&tp->totals, &s, event->global_step);
    tp->events_seen++;
    if (!event->is_rank_zero || tp->events_seen % tp->log_every != 0)
        return;
    print_sample(&s, "");
    tp_bottleneck b = throughput_bottleneck(&s);
    if (tp->advise && b != TP_NONE && b != TP_COMPUTE)
        print_advice(b, tp->strategy);
}

/* The bottleneck of most logged intervals, else the compute advice for a compute-bound
 * run. */
static void advise_run(const throughput_totals *t, const throughput_sample *mean,
                       const char *tp_strategy)
{
    char line[LINE_MAX_CHARS];
    tp_bottleneck top = TP_NONE;
    for (int b = TP_LOADER; b < TP_BOTTLENECKS; b++)
        if (b != TP_COMPUTE && t->bound[b] > (top == TP_NONE ? 0 : t->bound[top]))
            top = (tp_bottleneck)b;
    if (top != TP_NONE && t->intervals > 0 && 2 * t->bound[top] > t->intervals) {
        snprintf(line, sizeof line, "throughput: advice: %s was the bottleneck in %lld of %lld "
                 "logged intervals: %s", throughput_subject(top), (long long)t->bound[top],
                 (long long)t->intervals, throughput_advice(top, tp_strategy));
        print_line(line);
    } else if (throughput_bottleneck(mean) == TP_COMPUTE) {
        double share = throughput_share(mean, TP_FORWARD) + throughput_share(mean, TP_BACKWARD);
        snprintf(line, sizeof line, "throughput: advice: the step is compute-bound (forward + "
                 "backward %.0f%%): %s", 100.0 * share, throughput_advice(TP_COMPUTE, tp_strategy));
        print_line(line);
    }
}

static void on_fit_end(const throughput *tp)
{
    const throughput_totals *t = &tp->totals;
    throughput_sample mean = throughput_totals_mean(t);
    if (!mean.has[TP_RATE] && !mean.has[TP_STEP])
        return; /* nothing was measured; the warning said so */
    char prefix[96];
    if (mean.has[TP_STEP])
        snprintf(prefix, sizeof prefix, "run mean over %lld steps: ", (long long)t->steps);
    else
        snprintf(prefix, sizeof prefix, "run mean over %lld intervals: ", (long long)t->rate_count);
    print_sample(&mean, prefix);
    if (tp->advise)
        advise_run(t, &mean, tp->strategy);
}

/* memory/<role>_bytes or memory/devN/<role>_bytes, as the trainer reports them at fit
 * start: one line per device, in the order given. */
static void print_memory(const fg_event *event)
{
    char line[LINE_MAX_CHARS], mib[32], device[32] = "";
    size_t len = 0;
    line[0] = '\0';
    for (uint32_t i = 0; event->metrics != NULL && i <= event->metric_count; i++) {
        const char *name = i < event->metric_count ? event->metrics[i].name : NULL;
        if (name != NULL && strncmp(name, "memory/", 7) != 0)
            continue;
        const char *role = name ? strrchr(name, '/') + 1 : NULL;
        size_t dev_len = name ? (size_t)(role - 1 - (name + 7)) : 0;
        char dev[32];
        snprintf(dev, sizeof dev, "%.*s", (int)(dev_len < sizeof dev ? dev_len : 0), name ? name + 7 : "");
        if (len > 0 && (name == NULL || strcmp(dev, device) != 0)) {
            print_line(line);
            len = 0;
        }
        if (name == NULL)
            break;
        if (len == 0) {
            snprintf(device, sizeof device, "%s", dev);
            len = (size_t)snprintf(line, sizeof line, "throughput: memory%s%s%s:", dev[0] ? " (" : "",
                                   dev, dev[0] ? ")" : "");
        }
        size_t role_len = strlen(role);
        if (role_len > 6 && strcmp(role + role_len - 6, "_bytes") == 0)
            role_len -= 6;
        throughput_format_mib(mib, sizeof mib, event->metrics[i].value);
        int n = snprintf(line + len, sizeof line - len, "%s %.*s %s", line[len - 1] == ':' ? "" : ",",
                         (int)role_len, role, mib);
        if (n > 0 && (size_t)n < sizeof line - len)
            len += (size_t)n;
    }
}

/* Thread rule (callback.h): called from the trainer's thread, on every rank, in order.
 * Every rank keeps the totals (cheap); only rank 0 prints. */
static fg_status throughput_on_event(void *state, const fg_event *event,
                                     fg_callback_action *action, fg_error *err)
{
    throughput *tp = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    fg_status st = FG_PLUGIN_EVENT_NEEDS(event, is_rank_zero, tp->section, err);
    if (st != FG_OK)
        return st;
    switch (event->type) {
    case FG_EVENT_FIT_START:
        throughput_totals_reset(&tp->totals, event->global_step);
        tp->events_seen = 0;
        if (event->is_rank_zero)
            print_memory(event);
        break;
    case FG_EVENT_TRAIN_STEP_END:
        on_step(tp, event);
        break;
    case FG_EVENT_FIT_END:
        if (event->is_rank_zero)
            on_fit_end(tp);
        break;
    default:
        break;
    }
    return FG_OK;
}

static fg_status throughput_requests(void *state, fg_callback_requests *out, fg_error *err)
{
    (void)err;
    const throughput *tp = state;
    if (tp->split)
        out->flags |= FG_REQUEST_STEP_TIMING;
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("throughput", THROUGHPUT_VERSION,
                          "prints samples/s and where a step's time goes, with advice",
                          FG_PLUGIN_OPTIONS(throughput_options), throughput_init, throughput_deinit,
                          throughput_on_event, throughput_requests);
