/* Learning-rate schedulers (PyTorch semantics: StepLR, MultiStepLR, CosineAnnealingLR,
 * ReduceLROnPlateau, LinearLR warmup in front; cosine_with_warmup: nanoGPT's get_lr). */
#include "scheduler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#include "core_util.h"
#define MAX_MILESTONES 64
#define NO_RANGE 1, 0

enum kind { CONSTANT, STEP, MULTISTEP, COSINE, PLATEAU, EXPONENTIAL, COSINE_WARMUP };
static const char *const kind_names[] = {"constant", "step", "multistep", "cosine", "reduce_on_plateau",
                                         "exponential", "cosine_with_warmup"};

/* Which kinds a key belongs to (bit per kind); 0: every kind. */
typedef struct key_owner {
    const char *key;
    unsigned kinds;
} key_owner;

static const fg_option options[] = {
    {"name", FG_OPT_ENUM, "constant", NO_RANGE, "constant|step|multistep|cosine|reduce_on_plateau|exponential|cosine_with_warmup", "schedule kind"},
    {"interval", FG_OPT_ENUM, "epoch", NO_RANGE, "step|epoch", "step and cosine count optimizer steps or epochs"},
    {"warmup_steps", FG_OPT_INT, "0", 0, 1e15, NULL, "linear warmup over this many optimizer steps, in front of any schedule"},
    {"warmup_start_factor", FG_OPT_FLOAT, "0.1", 0, 1, NULL, "warmup starts at lr times this"},
    {"step_size", FG_OPT_INT, "1", 1, 1e15, NULL, "step: multiply by gamma every step_size intervals"},
    {"gamma", FG_OPT_FLOAT, "0.1", 0, 1e6, NULL, "step, multistep: decay factor; exponential: factor per interval"},
    {"milestones", FG_OPT_LIST, "", NO_RANGE, NULL, "multistep: intervals at which lr is multiplied by gamma"},
    {"t_max", FG_OPT_INT, "0", 0, 1e15, NULL, "cosine: period in intervals; 0: the whole run"},
    {"eta_min", FG_OPT_FLOAT, "0", 0, 1e9, NULL, "cosine: the floor"},
    {"monitor", FG_OPT_STRING, "val/loss", NO_RANGE, NULL, "reduce_on_plateau: metric watched after each validation"},
    {"mode", FG_OPT_ENUM, "min", NO_RANGE, "min|max", "reduce_on_plateau: lower or higher is better"},
    {"factor", FG_OPT_FLOAT, "0.1", 0, 1, NULL, "reduce_on_plateau: lr multiplier on a plateau"},
    {"patience", FG_OPT_INT, "10", 0, 1e9, NULL, "reduce_on_plateau: checks without improvement tolerated"},
    {"threshold", FG_OPT_FLOAT, "1e-4", 0, 1e9, NULL, "reduce_on_plateau: relative improvement that counts"},
    {"cooldown", FG_OPT_INT, "0", 0, 1e9, NULL, "reduce_on_plateau: checks to wait after a reduction"},
    {"min_lr", FG_OPT_FLOAT, "0", 0, 1e9, NULL, "reduce_on_plateau: lr never goes below; cosine_with_warmup: the floor the cosine ends at (nanoGPT's min_lr)"},
    {"decay_steps", FG_OPT_INT, "0", 0, 1e15, NULL, "cosine_with_warmup: the step the cosine reaches min_lr at, counted from 0 with the warmup (nanoGPT's lr_decay_iters, Hugging Face's num_training_steps); 0: the run's optimizer steps"},
    {"warmup_form", FG_OPT_ENUM, "hf", NO_RANGE, "hf|nanogpt", "cosine_with_warmup: lr * step / warmup_steps (Hugging Face) or lr * (step + 1) / (warmup_steps + 1) (nanoGPT's get_lr)"},
};

#define K(k) (1u << (k))
static const key_owner owners[] = {
    {"interval", K(STEP) | K(COSINE) | K(MULTISTEP) | K(EXPONENTIAL)},
    {"step_size", K(STEP)}, {"gamma", K(STEP) | K(MULTISTEP) | K(EXPONENTIAL)}, {"milestones", K(MULTISTEP)},
    {"t_max", K(COSINE)}, {"eta_min", K(COSINE)},
    {"monitor", K(PLATEAU)}, {"mode", K(PLATEAU)}, {"factor", K(PLATEAU)}, {"patience", K(PLATEAU)},
    {"threshold", K(PLATEAU)}, {"cooldown", K(PLATEAU)}, {"min_lr", K(PLATEAU) | K(COSINE_WARMUP)},
    {"decay_steps", K(COSINE_WARMUP)}, {"warmup_form", K(COSINE_WARMUP)},
    /* cosine_with_warmup's warmup starts from 0 (or 1 / (warmup_steps + 1)) by its form */
    {"warmup_start_factor", ~K(COSINE_WARMUP)},
};

struct fg_scheduler {
    enum kind kind;
    double base_lr;
    int per_step;
    int64_t warmup_steps;
    double warmup_start;
    int64_t step_size;
    double gamma;
    int64_t milestones[MAX_MILESTONES];
    int milestone_count;
    int64_t t_max;
    double eta_min;
    char monitor[128];
    int maximize;
    double factor, threshold, min_lr;
    int64_t patience, cooldown;
    int64_t decay_steps;
    int nanogpt_warmup;
    fg_scheduler_state st;
};

const fg_option *fg_scheduler_schema(size_t *count)
{
    *count = COUNT(options);
    return options;
}

static fg_status check_key_owners(const fg_config *cfg, enum kind kind, fg_error *err)
{
    for (size_t i = 0; i < COUNT(owners); i++) {
        if (!fg_config_get(cfg, "scheduler", owners[i].key) || (owners[i].kinds & K(kind))) continue;
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [scheduler] %s does not apply to "
                            "name = %s; remove it or pick a schedule that uses it",
                            fg_config_origin(cfg, "scheduler", owners[i].key), owners[i].key,
                            kind_names[kind]);
    }
    return FG_OK;
}

static fg_status read_milestones(const fg_config *cfg, fg_scheduler *s, fg_error *err)
{
    const char *list = fg_config_get(cfg, "scheduler", "milestones");
    if (!list) return FG_OK;
    const char *p = list;
    int64_t prev = -1;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v <= prev || s->milestone_count == MAX_MILESTONES)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [scheduler] milestones = '%s' must "
                                "be up to %d increasing non-negative integers",
                                fg_config_origin(cfg, "scheduler", "milestones"), list, MAX_MILESTONES);
        s->milestones[s->milestone_count++] = prev = v;
        while (*end == ' ' || *end == ',') end++;
        p = end;
    }
    return FG_OK;
}

static fg_status read_all(const fg_config *cfg, fg_scheduler *s, fg_error *err)
{
    size_t n = COUNT(options);
    int64_t iv;
    double fv;
    const char *origin;
    const char *name = fg_section_value(cfg, "scheduler", options, n, "name", &origin);
    for (int k = CONSTANT; k <= COSINE_WARMUP; k++)
        if (strcmp(name, kind_names[k]) == 0) s->kind = (enum kind)k;
    fg_status st = check_key_owners(cfg, s->kind, err);
    const char *interval = fg_section_value(cfg, "scheduler", options, n, "interval", &origin);
    s->per_step = strcmp(interval, "step") == 0;
    const char *monitor = fg_section_value(cfg, "scheduler", options, n, "monitor", &origin);
    snprintf(s->monitor, sizeof s->monitor, "%s", monitor);
    s->maximize = strcmp(fg_section_value(cfg, "scheduler", options, n, "mode", &origin), "max") == 0;
    s->nanogpt_warmup =
        strcmp(fg_section_value(cfg, "scheduler", options, n, "warmup_form", &origin), "nanogpt") == 0;
#define RI(key, field) if (st == FG_OK && (st = fg_section_read_int(cfg, "scheduler", options, n, key, &iv, err)) == FG_OK) s->field = iv
#define RF(key, field) if (st == FG_OK && (st = fg_section_read_float(cfg, "scheduler", options, n, key, &fv, err)) == FG_OK) s->field = fv
    RI("warmup_steps", warmup_steps);
    RF("warmup_start_factor", warmup_start);
    RI("step_size", step_size);
    RF("gamma", gamma);
    RI("t_max", t_max);
    RF("eta_min", eta_min);
    RF("factor", factor);
    RI("patience", patience);
    RF("threshold", threshold);
    RI("cooldown", cooldown);
    RF("min_lr", min_lr);
    RI("decay_steps", decay_steps);
#undef RI
#undef RF
    if (st == FG_OK) st = read_milestones(cfg, s, err);
    return st;
}

/* decay_steps = 0: the run's steps; the cosine needs at least one step after the warmup. */
static fg_status resolve_decay_steps(const fg_config *cfg, fg_scheduler *s, int64_t total_steps,
                                     fg_error *err)
{
    if (s->decay_steps == 0) s->decay_steps = total_steps;
    if (s->decay_steps > s->warmup_steps) return FG_OK;
    const char *key = fg_config_get(cfg, "scheduler", "decay_steps") ? "decay_steps" : "warmup_steps";
    const char *origin = fg_config_origin(cfg, "scheduler", key);
    if (!origin) origin = fg_config_origin(cfg, "scheduler", NULL);
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [scheduler] name = cosine_with_warmup "
                        "needs decay_steps (%lld%s) above warmup_steps (%lld)",
                        origin ? origin : "config", (long long)s->decay_steps,
                        fg_config_get(cfg, "scheduler", "decay_steps") ? "" : ": the run's optimizer steps",
                        (long long)s->warmup_steps);
}

fg_status fg_scheduler_create(const fg_config *cfg, double base_lr, int64_t total_steps,
                              int64_t total_epochs, fg_scheduler **out, fg_error *err)
{
    fg_scheduler *s = calloc(1, sizeof *s);
    if (!s) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    s->base_lr = base_lr;
    fg_status st = read_all(cfg, s, err);
    if (st != FG_OK) {
        free(s);
        return st;
    }
    if (s->kind == COSINE && s->t_max == 0) s->t_max = s->per_step ? total_steps : total_epochs;
    if (s->kind == COSINE && s->t_max <= 0) s->t_max = 1;
    if (s->kind == COSINE_WARMUP) st = resolve_decay_steps(cfg, s, total_steps, err);
    if (st != FG_OK) {
        free(s);
        return st;
    }
    s->st.scale = 1.0;
    s->st.best = s->maximize ? -INFINITY : INFINITY;
    *out = s;
    return FG_OK;
}

void fg_scheduler_destroy(fg_scheduler *s) { free(s); }
const char *fg_scheduler_name(const fg_scheduler *s) { return kind_names[s->kind]; }
const char *fg_scheduler_monitor(const fg_scheduler *s) { return s->kind == PLATEAU ? s->monitor : NULL; }

static double schedule_factor(const fg_scheduler *s, int64_t t)
{
    switch (s->kind) {
    case STEP: return pow(s->gamma, (double)(t / s->step_size));
    case MULTISTEP: {
        int passed = 0;
        for (int i = 0; i < s->milestone_count; i++) passed += t >= s->milestones[i];
        return pow(s->gamma, passed);
    }
    case COSINE: {
        double tc = (double)(t < s->t_max ? t : s->t_max);
        double lr = s->eta_min + (s->base_lr - s->eta_min) * 0.5 * (1.0 + cos(M_PI * tc / (double)s->t_max));
        return s->base_lr > 0 ? lr / s->base_lr : 0.0;
    }
    case PLATEAU: return s->st.scale;
    case EXPONENTIAL: return pow(s->gamma, (double)t);
    case CONSTANT: case COSINE_WARMUP: break; /* cosine_with_warmup: cosine_with_warmup_lr */
    }
    return 1.0;
}

/* nanoGPT's get_lr(it) with it = steps_done, and Hugging Face's
 * get_cosine_with_min_lr_schedule_with_warmup: a linear warmup to the peak, then a half
 * cosine from the peak down to min_lr over [warmup_steps, decay_steps], then min_lr. */
static double cosine_with_warmup_lr(const fg_scheduler *s, int64_t it)
{
    if (it < s->warmup_steps)
        return s->nanogpt_warmup ? s->base_lr * (double)(it + 1) / (double)(s->warmup_steps + 1)
                                 : s->base_lr * (double)it / (double)s->warmup_steps;
    if (it > s->decay_steps) return s->min_lr;
    double ratio = (double)(it - s->warmup_steps) / (double)(s->decay_steps - s->warmup_steps);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return s->min_lr + coeff * (s->base_lr - s->min_lr);
}

double fg_scheduler_lr(const fg_scheduler *s, int64_t steps_done, int64_t epoch)
{
    if (s->kind == COSINE_WARMUP) return cosine_with_warmup_lr(s, steps_done);
    double lr = s->base_lr * schedule_factor(s, s->per_step ? steps_done : epoch);
    if (s->kind == PLATEAU && lr < s->min_lr) lr = s->min_lr;
    if (steps_done < s->warmup_steps) {
        double frac = (double)steps_done / (double)s->warmup_steps;
        lr *= s->warmup_start + (1.0 - s->warmup_start) * frac;
    }
    return lr;
}

static int improved(const fg_scheduler *s, double value)
{
    if (isinf(s->st.best)) return 1;
    return s->maximize ? value > s->st.best * (1.0 + s->threshold)
                       : value < s->st.best * (1.0 - s->threshold);
}

void fg_scheduler_observe(fg_scheduler *s, const char *metric, double value)
{
    if (s->kind != PLATEAU || strcmp(metric, s->monitor) != 0 || !isfinite(value)) return;
    if (improved(s, value)) {
        s->st.best = value;
        s->st.bad_checks = 0;
    } else {
        s->st.bad_checks++;
    }
    if (s->st.cooldown_left > 0) {
        s->st.cooldown_left--;
        s->st.bad_checks = 0;
    }
    if (s->st.bad_checks > s->patience) {
        s->st.scale *= s->factor;
        s->st.cooldown_left = s->cooldown;
        s->st.bad_checks = 0;
    }
}

void fg_scheduler_get_state(const fg_scheduler *s, fg_scheduler_state *out) { *out = s->st; }
void fg_scheduler_set_state(fg_scheduler *s, const fg_scheduler_state *in) { s->st = *in; }
