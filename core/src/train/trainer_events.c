/* The trainer's events to its callbacks: each event's metrics remembered by name (for
 * checkpoint metadata and `best`), the progress bar's line erased first, and what a
 * callback asks in return (a checkpoint, a stop) honoured. */
#include <stdio.h>
#include <string.h>

#include "checkpoint_link.h"
#include "ckpt_sharded.h"
#include "trainer_ckpt.h"
#include "trainer_events.h"
#include "trainer_internal.h"

static void remember_metrics(fg_trainer *t, const fg_metric *m, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int slot = -1;
        for (int j = 0; j < t->events.metrics.count && slot < 0; j++)
            if (strcmp(t->events.metrics.names[j], m[i].name) == 0) slot = j;
        if (slot < 0 && t->events.metrics.count < FG_MAX_METRICS) {
            slot = t->events.metrics.count++;
            snprintf(t->events.metrics.names[slot], sizeof t->events.metrics.names[slot], "%s", m[i].name);
        }
        if (slot >= 0) t->events.metrics.values[slot] = m[i].value;
    }
}

/* The same checkpoint under a second name (save_last), beside the first one. */
static fg_status link_second_name(fg_trainer *t, const char *written, const char *also,
                                  fg_error *err)
{
    char path[8192];
    if (also[0] == '/')
        snprintf(path, sizeof path, "%s", also);
    else
        snprintf(path, sizeof path, "%s/%s", t->run_dir, also);
    fg_status st = fg_checkpoint_link(written, path, err);
    if (st == FG_OK) fg_shard_collect(path); /* a sharded index: shard folders it replaced */
    if (st == FG_OK && t->rt->verbosity >= FG_LOG_INFO)
        fprintf(t->out, "checkpoint: %s (the same as %s)\n", path, written);
    return st;
}

static fg_status honour_action(fg_trainer *t, const fg_plugin_ref *cb, const fg_callback_action *act,
                               fg_error *err)
{
    if (act->save_checkpoint && t->keys.fast_dev_run == 0) {
        char path[8192];
        const char *p = act->checkpoint_path[0] ? act->checkpoint_path : "checkpoints/manual.safetensors";
        if (p[0] == '/')
            snprintf(path, sizeof path, "%s", p);
        else
            snprintf(path, sizeof path, "%s/%s", t->run_dir, p);
        fg_status st = fg_trainer_save_checkpoint(t, path, err);
        if (st == FG_OK && t->rank == 0 && FG_HAS_FIELD(act, fg_callback_action, checkpoint_also_path) &&
            act->checkpoint_also_path[0])
            st = link_second_name(t, path, act->checkpoint_also_path, err);
        if (st != FG_OK) return st;
    }
    if (act->stop && !t->stop) {
        fprintf(t->out, "stopping: [%s] %s\n", cb->inst->section,
                act->reason[0] ? act->reason : "asked to stop");
        t->stop = 1;
    }
    return FG_OK;
}

fg_status fg_trainer_emit(fg_trainer *t, int type, const fg_metric *metrics, uint32_t n, fg_error *err)
{
    remember_metrics(t, metrics, n);
    if (t->events.progress_bar) { /* the bar's line, erased: what callbacks print starts clean */
        fputs("\r\033[K", t->out);
        fflush(t->out);
    }
    for (int i = 0; i < t->callback_count; i++) {
        const fg_callback_vtable *vt = t->callbacks[i].vt;
        if (!vt->on_event) continue;
        fg_event ev;
        memset(&ev, 0, sizeof ev);
        ev.struct_size = sizeof ev;
        ev.type = (uint32_t)type;
        ev.epoch = t->progress.epoch;
        ev.global_step = t->progress.global_step;
        ev.step_in_epoch = t->progress.step_in_epoch;
        ev.steps_per_epoch = t->progress.steps_per_epoch;
        ev.learning_rate = t->lr;
        ev.metrics = metrics;
        ev.metric_count = n;
        ev.is_rank_zero = t->rank == 0;
        ev.run_dir = t->run_dir;
        ev.max_epochs = t->keys.max_epochs;
        ev.nonfinite_layer = type == FG_EVENT_NONFINITE ? t->checks.event_layer : NULL;
        fg_callback_action act;
        memset(&act, 0, sizeof act);
        act.struct_size = sizeof act;
        fg_error e = {0};
        fg_status st = vt->on_event(t->callbacks[i].state, &ev, &act, &e);
        if (st != FG_OK)
            return fg_error_set(err, st, "[%s] %s", t->callbacks[i].inst->section, e.message);
        st = honour_action(t, &t->callbacks[i], &act, err);
        if (st != FG_OK) return st;
    }
    return FG_OK;
}


