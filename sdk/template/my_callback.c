/* fulgur-callback-my_callback.so: a starting point for a callback plugin.
 *
 * What it does: every `every_n_steps` logged training steps it logs the step's metrics
 * through the host, and it stops training once train/loss drops below `stop_below_loss`
 * (when that is > 0). Replace the body of my_callback_on_event with your own logic.
 *
 * The rules a plugin lives by (sdk/include/fulgur/plugin.h has the details):
 *  - include only <fulgur/sdk.h> (or the one kind header you need) and your own files;
 *  - export exactly one symbol, the const descriptor fulgur_plugin_v1 at the bottom
 *    (FG_PLUGIN_EXPORT). fulgur_add_plugin() builds with hidden visibility, so nothing
 *    else leaks; make every other function static all the same;
 *  - keep no global mutable state: everything lives in the instance made by init();
 *  - never exit() or abort(): return an fg_status and fill the fg_error with a message
 *    that names the config key and value at fault.
 *
 * Config, once the plugin is in the search path:
 *   [callback.my_callback]
 *   every_n_steps = 10
 *   stop_below_loss = 0.05 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/sdk.h>

#ifndef MY_CALLBACK_VERSION
#define MY_CALLBACK_VERSION "0.1.0"
#endif

/* The instance: one per [callback.my_callback] section. */
typedef struct my_callback {
    const fg_host *host;    /* outlives the instance */
    int64_t every_n_steps;  /* >= 1 */
    double stop_below_loss; /* <= 0: never stop */
    int64_t steps_seen;
} my_callback;

/* The schema: the host checks the user's keys against it (type, range, unknown keys with
 * a "did you mean") before init() runs, fills in defaults, and `fulgur explain
 * callback.my_callback` prints it. Defaults are written as in an INI file;
 * FG_OPT_REQUIRED makes a key mandatory. */
static const fg_option my_callback_options[] = {
    {.key = "every_n_steps", .type = FG_OPT_INT, .default_value = "1", .min = 1, .max = 1e9,
     .help = "log every n-th training step event"},
    {.key = "stop_below_loss", .type = FG_OPT_FLOAT, .default_value = "0", .min = 0, .max = 1e30,
     .help = "stop training once train/loss is below this; 0 never stops"},
};

/* Called once per instance, on the host's main thread, after the options were validated. */
static fg_status my_callback_init(const fg_host *host, void **state, fg_error *err)
{
    my_callback *cb = calloc(1, sizeof *cb);
    if (cb == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", host->section);
    cb->host = host;
    /* The getters read this instance's section, defaults applied. */
    if (host->get_int(host, "every_n_steps", &cb->every_n_steps) != FG_OK ||
        host->get_float(host, "stop_below_loss", &cb->stop_below_loss) != FG_OK) {
        free(cb);
        return fg_error_set(err, FG_INTERNAL, "[%s] the host did not provide the declared options",
                            host->section);
    }
    *state = cb;
    return FG_OK;
}

static void my_callback_deinit(void *state)
{
    free(state);
}

/* Called on the trainer's thread, on every rank, in event order. Metrics are already
 * reduced across ranks, so every rank takes the same decision to stop. */
static fg_status my_callback_on_event(void *state, const fg_event *event,
                                      fg_callback_action *action, fg_error *err)
{
    my_callback *cb = state;
    (void)err; /* nothing here can fail; return fg_error_set(err, ...) where yours can */
    if (event->type != FG_EVENT_TRAIN_STEP_END)
        return FG_OK;
    if (cb->steps_seen++ % cb->every_n_steps != 0)
        return FG_OK;

    for (uint32_t i = 0; i < event->metric_count; i++) {
        const fg_metric *m = &event->metrics[i];
        if (event->is_rank_zero) /* one log line per run, not one per rank */
            cb->host->log(cb->host, FG_LOG_INFO, "my_callback: step %lld %s = %g",
                          (long long)event->global_step, m->name, m->value);
        if (cb->stop_below_loss > 0 && strcmp(m->name, "train/loss") == 0 &&
            m->value < cb->stop_below_loss) {
            action->stop = 1;
            snprintf(action->reason, sizeof action->reason, "train/loss %g < stop_below_loss %g",
                     m->value, cb->stop_below_loss);
        }
    }
    return FG_OK;
}

/* The one exported symbol and the kind's vtable, in one statement (callback.h). The host
 * reads the descriptor without running any code above: kind, name (must match the file
 * name fulgur-callback-my_callback.so), version, description, options; then init, deinit,
 * and the vtable (on_event, and requests: NULL, nothing to ask). A callback defined this
 * way needs host ABI minor 0; FG_PLUGIN_DEFINE_VTABLE (plugin.h) takes the minor and any
 * kind's vtable entries. */
FG_CALLBACK_PLUGIN_DEFINE("my_callback", MY_CALLBACK_VERSION,
                          "logs training metrics every n steps and stops below a loss threshold",
                          FG_PLUGIN_OPTIONS(my_callback_options), my_callback_init,
                          my_callback_deinit, my_callback_on_event, NULL);
