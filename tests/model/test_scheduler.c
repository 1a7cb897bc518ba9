/* Learning-rate schedules against PyTorch's formulas, and the key checks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "scheduler.h"

/* A learning rate as PyTorch's formula gives it, to double rounding. */
#define CHECK_LR(got, want) CHECK_NEAR((got), (want), 1e-12 + 1e-9 * fabs(want))

static fg_scheduler *make(const char *ini, double lr, int64_t steps, int64_t epochs)
{
    fg_config *cfg = NULL;
    fg_error err = {0};
    fg_scheduler *s = NULL;
    if (fg_config_parse_string(ini, "sched.ini", &cfg, &err) != FG_OK ||
        fg_scheduler_create(cfg, lr, steps, epochs, &s, &err) != FG_OK) {
        printf("FAIL: %s\n", err.message);
        fg_test_failures++;
    }
    fg_config_destroy(cfg);
    return s;
}

static void test_step(void)
{
    fg_scheduler *s = make("[scheduler]\nname = step\nstep_size = 3\ngamma = 0.5\n", 0.1, 100, 10);
    for (int e = 0; s && e < 10; e++) CHECK_LR(fg_scheduler_lr(s, 1000, e), 0.1 * pow(0.5, e / 3));
    fg_scheduler_destroy(s);
}

static void test_multistep_per_step(void)
{
    fg_scheduler *s = make("[scheduler]\nname = multistep\ninterval = step\nmilestones = 2, 5\ngamma = 0.1\n",
                           1.0, 100, 10);
    const double want[] = {1, 1, 0.1, 0.1, 0.1, 0.01, 0.01};
    for (int t = 0; s && t < 7; t++) CHECK_LR(fg_scheduler_lr(s, t, 0), want[t]);
    fg_scheduler_destroy(s);
}

static void test_cosine_with_warmup(void)
{
    fg_scheduler *s = make("[scheduler]\nname = cosine\ninterval = step\nt_max = 10\neta_min = 0.01\n"
                           "warmup_steps = 4\nwarmup_start_factor = 0.25\n", 0.1, 100, 10);
    for (int t = 0; s && t <= 12; t++) {
        int tc = t < 10 ? t : 10;
        double lr = 0.01 + (0.1 - 0.01) * 0.5 * (1 + cos(M_PI * tc / 10.0));
        if (t < 4) lr *= 0.25 + 0.75 * t / 4.0;
        CHECK_LR(fg_scheduler_lr(s, t, 0), lr);
    }
    fg_scheduler_destroy(s);
    /* t_max = 0: the whole run, in the schedule's interval */
    s = make("[scheduler]\nname = cosine\n", 0.1, 100, 4);
    if (s) CHECK_LR(fg_scheduler_lr(s, 0, 2), 0.05);
    fg_scheduler_destroy(s);
}

/* cosine_with_warmup: nanoGPT's get_lr (warmup_form = nanogpt) and Hugging Face's
 * get_cosine_with_min_lr_schedule_with_warmup (hf), written out here. */
static double nanogpt_get_lr(int64_t it, double lr, double min_lr, int64_t warmup, int64_t decay)
{
    if (it < warmup) return lr * (double)(it + 1) / (double)(warmup + 1);
    if (it > decay) return min_lr;
    double ratio = (double)(it - warmup) / (double)(decay - warmup);
    return min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (lr - min_lr);
}

static double hf_lr(int64_t step, double lr, double min_lr, int64_t warmup, int64_t total)
{
    if (step < warmup) return lr * (double)step / (double)warmup;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    if (progress > 1) progress = 1;
    double rate = min_lr / lr;
    return lr * (0.5 * (1.0 + cos(M_PI * progress)) * (1.0 - rate) + rate);
}

static void test_cosine_after_warmup(void)
{
    fg_scheduler *s = make("[scheduler]\nname = cosine_with_warmup\nwarmup_steps = 100\n"
                           "decay_steps = 2000\nmin_lr = 1e-4\nwarmup_form = nanogpt\n",
                           1e-3, 5000, 1);
    for (int64_t it = 0; s && it <= 2100; it++)
        CHECK_LR(fg_scheduler_lr(s, it, 0), nanogpt_get_lr(it, 1e-3, 1e-4, 100, 2000));
    fg_scheduler_destroy(s);
    /* hf, decay_steps = 0: the run's 300 steps; warmup from 0; the epoch does not matter */
    s = make("[scheduler]\nname = cosine_with_warmup\nwarmup_steps = 30\nmin_lr = 0.01\n", 0.1,
             300, 7);
    for (int64_t t = 0; s && t <= 320; t++)
        CHECK_LR(fg_scheduler_lr(s, t, (int)(t / 50)), hf_lr(t, 0.1, 0.01, 30, 300));
    fg_scheduler_destroy(s);
}

static void expect_refusal(const char *ini, int64_t steps, const char *message)
{
    fg_config *cfg = NULL;
    fg_error err = {0};
    fg_scheduler *s = NULL;
    fg_config_parse_string(ini, "sched.ini", &cfg, &err);
    if (fg_scheduler_create(cfg, 0.1, steps, 1, &s, &err) != FG_INVALID_ARGUMENT ||
        !strstr(err.message, message)) {
        printf("FAIL: '%s' gave '%s', want '%s'\n", ini, err.message, message);
        fg_test_failures++;
        fg_scheduler_destroy(s);
    }
    fg_config_destroy(cfg);
}

static void test_cosine_after_warmup_refusals(void)
{
    expect_refusal("[scheduler]\nname = cosine_with_warmup\nwarmup_steps = 100\ndecay_steps = 100\n",
                   1000, "sched.ini:4: [scheduler] name = cosine_with_warmup needs decay_steps "
                   "(100) above warmup_steps (100)");
    expect_refusal("[scheduler]\nname = cosine_with_warmup\nwarmup_steps = 50\n", 40,
                   "sched.ini:3: [scheduler] name = cosine_with_warmup needs decay_steps (40: the "
                   "run's optimizer steps) above warmup_steps (50)");
    expect_refusal("[scheduler]\nname = cosine_with_warmup\nwarmup_start_factor = 0.5\n", 100,
                   "sched.ini:3: [scheduler] warmup_start_factor does not apply to name = "
                   "cosine_with_warmup");
    expect_refusal("[scheduler]\nname = cosine\ndecay_steps = 5\n", 100,
                   "sched.ini:3: [scheduler] decay_steps does not apply to name = cosine");
}

static void test_plateau(void)
{
    fg_scheduler *s = make("[scheduler]\nname = reduce_on_plateau\npatience = 1\nfactor = 0.5\ncooldown = 1\n",
                           0.1, 100, 10);
    if (!s) return;
    /* PyTorch ReduceLROnPlateau(mode=min, patience=1, factor=0.5, cooldown=1, threshold=1e-4) */
    const double losses[] = {1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95};
    const double want[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025};
    for (int i = 0; i < 8; i++) {
        fg_scheduler_observe(s, "val/loss", losses[i]);
        fg_scheduler_observe(s, "train/loss", 100.0); /* not the monitor: ignored */
        CHECK_LR(fg_scheduler_lr(s, 0, i), want[i]);
    }
    fg_scheduler_state st;
    fg_scheduler_get_state(s, &st);
    CHECK_LR(st.scale, 0.25);
    fg_scheduler_destroy(s);
}

static void test_exponential(void)
{
    fg_scheduler *s = make("[scheduler]\nname = exponential\ninterval = step\ngamma = 1.5\n", 1e-4, 100, 1);
    for (int t = 0; s && t < 20; t++) CHECK_LR(fg_scheduler_lr(s, t, 0), 1e-4 * pow(1.5, t));
    fg_scheduler_destroy(s);
}

static void test_refusals(void)
{
    fg_config *cfg = NULL;
    fg_error err = {0};
    fg_scheduler *s = NULL;
    fg_config_parse_string("[scheduler]\nname = cosine\nstep_size = 3\n", "sched.ini", &cfg, &err);
    if (fg_scheduler_create(cfg, 0.1, 10, 1, &s, &err) != FG_INVALID_ARGUMENT ||
        !strstr(err.message, "sched.ini:3: [scheduler] step_size does not apply to name = cosine")) {
        printf("FAIL: a step key under cosine: '%s'\n", err.message);
        fg_test_failures++;
    }
    fg_config_destroy(cfg);
    fg_config_parse_string("[scheduler]\nname = multistep\nmilestones = 5, 2\n", "sched.ini", &cfg, &err);
    if (fg_scheduler_create(cfg, 0.1, 10, 1, &s, &err) != FG_INVALID_ARGUMENT ||
        !strstr(err.message, "milestones = '5, 2' must be up to 64 increasing")) {
        printf("FAIL: decreasing milestones: '%s'\n", err.message);
        fg_test_failures++;
    }
    fg_config_destroy(cfg);
}

int main(void)
{
    test_step();
    test_multistep_per_step();
    test_cosine_with_warmup();
    test_plateau();
    test_exponential();
    test_refusals();
    test_cosine_after_warmup();
    test_cosine_after_warmup_refusals();
    return fg_test_report("scheduler");
}
