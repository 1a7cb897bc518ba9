/* Signals that stop a fit at a step boundary.
 * SLURM auto-requeue: a signal (SIGUSR1, which `sbatch --signal=USR1@90` sends before the
 * time limit) makes the fit checkpoint at the next step boundary, stop, and ask SLURM to
 * requeue the job (`scontrol requeue $SLURM_JOB_ID`); the requeued job resumes with
 * --ckpt-path last.
 * Interrupts: a first SIGINT or SIGTERM stops the fit at the next step boundary; a
 * checkpoint is written when [trainer] checkpoint_on_interrupt or save_on_exception asks,
 * the loggers get the fit's end, and the run says how to resume and exits 130 / 143. A
 * second SIGINT exits at once (130).
 * Under a comm every rank stops at the same step: the flags are agreed with a max
 * all-reduce about once a second (see requeue.c). */
#ifndef FG_REQUEUE_H
#define FG_REQUEUE_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "fulgur/plugin.h"
#include "progress.h"
#include "ranks.h"

typedef struct fg_requeue {
    int signo;               /* 0: off */
    int armed;               /* our handler is installed */
    int64_t next_check;      /* global step of the next agreement (under a comm) */
    int64_t last_check_step;
    double last_check_time;
    int stopped;             /* every rank agreed: this fit stops for a requeue */
    int interrupts_armed;    /* SIGINT and SIGTERM handlers installed */
    /* test hooks, read once when armed (requeue.c): */
    int64_t test_step;       /* FULGUR_TEST_INTERRUPT_AT's step; -1: none */
    int test_rank;           /* FULGUR_TEST_INTERRUPT_RANK; -1: every rank */
    int test_signo, test_twice;
    int test_pass;           /* FULGUR_TEST_INTERRUPT_AT=val:SIG / test:SIG: 'v', 't'; 0 */
    int test_skew_rank;      /* FULGUR_TEST_CLOCK_SKEW=RANK:SECONDS: that rank's clock runs */
    double test_skew_s;      /* SECONDS ahead (max_time's elapsed time); -1: none */
    int time_up;             /* every rank agreed: [trainer] max_time is reached */
    int64_t test_agree_every; /* FULGUR_TEST_AGREE_EVERY; 0: about once a second */
    int interrupt_signo;     /* every rank agreed: SIGINT or SIGTERM stopped this fit; 0 */
    int checkpoint_on_interrupt; /* [trainer] checkpoint_on_interrupt or save_on_exception */
    char checkpoint[8192];   /* what it wrote */
} fg_requeue;

/* What requeue reads of the fit, given by the trainer at each call. */
typedef struct fg_requeue_fit {
    fg_ranks ranks;
    int verbosity;
    FILE *out;
    const fg_config *cfg;  /* the config's path, [callback.checkpoint] dirpath */
    const char *run_dir;   /* where a relative dirpath goes */
    const fg_progress *progress;
    double max_time_s;     /* [trainer] max_time; <= 0: none */
    int64_t max_steps;     /* [trainer] max_steps; < 0: none */
    int64_t max_epochs;
} fg_requeue_fit;

/* [trainer] requeue_signal: auto (SIGUSR1 when SLURM_JOB_ID is set), SIGUSR1, SIGUSR2 or
 * none. `origin` names the key's place for messages. */
fg_status fg_requeue_configure(fg_requeue *q, const char *value, const char *origin,
                               fg_error *err);
/* Installs the handler (an async-signal-safe flag) for a fit; disarm restores the
 * previous one. */
fg_status fg_requeue_arm(fg_requeue *q, const fg_requeue_fit *f, fg_error *err);
void fg_requeue_disarm(fg_requeue *q);
/* At each optimizer-step boundary: when the signal arrived (on any rank), the fit stops
 * (fg_requeue_stops).
 * Under a comm the same all-reduce agrees on [trainer] max_time (time_up): a rank's own
 * clock never ends its loop alone, or it would post the end-of-fit collectives while
 * another is inside a gradient all-reduce. */
fg_status fg_requeue_poll(fg_requeue *q, const fg_requeue_fit *f, fg_error *err);
/* An agreed interrupt or requeue stops the fit. */
int fg_requeue_stops(const fg_requeue *q);
/* The same agreement at once, whatever the step: every rank calls it at the same point
 * (after the fit's last validation, before and after the test), so that an interrupt that
 * came during an evaluation stops the run (exit 130 / 143) instead of being ignored. */
fg_status fg_requeue_poll_now(fg_requeue *q, const fg_requeue_fit *f, fg_error *err);
/* A SIGINT or SIGTERM reached this process and is not agreed yet: a single-process
 * evaluation pass stops at the next batch (under a comm every rank ends the pass: its
 * batches may hold collectives). */
int fg_requeue_interrupt_pending(const fg_requeue *q);
/* [trainer] max_time is reached: by this process's clock alone, or under a comm with an
 * agreement (fg_requeue_poll), once every rank agreed. */
int fg_requeue_time_is_up(const fg_requeue *q, const fg_requeue_fit *f);
/* The test hook of an evaluation pass (FULGUR_TEST_INTERRUPT_AT=val:SIGTERM or
 * test:SIGTERM): raises the signal at the first batch of the first such pass after step 0,
 * once. */
void fg_requeue_test_eval(fg_requeue *q, const fg_requeue_fit *f, const char *prefix);
/* A requeue signal agreed only once the fit had run its last step (during its last
 * validation): nothing is left to resume, so the fit finishes instead (every rank calls). */
void fg_requeue_after_fit(fg_requeue *q, const fg_requeue_fit *f);
/* After the epochs: the checkpoint a stop for a requeue or an interrupt writes (every rank
 * calls; the trainer saves it), or NULL when none is due. */
const char *fg_requeue_checkpoint(fg_requeue *q, const fg_requeue_fit *f);
/* Instead of the end of a fit: rank 0 runs `scontrol requeue JOB` and says what happened. */
fg_status fg_requeue_submit(const fg_requeue *q, const fg_requeue_fit *f, fg_error *err);
/* After a fit an interrupt stopped: says where it stopped and how to resume; returns
 * FG_STATUS_SIGINT or FG_STATUS_SIGTERM (io_status.h) with that message. */
fg_status fg_requeue_interrupted(const fg_requeue *q, const fg_requeue_fit *f, fg_error *err);

#endif
