/* callback.checkpoint.*: the plugin asks for saves at the right events with the right
 * file names, and keeps exactly the top-k files on disk. The test plays the trainer: after
 * each on_event that asks for a checkpoint it writes the file (through a temporary and a
 * rename, as fg_ckpt_write_atomic does), then looks at the folder. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_test.h"

#ifndef FG_TEST_CHECKPOINT_PLUGIN
#error "FG_TEST_CHECKPOINT_PLUGIN must name the built plugin"
#endif

/* ---- the trainer's side -------------------------------------------------------------- */

typedef struct sim {
    cb_instance in;
    char ckpt_dir[1200]; /* run_dir/checkpoints */
    char asked[512];     /* the path asked for at the latest event; "" when none */
    char also[512];      /* its second name (checkpoint_also_path); "" when none */
    fg_status status;
    fg_error err;
} sim;

static void resolve(const sim *s, const char *path, char *out, size_t cap)
{
    if (path[0] == '/')
        snprintf(out, cap, "%s", path);
    else
        snprintf(out, cap, "%s/%s", s->in.run_dir, path);
}

/* What the trainer does with a save request: parent folder, temporary file, rename. */
static void trainer_write(const sim *s, const char *path, const char *content)
{
    char full[2048], tmp[2100];
    resolve(s, path, full, sizeof full);
    char *slash = strrchr(full, '/');
    if (slash) {
        *slash = '\0';
        mkdir(full, 0755);
        *slash = '/';
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", full, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(content, f) < 0 || fclose(f) != 0 || rename(tmp, full) != 0) {
        fprintf(stderr, "trainer_write %s: %s\n", full, strerror(errno));
        fg_test_failures++;
    }
}

static void sim_start(sim *s, const char *plugin_path, const char *scratch, const char *name)
{
    memset(s, 0, sizeof *s);
    cb_prepare(&s->in, load_callback_plugin(plugin_path, "checkpoint"));
    make_scratch_dir(scratch, name, s->in.run_dir, sizeof s->in.run_dir);
    snprintf(s->ckpt_dir, sizeof s->ckpt_dir, "%s/checkpoints", s->in.run_dir);
}

static void sim_init(sim *s)
{
    fg_status st = cb_init(&s->in, &s->err);
    CHECK_STATUS(st, FG_OK, s->err);
    if (st != FG_OK)
        exit(1);
}

/* What the trainer does with checkpoint_also_path: a hard link under a temporary name,
 * renamed over the old one. */
static void trainer_link(const sim *s, const char *written, const char *also)
{
    char src[2048], dst[2048], tmp[2100];
    resolve(s, written, src, sizeof src);
    resolve(s, also, dst, sizeof dst);
    snprintf(tmp, sizeof tmp, "%s.tmp.link", dst);
    if (link(src, tmp) != 0 || rename(tmp, dst) != 0) {
        fprintf(stderr, "trainer_link %s -> %s: %s\n", dst, src, strerror(errno));
        fg_test_failures++;
    }
}

/* Sends one event; writes the asked-for file with content "epoch E step S". */
static const char *ev(sim *s, uint32_t type, int64_t epoch, int64_t step, const fg_metric *m,
                      uint32_t n)
{
    fg_callback_action act;
    s->status = cb_send(&s->in, type, epoch, step, m, n, &act, &s->err);
    s->asked[0] = '\0';
    snprintf(s->also, sizeof s->also, "%s", act.checkpoint_also_path);
    CHECK_EQ(act.stop, 0);
    CHECK(act.checkpoint_also_path[0] == '\0' || act.save_checkpoint);
    if (s->status == FG_OK && act.save_checkpoint) {
        snprintf(s->asked, sizeof s->asked, "%s", act.checkpoint_path);
        char content[64];
        snprintf(content, sizeof content, "epoch %lld step %lld", (long long)epoch, (long long)step);
        if (s->in.is_rank_zero)
            trainer_write(s, act.checkpoint_path, content);
        if (s->in.is_rank_zero && s->also[0])
            trainer_link(s, act.checkpoint_path, s->also);
    }
    return s->asked;
}

static void expect_ok(const sim *s)
{
    CHECK_STATUS(s->status, FG_OK, s->err);
}

#define CHECK_DIR(s, expected)                                                             \
    do {                                                                                   \
        char listing_[4096];                                                               \
        list_dir((s)->ckpt_dir, listing_, sizeof listing_);                                \
        CHECK_STR(listing_, expected);                                                  \
    } while (0)

/* An epoch as the trainer runs it: a logged step, epoch_end, validation_end. The two
 * strings are the paths expected at epoch_end and at validation_end. */
static void epoch(sim *s, int64_t e, double train_loss, double val_loss, const char *at_epoch_end,
                  const char *at_validation)
{
    int64_t step = (e + 1) * 10;
    CHECK_STR(ev(s, FG_EVENT_TRAIN_STEP_END, e, step - 5, METRICS({"train/step_loss", 2.0},
                    {"train/step_acc", 0.5})), "");
    expect_ok(s);
    CHECK_STR(ev(s, FG_EVENT_EPOCH_END, e, step, METRICS({"train/loss", train_loss},
                    {"train/acc", 0.5})), at_epoch_end);
    expect_ok(s);
    CHECK_STR(ev(s, FG_EVENT_VALIDATION_END, e, step, METRICS({"val/loss", val_loss},
                    {"val/acc", 1.0 - val_loss})), at_validation);
    expect_ok(s);
}

/* The same in Lightning's order (fulgur's trainer too): validation before epoch_end. */
static void epoch_val_first(sim *s, int64_t e, double train_loss, const double *val_loss,
                            const char *at_validation, const char *at_epoch_end)
{
    int64_t step = (e + 1) * 10;
    CHECK_STR(ev(s, FG_EVENT_TRAIN_STEP_END, e, step - 5, METRICS({"train/step_loss", 2.0},
                    {"train/step_acc", 0.5})), "");
    expect_ok(s);
    if (val_loss) {
        CHECK_STR(ev(s, FG_EVENT_VALIDATION_END, e, step, METRICS({"val/loss", *val_loss},
                        {"val/acc", 1.0 - *val_loss})), at_validation);
        expect_ok(s);
    }
    CHECK_STR(ev(s, FG_EVENT_EPOCH_END, e, step, METRICS({"train/loss", train_loss},
                    {"train/acc", 0.5})), at_epoch_end);
    expect_ok(s);
}

static void fit_end(sim *s, int64_t epochs)
{
    CHECK_STR(ev(s, FG_EVENT_FIT_END, epochs, epochs * 10, NO_METRICS), "");
    expect_ok(s);
}

/* ---- cases --------------------------------------------------------------------------- */

static void case_defaults(const char *path, const char *scratch)
{
    /* No monitor, save_top_k 1, every epoch: the latest epoch end, the previous deleted. */
    sim s;
    sim_start(&s, path, scratch, "defaults");
    sim_init(&s);
    epoch(&s, 0, 1.0, 1.0, "checkpoints/epoch=0-step=10.safetensors", "");
    CHECK_DIR(&s, "epoch=0-step=10.safetensors");
    epoch(&s, 1, 1.0, 1.0, "checkpoints/epoch=1-step=20.safetensors", "");
    CHECK_DIR(&s, "epoch=1-step=20.safetensors");
    epoch(&s, 2, 1.0, 1.0, "checkpoints/epoch=2-step=30.safetensors", "");
    CHECK_DIR(&s, "epoch=2-step=30.safetensors");
    fit_end(&s, 3);
    CHECK_DIR(&s, "epoch=2-step=30.safetensors");
    cb_deinit(&s.in);
}

static void case_top_k(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "top_k");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "save_top_k", "2");
    cb_set(&s.in, "filename", "{epoch}-{val/loss}");
    sim_init(&s);
    /* val/loss comes with validation_end, so that is where the check happens. */
    epoch(&s, 0, 1.0, 0.5, "", "checkpoints/0-0.5000.safetensors");
    CHECK_DIR(&s, "0-0.5000.safetensors");
    epoch(&s, 1, 1.0, 0.4, "", "checkpoints/1-0.4000.safetensors");
    CHECK_DIR(&s, "0-0.5000.safetensors 1-0.4000.safetensors");
    epoch(&s, 2, 1.0, 0.6, "", "");
    CHECK_DIR(&s, "0-0.5000.safetensors 1-0.4000.safetensors");
    epoch(&s, 3, 1.0, 0.3, "", "checkpoints/3-0.3000.safetensors");
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "0-0.5000.safetensors 1-0.4000.safetensors 3-0.3000.safetensors");
    epoch(&s, 4, 1.0, 0.45, "", "");
    /* Equal to the worst kept is not better. */
    epoch(&s, 5, 1.0, 0.4, "", "");
    epoch(&s, 6, 1.0, 0.35, "", "checkpoints/6-0.3500.safetensors");
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "1-0.4000.safetensors 3-0.3000.safetensors 6-0.3500.safetensors");
    fit_end(&s, 7);
    /* The next event deleted it: its replacement was on disk. */
    CHECK_DIR(&s, "3-0.3000.safetensors 6-0.3500.safetensors");
    CHECK_CONTAINS(s.in.fh.log, "info: best checkpoint checkpoints/3-0.3000.safetensors "
                                "(val/loss 0.3000)");
    cb_deinit(&s.in);
}

static void case_mode_max(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "mode_max");
    cb_set(&s.in, "monitor", "val/acc");
    cb_set(&s.in, "mode", "max");
    cb_set(&s.in, "filename", "{val/acc}");
    sim_init(&s);
    epoch(&s, 0, 1.0, 0.5, "", "checkpoints/0.5000.safetensors");  /* val/acc 0.5 */
    epoch(&s, 1, 1.0, 0.25, "", "checkpoints/0.7500.safetensors"); /* 0.75 */
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "0.5000.safetensors 0.7500.safetensors");
    epoch(&s, 2, 1.0, 0.5, "", "");
    CHECK_DIR(&s, "0.7500.safetensors");
    cb_deinit(&s.in);
}

static void case_keep_all_and_none(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "keep_all");
    cb_set(&s.in, "monitor", "train/loss");
    cb_set(&s.in, "save_top_k", "-1");
    sim_init(&s);
    /* train/loss is in epoch_end itself: the check happens there. */
    epoch(&s, 0, 1.0, 0.5, "checkpoints/epoch=0-step=10.safetensors", "");
    epoch(&s, 1, 2.0, 0.5, "checkpoints/epoch=1-step=20.safetensors", "");
    epoch(&s, 2, 0.5, 0.5, "checkpoints/epoch=2-step=30.safetensors", "");
    CHECK_DIR(&s, "epoch=0-step=10.safetensors epoch=1-step=20.safetensors "
                  "epoch=2-step=30.safetensors");
    cb_deinit(&s.in);

    sim_start(&s, path, scratch, "keep_none");
    cb_set(&s.in, "save_top_k", "0");
    sim_init(&s);
    epoch(&s, 0, 1.0, 0.5, "", "");
    epoch(&s, 1, 1.0, 0.5, "", "");
    CHECK_DIR(&s, "");
    cb_deinit(&s.in);
}

static void read_ckpt(const sim *s, const char *name, char *out, size_t cap)
{
    char full[2048];
    snprintf(full, sizeof full, "%s/%s", s->ckpt_dir, name);
    read_file(full, out, cap);
}

static int same_file(const sim *s, const char *a, const char *b)
{
    char fa[2048], fb[2048];
    struct stat sa, sb;
    snprintf(fa, sizeof fa, "%s/%s", s->ckpt_dir, a);
    snprintf(fb, sizeof fb, "%s/%s", s->ckpt_dir, b);
    return stat(fa, &sa) == 0 && stat(fb, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

static void case_save_last(const char *path, const char *scratch)
{
    sim s;
    char text[128];
    sim_start(&s, path, scratch, "save_last");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "filename", "{epoch}-{val/loss}");
    cb_set(&s.in, "save_last", "true");
    sim_init(&s);
    /* A top-k save: the action carries its path, and last.safetensors as its second
     * name, which the trainer links at once. */
    epoch(&s, 0, 1.0, 0.5, "", "checkpoints/0-0.5000.safetensors");
    CHECK_STR(s.also, "checkpoints/last.safetensors");
    CHECK_DIR(&s, "0-0.5000.safetensors last.safetensors");
    CHECK(same_file(&s, "0-0.5000.safetensors", "last.safetensors"));
    CHECK_STR(ev(&s, FG_EVENT_EPOCH_START, 1, 10, NO_METRICS), "");
    CHECK_STR(s.also, "");
    expect_ok(&s);
    /* No top-k save: last.safetensors itself is asked for, and the kept file keeps its
     * own content (the trainer's rename replaced last's name, not the shared file). */
    epoch(&s, 1, 1.0, 0.7, "", "checkpoints/last.safetensors");
    CHECK_STR(s.also, "");
    CHECK_DIR(&s, "0-0.5000.safetensors last.safetensors");
    read_ckpt(&s, "last.safetensors", text, sizeof text);
    CHECK_STR(text, "epoch 1 step 20");
    read_ckpt(&s, "0-0.5000.safetensors", text, sizeof text);
    CHECK_STR(text, "epoch 0 step 10");
    /* A new best: the old one is deleted, last is the new one's second name. */
    epoch(&s, 2, 1.0, 0.25, "", "checkpoints/2-0.2500.safetensors");
    CHECK_STR(s.also, "checkpoints/last.safetensors");
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "0-0.5000.safetensors 2-0.2500.safetensors last.safetensors");
    CHECK(same_file(&s, "2-0.2500.safetensors", "last.safetensors"));
    fit_end(&s, 3);
    CHECK_DIR(&s, "2-0.2500.safetensors last.safetensors");
    read_ckpt(&s, "last.safetensors", text, sizeof text);
    CHECK_STR(text, "epoch 2 step 30");
    CHECK(same_file(&s, "2-0.2500.safetensors", "last.safetensors"));
    cb_deinit(&s.in);

    /* save_top_k = 0 with save_last: only last, at every check. */
    sim_start(&s, path, scratch, "save_last_only");
    cb_set(&s.in, "save_top_k", "0");
    cb_set(&s.in, "save_last", "true");
    sim_init(&s);
    epoch(&s, 0, 1.0, 0.5, "checkpoints/last.safetensors", "");
    epoch(&s, 1, 1.0, 0.5, "checkpoints/last.safetensors", "");
    CHECK_DIR(&s, "last.safetensors");
    cb_deinit(&s.in);
}

/* Logged steps every 2; saves at the first report at or after each multiple of 5. */
static void case_every_n_train_steps(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "every_n_train_steps");
    cb_set(&s.in, "every_n_train_steps", "5");
    cb_set(&s.in, "every_n_epochs", "0");
    cb_set(&s.in, "save_top_k", "-1");
    sim_init(&s);
    const char *expected[21] = {[6] = "checkpoints/epoch=0-step=6.safetensors",
                                [10] = "checkpoints/epoch=0-step=10.safetensors",
                                [16] = "checkpoints/epoch=1-step=16.safetensors",
                                [20] = "checkpoints/epoch=1-step=20.safetensors"};
    for (int64_t step = 2; step <= 20; step += 2) {
        int64_t e = (step - 1) / 10;
        CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, e, step, METRICS({"train/step_loss", 1.0})),
                     expected[step] ? expected[step] : "");
        expect_ok(&s);
        if (step % 10 == 0) { /* every_n_epochs = 0: no epoch checks */
            CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, e, step, METRICS({"train/loss", 1.0})), "");
            CHECK_STR(ev(&s, FG_EVENT_VALIDATION_END, e, step, METRICS({"val/loss", 1.0})), "");
        }
    }
    CHECK_DIR(&s, "epoch=0-step=10.safetensors epoch=0-step=6.safetensors "
                  "epoch=1-step=16.safetensors epoch=1-step=20.safetensors");
    cb_deinit(&s.in);
}

/* A step check and an epoch check at the same global step save once. */
static void case_one_save_per_step(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "one_save_per_step");
    cb_set(&s.in, "every_n_train_steps", "10");
    cb_set(&s.in, "save_top_k", "-1");
    sim_init(&s);
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 0, 5, METRICS({"train/step_loss", 1.0})), "");
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 0, 10, METRICS({"train/step_loss", 1.0})),
                 "checkpoints/epoch=0-step=10.safetensors");
    CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0})), "");
    /* A short last epoch: its end is not a multiple of 10, so the epoch check saves. */
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 1, 15, METRICS({"train/step_loss", 1.0})), "");
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 1, 17, METRICS({"train/step_loss", 1.0})), "");
    CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, 1, 17, METRICS({"train/loss", 1.0})),
                 "checkpoints/epoch=1-step=17.safetensors");
    CHECK_DIR(&s, "epoch=0-step=10.safetensors epoch=1-step=17.safetensors");
    cb_deinit(&s.in);
}

static void case_every_n_epochs(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "every_n_epochs");
    cb_set(&s.in, "every_n_epochs", "2");
    cb_set(&s.in, "save_top_k", "-1");
    sim_init(&s);
    epoch(&s, 0, 1.0, 1.0, "", "");
    epoch(&s, 1, 1.0, 1.0, "checkpoints/epoch=1-step=20.safetensors", "");
    epoch(&s, 2, 1.0, 1.0, "", "");
    epoch(&s, 3, 1.0, 1.0, "checkpoints/epoch=3-step=40.safetensors", "");
    CHECK_DIR(&s, "epoch=1-step=20.safetensors epoch=3-step=40.safetensors");
    cb_deinit(&s.in);
}

/* A step check cannot rank by val/loss before the first validation (skipped quietly, as
 * Lightning does); afterwards it ranks by the latest validation's value. */
static void case_steps_rank_by_validation(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "steps_rank_by_validation");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "every_n_train_steps", "5");
    cb_set(&s.in, "every_n_epochs", "0");
    sim_init(&s);
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 0, 5, METRICS({"train/step_loss", 1.0})), "");
    expect_ok(&s);
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 0, 10, METRICS({"train/step_loss", 1.0})), "");
    expect_ok(&s);
    ev(&s, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0}));
    ev(&s, FG_EVENT_VALIDATION_END, 0, 10, METRICS({"val/loss", 0.5}));
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 1, 15, METRICS({"train/step_loss", 1.0})),
                 "checkpoints/epoch=1-step=15.safetensors");
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 1, 20, METRICS({"train/step_loss", 1.0})), "");
    ev(&s, FG_EVENT_EPOCH_END, 1, 20, METRICS({"train/loss", 1.0}));
    ev(&s, FG_EVENT_VALIDATION_END, 1, 20, METRICS({"val/loss", 0.25}));
    CHECK_STR(ev(&s, FG_EVENT_TRAIN_STEP_END, 2, 25, METRICS({"train/step_loss", 1.0})),
                 "checkpoints/epoch=2-step=25.safetensors");
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "epoch=1-step=15.safetensors epoch=2-step=25.safetensors");
    cb_deinit(&s.in);

    /* After a validation, a monitor that is still missing is an error. */
    sim_start(&s, path, scratch, "steps_missing_after_validation");
    cb_set(&s.in, "monitor", "val/los");
    cb_set(&s.in, "every_n_train_steps", "5");
    cb_set(&s.in, "every_n_epochs", "0");
    sim_init(&s);
    ev(&s, FG_EVENT_TRAIN_STEP_END, 0, 5, METRICS({"train/step_loss", 1.0}));
    expect_ok(&s);
    ev(&s, FG_EVENT_VALIDATION_END, 0, 5, METRICS({"val/loss", 0.5}));
    expect_ok(&s);
    ev(&s, FG_EVENT_TRAIN_STEP_END, 1, 10, METRICS({"train/step_loss", 1.0}));
    CHECK_EQ(s.status, FG_INVALID_ARGUMENT);
    CHECK_STR(s.err.message, "monitor names metric val/los, which no event has reported by "
                                "step 10 (epoch 2); reported: train/step_loss, val/loss");
    cb_deinit(&s.in);
}

/* Validation every second epoch: an epoch without one has no check, and no error. */
static void case_sparse_validation(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "sparse_validation");
    cb_set(&s.in, "monitor", "val/loss");
    sim_init(&s);
    CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0})), "");
    expect_ok(&s);
    CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, 1, 20, METRICS({"train/loss", 1.0})), "");
    CHECK_STR(ev(&s, FG_EVENT_VALIDATION_END, 1, 20, METRICS({"val/loss", 0.5})),
                 "checkpoints/epoch=1-step=20.safetensors");
    CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, 2, 30, METRICS({"train/loss", 1.0})), "");
    /* A validation of another epoch than the pending one does not check. */
    CHECK_STR(ev(&s, FG_EVENT_VALIDATION_END, 3, 40, METRICS({"val/loss", 0.25})), "");
    fit_end(&s, 4);
    CHECK_DIR(&s, "epoch=1-step=20.safetensors");
    cb_deinit(&s.in);
}

static void case_validation_first(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "validation_first");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "filename", "{epoch}-{val/loss}");
    sim_init(&s);
    const double v0 = 0.5, v1 = 0.25, v3 = 0.125, v4 = 0.75;
    epoch_val_first(&s, 0, 1.0, &v0, "", "checkpoints/0-0.5000.safetensors");
    CHECK_DIR(&s, "0-0.5000.safetensors");
    epoch_val_first(&s, 1, 1.0, &v1, "", "checkpoints/1-0.2500.safetensors");
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "0-0.5000.safetensors 1-0.2500.safetensors");
    /* No validation this epoch: val/loss of epoch 1 is stale, so no check. */
    epoch_val_first(&s, 2, 1.0, NULL, "", "");
    epoch_val_first(&s, 3, 1.0, &v3, "", "checkpoints/3-0.1250.safetensors");
    epoch_val_first(&s, 4, 1.0, &v4, "", "");
    fit_end(&s, 5);
    CHECK_DIR(&s, "3-0.1250.safetensors");
    cb_deinit(&s.in);
}

/* val_check_interval: a validation inside a due epoch is a check of its own. */
static void case_mid_epoch_validation(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "mid_epoch_validation");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "save_top_k", "-1");
    cb_set(&s.in, "every_n_epochs", "2");
    sim_init(&s);
    for (int64_t e = 0; e < 2; e++) {
        int64_t base = e * 10;
        int due = e == 1;
        ev(&s, FG_EVENT_TRAIN_STEP_END, e, base + 5, METRICS({"train/step_loss", 1.0}));
        CHECK_STR(ev(&s, FG_EVENT_VALIDATION_END, e, base + 5, METRICS({"val/loss", 0.5})),
                     due ? "checkpoints/epoch=1-step=15.safetensors" : "");
        expect_ok(&s);
        ev(&s, FG_EVENT_TRAIN_STEP_END, e, base + 10, METRICS({"train/step_loss", 1.0}));
        CHECK_STR(ev(&s, FG_EVENT_VALIDATION_END, e, base + 10, METRICS({"val/loss", 0.25})), "");
        CHECK_STR(ev(&s, FG_EVENT_EPOCH_END, e, base + 10, METRICS({"train/loss", 1.0})),
                     due ? "checkpoints/epoch=1-step=20.safetensors" : "");
        expect_ok(&s);
    }
    CHECK_DIR(&s, "epoch=1-step=15.safetensors epoch=1-step=20.safetensors");
    cb_deinit(&s.in);
}

static void case_missing_metric(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "missing_metric");
    cb_set(&s.in, "monitor", "val/los");
    sim_init(&s);
    ev(&s, FG_EVENT_TRAIN_STEP_END, 0, 5, METRICS({"train/step_loss", 1.0}, {"train/step_acc", 0.5}));
    expect_ok(&s);
    ev(&s, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0}, {"train/acc", 0.5}));
    expect_ok(&s);
    ev(&s, FG_EVENT_VALIDATION_END, 0, 10, METRICS({"val/loss", 0.5}, {"val/acc", 0.5}));
    CHECK_EQ(s.status, FG_INVALID_ARGUMENT);
    CHECK_STR(s.err.message, "monitor names metric val/los, which no event has reported by "
                                "step 10 (epoch 1); reported: train/step_loss, train/step_acc, "
                                "train/loss, train/acc, val/loss, val/acc");
    cb_deinit(&s.in);

    /* A metric of the file name is needed just the same. */
    sim_start(&s, path, scratch, "missing_name_metric");
    cb_set(&s.in, "filename", "{epoch}-{val/acc}");
    sim_init(&s);
    ev(&s, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0}));
    expect_ok(&s);
    ev(&s, FG_EVENT_VALIDATION_END, 0, 10, METRICS({"val/loss", 0.5}));
    CHECK_EQ(s.status, FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(s.err.message, "filename names metric val/acc, which no event has reported");
    cb_deinit(&s.in);

    /* No validation at all: fit_end says no check could run. */
    sim_start(&s, path, scratch, "no_validation");
    cb_set(&s.in, "monitor", "val/loss");
    sim_init(&s);
    ev(&s, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0}));
    expect_ok(&s);
    ev(&s, FG_EVENT_EPOCH_END, 1, 20, METRICS({"train/loss", 1.0}));
    expect_ok(&s);
    ev(&s, FG_EVENT_FIT_END, 2, 20, NO_METRICS);
    CHECK_EQ(s.status, FG_INVALID_ARGUMENT);
    CHECK_STR(s.err.message, "monitor names metric val/loss, which no event reported during "
                                "fit (20 steps), so no check could run; reported: train/loss");
    cb_deinit(&s.in);
}

static void case_file_names(const char *path, const char *scratch)
{
    /* '/' becomes '_': one file, never a folder. */
    sim s;
    sim_start(&s, path, scratch, "slash");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "filename", "epoch={epoch}-val/loss={val/loss}");
    sim_init(&s);
    epoch(&s, 0, 1.0, 0.123456, "", "checkpoints/epoch=0-val_loss=0.1235.safetensors");
    CHECK_DIR(&s, "epoch=0-val_loss=0.1235.safetensors");
    cb_deinit(&s.in);

    /* A fixed name collides with a kept file: -v1; the one leaving may be overwritten. */
    sim_start(&s, path, scratch, "versions");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "filename", "best");
    cb_set(&s.in, "save_top_k", "2");
    sim_init(&s);
    epoch(&s, 0, 1.0, 0.5, "", "checkpoints/best.safetensors");
    epoch(&s, 1, 1.0, 0.4, "", "checkpoints/best-v1.safetensors");
    epoch(&s, 2, 1.0, 0.3, "", "checkpoints/best.safetensors");
    CHECK_DIR(&s, "best-v1.safetensors best.safetensors");
    char text[64], full[2048];
    snprintf(full, sizeof full, "%s/best.safetensors", s.ckpt_dir);
    read_file(full, text, sizeof text);
    CHECK_STR(text, "epoch 2 step 30");
    epoch(&s, 3, 1.0, 0.2, "", "checkpoints/best-v1.safetensors");
    CHECK_DIR(&s, "best-v1.safetensors best.safetensors");
    cb_deinit(&s.in);

    /* An absolute dirpath is used as is; a relative run folder does not matter. */
    sim_start(&s, path, scratch, "absolute");
    char abs_dir[1200];
    snprintf(abs_dir, sizeof abs_dir, "%s/elsewhere/", s.in.run_dir);
    cb_set(&s.in, "dirpath", abs_dir);
    sim_init(&s);
    char want[1400];
    snprintf(want, sizeof want, "%s/elsewhere/epoch=0-step=10.safetensors", s.in.run_dir);
    epoch(&s, 0, 1.0, 0.5, want, "");
    snprintf(want, sizeof want, "%s/elsewhere/epoch=1-step=20.safetensors", s.in.run_dir);
    epoch(&s, 1, 1.0, 0.5, want, "");
    snprintf(s.ckpt_dir, sizeof s.ckpt_dir, "%s/elsewhere", s.in.run_dir);
    CHECK_DIR(&s, "epoch=1-step=20.safetensors");
    cb_deinit(&s.in);
}

static void case_nan_ranks_worst(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "nan_ranks_worst");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "save_top_k", "2");
    cb_set(&s.in, "filename", "{epoch}-{val/loss}");
    sim_init(&s);
    epoch(&s, 0, 1.0, 0.5, "", "checkpoints/0-0.5000.safetensors");
    epoch(&s, 1, 1.0, NAN, "", "checkpoints/1-nan.safetensors"); /* there is room */
    epoch(&s, 2, 1.0, 0.75, "", "checkpoints/2-0.7500.safetensors");
    /* The file leaving the top k stays until the next event (issue 17). */
    CHECK_DIR(&s, "0-0.5000.safetensors 1-nan.safetensors 2-0.7500.safetensors");
    epoch(&s, 3, 1.0, NAN, "", "");
    CHECK_DIR(&s, "0-0.5000.safetensors 2-0.7500.safetensors");
    cb_deinit(&s.in);
}

/* Other ranks get the same answers but never delete anything. */
static void case_other_ranks(const char *path, const char *scratch)
{
    sim s;
    sim_start(&s, path, scratch, "other_ranks");
    cb_set(&s.in, "monitor", "val/loss");
    cb_set(&s.in, "filename", "{epoch}");
    s.in.is_rank_zero = 0;
    sim_init(&s);
    /* Files the plugin would delete on rank 0. */
    write_file(s.in.run_dir, "checkpoints/0.safetensors", "x");
    write_file(s.in.run_dir, "checkpoints/1.safetensors", "x");
    epoch(&s, 0, 1.0, 0.5, "", "checkpoints/0.safetensors");
    epoch(&s, 1, 1.0, 0.25, "", "checkpoints/1.safetensors");
    epoch(&s, 2, 1.0, 0.125, "", "checkpoints/2.safetensors");
    CHECK_DIR(&s, "0.safetensors 1.safetensors");
    fit_end(&s, 3);
    CHECK_STR(s.in.fh.log, "");
    cb_deinit(&s.in);
}

static void case_bad_options(const char *path, const char *scratch)
{
    (void)scratch;
    struct {
        const char *key, *value, *message;
    } bad[] = {
        {"filename", "{epoch", "filename = '{epoch': '{' at position 1 is never closed"},
        {"filename", "a}", "filename = 'a}': '}' at position 2 has no '{'"},
        {"filename", "x{}", "filename = 'x{}': empty {} at position 2"},
        {"filename", "{a{b}}", "filename = '{a{b}}': '{' at position 3 inside another placeholder"},
        {"filename", "", "filename is empty"},
        {"save_top_k", "3", "save_top_k = 3 needs a monitor to rank by"},
        {"save_top_k", "-2", "save_top_k = -2: must be -1 (all), 0 (none) or a count"},
        {"mode", "avg", "mode = 'avg': expected min or max"},
        {"every_n_epochs", "-1", "every_n_epochs = -1: must be >= 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cb_instance in;
        cb_prepare(&in, load_callback_plugin(path, "checkpoint"));
        cb_set(&in, bad[i].key, bad[i].value);
        fg_error err;
        fg_status st = cb_init(&in, &err);
        CHECK_EQ(st, FG_INVALID_ARGUMENT);
        CHECK_CONTAINS(err.message, bad[i].message);
        if (st == FG_OK)
            cb_deinit(&in);
    }
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"defaults", case_defaults},
        {"top_k", case_top_k},
        {"mode_max", case_mode_max},
        {"keep_all_and_none", case_keep_all_and_none},
        {"save_last", case_save_last},
        {"every_n_train_steps", case_every_n_train_steps},
        {"one_save_per_step", case_one_save_per_step},
        {"every_n_epochs", case_every_n_epochs},
        {"steps_rank_by_validation", case_steps_rank_by_validation},
        {"sparse_validation", case_sparse_validation},
        {"validation_first", case_validation_first},
        {"mid_epoch_validation", case_mid_epoch_validation},
        {"missing_metric", case_missing_metric},
        {"file_names", case_file_names},
        {"nan_ranks_worst", case_nan_ranks_worst},
        {"other_ranks", case_other_ranks},
        {"bad_options", case_bad_options},
    };
    return run_case(cases, sizeof cases / sizeof cases[0], argc, argv, FG_TEST_CHECKPOINT_PLUGIN);
}
