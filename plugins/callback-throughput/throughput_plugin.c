/* fulgur-callback-throughput.so: how fast training runs and where a step's time goes.
 *
 *   [callback.throughput]
 *   log_every_n_events = 1   ; print on every n-th training step event
 *   advise = true            ; add one line of advice when one part dominates
 *
 * Rank 0 prints, for every n-th step event (the trainer sends one per log_every_n_steps):
 *   throughput: 41k samples/s; step 3.1 ms = data wait 0.2 ms (6%) + compute 2.9 ms
 * and, when data wait is over 30% of the step:
 *   throughput: advice: the loader is the bottleneck: raise [data] num_workers or
 *   prefetch, keep pin_memory = true
 * At fit end, the run's means (weighted by steps) and the advice again when it applied in
 * most logged intervals. It reads throughput/samples_per_s, time/step_s and
 * time/data_wait_s from the events and says only what those show: compute is the step
 * less the data wait, not yet split into copy, forward, backward, sync and optimizer. */
#include <stdio.h>
#include <stdlib.h>

#include <fulgur/callback.h>

#include "throughput_format.h"
#include "throughput_stats.h"

#ifndef THROUGHPUT_VERSION
#define THROUGHPUT_VERSION "1.0.0"
#endif

#define LINE_MAX_CHARS 512

typedef struct throughput {
    const fg_host *host;
    const char *section;
    int64_t log_every; /* >= 1 */
    int advise;
    int64_t events_seen; /* step events since fit start */
    int warned;          /* the "no time metrics" warning was given */
    throughput_totals totals;
} throughput;

static const fg_option throughput_options[] = {
    {.key = "log_every_n_events", .type = FG_OPT_INT, .default_value = "1", .min = 1,
     .max = 1e9, .help = "print on every n-th training step event (one per log_every_n_steps)"},
    {.key = "advise", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "print one line of advice when data wait dominates a step"},
};

static fg_status throughput_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.throughput";
    int64_t every = 1;
    int advise = 1;
    if (host->get_int(host, "log_every_n_events", &every) != FG_OK || every < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] log_every_n_events = %lld: must be an integer >= 1", section,
                            (long long)every);
    if (host->get_bool(host, "advise", &advise) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] advise: not a boolean", section);
    throughput *tp = calloc(1, sizeof *tp);
    if (tp == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    tp->host = host;
    tp->section = section;
    tp->log_every = every;
    tp->advise = advise != 0;
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

static void on_step(throughput *tp, const fg_event *event)
{
    throughput_sample s = throughput_sample_read(event->metrics, event->metric_count);
    if (!s.has_rate && !s.has_step) {
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
    char part[LINE_MAX_CHARS - 32], line[LINE_MAX_CHARS];
    throughput_format_breakdown(part, sizeof part, &s);
    snprintf(line, sizeof line, "throughput: %s", part);
    print_line(line);
    if (tp->advise && throughput_data_bound(&s))
        print_line("throughput: advice: the loader is the bottleneck: " THROUGHPUT_LOADER_ADVICE);
}

static void on_fit_end(const throughput *tp)
{
    const throughput_totals *t = &tp->totals;
    throughput_sample mean = throughput_totals_mean(t);
    if (!mean.has_rate && !mean.has_step)
        return; /* nothing was measured; the warning said so */
    char part[LINE_MAX_CHARS - 64], line[LINE_MAX_CHARS];
    throughput_format_breakdown(part, sizeof part, &mean);
    if (mean.has_step)
        snprintf(line, sizeof line, "throughput: run mean over %lld steps: %s",
                 (long long)t->steps, part);
    else
        snprintf(line, sizeof line, "throughput: run mean over %lld intervals: %s",
                 (long long)t->rate_count, part);
    print_line(line);
    if (tp->advise && t->intervals > 0 && 2 * t->bound_intervals > t->intervals) {
        snprintf(line, sizeof line, "throughput: advice: the loader was the bottleneck in "
                 "%lld of %lld logged intervals: " THROUGHPUT_LOADER_ADVICE,
                 (long long)t->bound_intervals, (long long)t->intervals);
        print_line(line);
    }
}

/* Thread rule (callback.h): called from the trainer's thread, on every rank, in order.
 * Every rank keeps the totals (cheap); only rank 0 prints. */
static fg_status throughput_on_event(void *state, const fg_event *event,
                                     fg_callback_action *action, fg_error *err)
{
    throughput *tp = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    if (!FG_HAS_FIELD(event, fg_event, is_rank_zero))
        return fg_error_set(err, FG_INCOMPATIBLE, "[%s] event struct of %u bytes is too old",
                            tp->section, event ? (unsigned)event->struct_size : 0u);
    switch (event->type) {
    case FG_EVENT_FIT_START:
        throughput_totals_reset(&tp->totals, event->global_step);
        tp->events_seen = 0;
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

static const fg_callback_vtable throughput_vtable = {
    .struct_size = sizeof(fg_callback_vtable),
    .on_event = throughput_on_event,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0),
    .name = "throughput",
    .version = THROUGHPUT_VERSION,
    .description = "prints samples/s and where a step's time goes, with advice",
    FG_PLUGIN_OPTIONS(throughput_options),
    .init = throughput_init,
    .deinit = throughput_deinit,
    .vtable = &throughput_vtable,
};
