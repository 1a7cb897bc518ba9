/* SLURM auto-requeue (requeue.h).
 *
 * The handler only sets a flag (async-signal-safe) and writes a fixed line. The flag is
 * read at optimizer-step boundaries. Alone, a process reads it every step (a load). Under
 * a comm, SLURM may signal some ranks and not others (or at different steps), so the ranks
 * agree: a max all-reduce of [flag, interval] at agreed steps. Rank 0 puts the number of
 * steps until the next agreement, sized from its step rate so that agreements come about
 * once a second: one tiny collective a second (tens of microseconds), a stop within about a
 * second and a step of the signal, and every rank knows the next agreement step. */
#include "requeue.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core_util.h"
#include "fulgur/comm.h"
#include "io_status.h"
#include "run_status_signal.h"
#include "runtime.h"

#define AGREE_PERIOD_S 1.0
#define AGREE_MAX_INTERVAL 100000

extern char **environ;

/* Process-wide by nature: one handler per signal. */
static volatile sig_atomic_t signalled;
static volatile sig_atomic_t interrupted; /* SIGINT or SIGTERM received; 0 */
static struct sigaction previous, previous_int, previous_term;

static void on_interrupt(int signo)
{
    static const char first[] = "fulgur: interrupted: stopping at the next step boundary "
                                "(Ctrl-C again exits at once)\n";
    static const char again[] = "fulgur: interrupted again: exiting now\n";
    if (interrupted && signo == SIGINT) {
        ssize_t w = write(STDERR_FILENO, again, sizeof again - 1);
        (void)w;
        fg_run_status_signal_record(signo, 130);
        _exit(130);
    }
    /* status.json "failed" now, in case a SIGKILL follows before the step boundary (mpirun
     * ends a rank's peers so); the stop at the boundary overwrites it */
    fg_run_status_signal_record(signo, 128 + SIGKILL);
    interrupted = signo;
    ssize_t w = write(STDERR_FILENO, first, sizeof first - 1);
    (void)w;
}

/* SIGINT and SIGTERM stop a fit at a step boundary (requeue.h). */
static void read_test_hooks(fg_requeue *q);

static fg_status arm_interrupts(fg_requeue *q, fg_error *err)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    read_test_hooks(q);
    if (sigaction(SIGINT, &sa, &previous_int) != 0 ||
        sigaction(SIGTERM, &sa, &previous_term) != 0)
        return fg_error_set(err, FG_INTERNAL, "interrupts: sigaction: %s", strerror(errno));
    q->interrupts_armed = 1;
    return FG_OK;
}

/* A test hook: FULGUR_TEST_INTERRUPT_AT=STEP[:SIGNAL] raises the signal (SIGINT, SIGTERM,
 * SIGUSR1 or SIGINT2: two SIGINTs) when the fit reaches that optimizer step, on every rank or only on
 * rank FULGUR_TEST_INTERRUPT_RANK, so the interrupt path is tested at a known step without
 * timing. */
static void read_test_hooks(fg_requeue *q)
{
    const char *spec = secure_getenv("FULGUR_TEST_INTERRUPT_AT");
    const char *rank = secure_getenv("FULGUR_TEST_INTERRUPT_RANK");
    const char *every = secure_getenv("FULGUR_TEST_AGREE_EVERY");
    const char *sig = spec ? strchr(spec, ':') : NULL;
    q->test_step = spec ? strtoll(spec, NULL, 10) : -1;
    q->test_pass = !spec ? 0 : strncmp(spec, "val:", 4) == 0 ? 'v' : strncmp(spec, "test:", 5) == 0 ? 't' : 0;
    if (q->test_pass) q->test_step = -1;
    q->test_rank = rank ? (int)strtol(rank, NULL, 10) : -1;
    q->test_signo = sig && strcmp(sig + 1, "SIGTERM") == 0   ? SIGTERM
                    : sig && strcmp(sig + 1, "SIGUSR1") == 0 ? SIGUSR1
                                                             : SIGINT;
    q->test_twice = sig && strcmp(sig + 1, "SIGINT2") == 0;
    q->test_agree_every = every && strtoll(every, NULL, 10) > 0 ? strtoll(every, NULL, 10) : 0;
    const char *skew = secure_getenv("FULGUR_TEST_CLOCK_SKEW");
    const char *colon = skew ? strchr(skew, ':') : NULL;
    q->test_skew_rank = colon ? (int)strtol(skew, NULL, 10) : -1;
    q->test_skew_s = colon ? strtod(colon + 1, NULL) : 0;
}

static void test_interrupt(const fg_requeue *q, const fg_requeue_fit *f)
{
    if (q->test_step != f->progress->global_step ||
        (q->test_rank >= 0 && q->test_rank != f->ranks.rank))
        return;
    raise(q->test_signo);
    if (q->test_twice) raise(SIGINT);
}

void fg_requeue_test_eval(fg_requeue *q, const fg_requeue_fit *f, const char *prefix)
{
    int pass = strcmp(prefix, "val") == 0 ? 'v' : strcmp(prefix, "test") == 0 ? 't' : 0;
    if (!q->test_pass || q->test_pass != pass || f->progress->global_step == 0 ||
        (q->test_rank >= 0 && q->test_rank != f->ranks.rank))
        return;
    q->test_pass = 0; /* once */
    raise(q->test_signo);
}

/* max_time by this process's clock (FULGUR_TEST_CLOCK_SKEW moves one rank's clock ahead,
 * so that a test sees ranks that disagree). */
static int local_time_is_up(const fg_requeue *q, const fg_requeue_fit *f)
{
    double elapsed = fg_now_seconds() - f->progress->fit_start_time;
    if (q->test_skew_rank == f->ranks.rank) elapsed += q->test_skew_s;
    return f->max_time_s > 0 && elapsed >= f->max_time_s;
}

int fg_requeue_time_is_up(const fg_requeue *q, const fg_requeue_fit *f)
{
    if (f->ranks.world_size > 1 && q->interrupts_armed) return q->time_up;
    return local_time_is_up(q, f);
}

int fg_requeue_interrupt_pending(const fg_requeue *q)
{
    return q->interrupts_armed && interrupted != 0;
}

static void on_signal(int signo)
{
    static const char line[] = "fulgur: requeue signal received: checkpoint at the next step "
                               "boundary, then requeue\n";
    (void)signo;
    signalled = 1;
    ssize_t w = write(STDERR_FILENO, line, sizeof line - 1);
    (void)w;
}

static const char *signal_name(int signo)
{
    return signo == SIGUSR1 ? "SIGUSR1" : signo == SIGUSR2 ? "SIGUSR2" : "none";
}

fg_status fg_requeue_configure(fg_requeue *q, const char *value, const char *origin,
                               fg_error *err)
{
    memset(q, 0, sizeof *q);
    q->test_step = -1;
    if (strcmp(value, "auto") == 0)
        q->signo = getenv("SLURM_JOB_ID") ? SIGUSR1 : 0;
    else if (strcmp(value, "SIGUSR1") == 0)
        q->signo = SIGUSR1;
    else if (strcmp(value, "SIGUSR2") == 0)
        q->signo = SIGUSR2;
    else if (strcmp(value, "none") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] requeue_signal = '%s': "
                            "use auto, SIGUSR1, SIGUSR2 or none", origin, value);
    return FG_OK;
}

fg_status fg_requeue_arm(fg_requeue *q, const fg_requeue_fit *f, fg_error *err)
{
    const fg_comm_vtable *cv = f->ranks.comm;
    int agree = f->ranks.world_size == 1 || (cv && cv->all_reduce);
    fg_run_status_signal_watch_step(&f->progress->global_step);
    if (!q->interrupts_armed && agree) {
        fg_status st = arm_interrupts(q, err);
        if (st != FG_OK) return st;
        q->next_check = f->progress->global_step + 1;
        q->last_check_step = f->progress->global_step;
        q->last_check_time = fg_now_seconds();
    }
    if (!q->signo || q->armed) return FG_OK;
    if (!agree)
        return fg_error_set(err, FG_INCOMPATIBLE, "[trainer] requeue_signal = %s needs a [comm] "
                            "with all_reduce for %d processes to agree on the stop (or set "
                            "requeue_signal = none)", signal_name(q->signo), f->ranks.world_size);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* reads and waits of other threads go on */
    sigemptyset(&sa.sa_mask);
    signalled = 0;
    if (sigaction(q->signo, &sa, &previous) != 0)
        return fg_error_set(err, FG_INTERNAL, "requeue: sigaction(%s): %s", signal_name(q->signo),
                            strerror(errno));
    q->armed = 1;
    q->next_check = f->progress->global_step + 1;
    q->last_check_step = f->progress->global_step;
    q->last_check_time = fg_now_seconds();
    const char *job = getenv("SLURM_JOB_ID");
    if (f->verbosity >= FG_LOG_INFO)
        fprintf(f->out, "requeue: on %s, checkpoint and %s%s\n", signal_name(q->signo),
                job ? "requeue SLURM job " : "stop (not a SLURM job)", job ? job : "");
    return FG_OK;
}

void fg_requeue_disarm(fg_requeue *q)
{
    if (q->interrupts_armed) {
        sigaction(SIGINT, &previous_int, NULL);
        sigaction(SIGTERM, &previous_term, NULL);
        q->interrupts_armed = 0;
    }
    if (!q->armed) return;
    sigaction(q->signo, &previous, NULL);
    q->armed = 0;
}

/* Rank 0's choice of steps until the next agreement: about AGREE_PERIOD_S of its steps
 * (FULGUR_TEST_AGREE_EVERY=N: every N steps, for tests that stop at a known step). */
static double next_interval(fg_requeue *q, int64_t step, double now)
{
    if (q->test_agree_every > 0)
        return (double)q->test_agree_every;
    double steps = (double)(step - q->last_check_step), dt = now - q->last_check_time;
    double n = dt > 0 ? AGREE_PERIOD_S * steps / dt : 1;
    return n < 1 ? 1 : n > AGREE_MAX_INTERVAL ? AGREE_MAX_INTERVAL : (double)(int64_t)n;
}

int fg_requeue_stops(const fg_requeue *q)
{
    return q->stopped || q->interrupt_signo;
}

fg_status fg_requeue_poll(fg_requeue *q, const fg_requeue_fit *f, fg_error *err)
{
    if ((!q->armed && !q->interrupts_armed) || q->stopped || q->interrupt_signo) return FG_OK;
    test_interrupt(q, f);
    int stop = signalled != 0, signo = interrupted;
    if (f->ranks.world_size > 1) {
        if (f->progress->global_step < q->next_check) return FG_OK;
        void *cs = f->ranks.comm_state;
        const fg_comm_vtable *vt = f->ranks.comm;
        double now = fg_now_seconds();
        int64_t step = f->progress->global_step;
        double agree[4] = {stop, f->ranks.rank == 0 ? next_interval(q, step, now) : 0, signo,
                           local_time_is_up(q, f)};
        fg_error e = {0};
        fg_status st = vt->all_reduce(cs, NULL, agree, 4, FG_F64, FG_REDUCE_MAX, &e);
        if (st != FG_OK)
            return fg_error_set(err, st, "requeue: agreeing on the stop flag at step %lld: %s",
                                (long long)step, e.message);
        stop = agree[0] > 0;
        signo = (int)agree[2];
        q->time_up = agree[3] > 0;
        q->next_check = step + (int64_t)agree[1];
        q->last_check_step = step;
        q->last_check_time = now;
    }
    if (signo) { /* an interrupt wins over a requeue: the user asked to stop */
        q->interrupt_signo = signo;
        fprintf(f->out, "interrupted by %s: stopping after step %lld\n",
                signo == SIGTERM ? "SIGTERM" : "SIGINT", (long long)f->progress->global_step);
    } else if (stop) {
        q->stopped = 1;
        fprintf(f->out, "requeue: %s received, stopping after step %lld\n", signal_name(q->signo),
                (long long)f->progress->global_step);
    }
    return FG_OK;
}

fg_status fg_requeue_poll_now(fg_requeue *q, const fg_requeue_fit *f, fg_error *err)
{
    q->next_check = 0; /* every rank calls this at the same point: agree now */
    return fg_requeue_poll(q, f, err);
}

static int training_finished(const fg_requeue_fit *f)
{
    return (f->max_steps >= 0 && f->progress->global_step >= f->max_steps) ||
           f->progress->epoch >= f->max_epochs;
}

/* Where ckpt_path = last looks (the checkpoint callback's dirpath, or checkpoints/). */
static void stop_checkpoint_path(const fg_requeue_fit *f, const char *name, char *out,
                                 size_t size)
{
    const char *dir = fg_config_get(f->cfg, "callback.checkpoint", "dirpath");
    if (!dir || !*dir) dir = "checkpoints";
    if (dir[0] == '/')
        snprintf(out, size, "%s/%s", dir, name);
    else
        snprintf(out, size, "%s/%s/%s", f->run_dir, dir, name);
}

void fg_requeue_after_fit(fg_requeue *q, const fg_requeue_fit *f)
{
    q->stopped = 0;
    fprintf(f->out, "requeue: %s agreed after the fit's last step: training is complete, not "
            "requeued\n", signal_name(q->signo));
}

const char *fg_requeue_checkpoint(fg_requeue *q, const fg_requeue_fit *f)
{
    if (q->interrupt_signo && q->checkpoint_on_interrupt && !training_finished(f)) {
        stop_checkpoint_path(f, "interrupted.safetensors", q->checkpoint, sizeof q->checkpoint);
        return q->checkpoint;
    }
    if (!q->stopped) return NULL;
    if (training_finished(f)) {
        q->stopped = 0; /* the last step was the signal's: nothing to resume */
        fprintf(f->out, "requeue: the signal came with the last step: training is complete, "
                "not requeued\n");
        return NULL;
    }
    stop_checkpoint_path(f, "requeue.safetensors", q->checkpoint, sizeof q->checkpoint);
    return q->checkpoint;
}

fg_status fg_requeue_interrupted(const fg_requeue *q, const fg_requeue_fit *f, fg_error *err)
{
    const char *name = q->interrupt_signo == SIGTERM ? "SIGTERM" : "SIGINT";
    fg_status st = q->interrupt_signo == SIGTERM ? FG_STATUS_SIGTERM : FG_STATUS_SIGINT;
    const char *config = fg_config_path(f->cfg) ? fg_config_path(f->cfg) : "CONFIG";
    /* printed here, before the comm finalises: under mpirun a rank's exit code 130 may end
     * the others as soon as they return */
    if (f->ranks.rank == 0 && training_finished(f) && !q->checkpoint[0])
        fprintf(f->out, "interrupted by %s after the last step (%lld), before the end of the "
                "fit's validation, final checkpoint or test\n", name,
                (long long)f->progress->global_step);
    else if (f->ranks.rank == 0 && q->checkpoint[0] && !training_finished(f))
        fprintf(f->out, "interrupted by %s after step %lld; resume with: fulgur fit %s "
                "--ckpt-path %s\n", name, (long long)f->progress->global_step, config,
                q->checkpoint);
    else if (f->ranks.rank == 0)
        fprintf(f->out, "interrupted by %s after step %lld; no checkpoint written (set [trainer] "
                "checkpoint_on_interrupt = true to resume from here)\n", name,
                (long long)f->progress->global_step);
    fflush(f->out);
    return fg_error_set(err, st, "interrupted by %s after step %lld", name,
                        (long long)f->progress->global_step);
}

/* SLURM_JOB_ID, or ARRAY_TASK of an array job (what scontrol requeue takes). */
static const char *job_id(char *buf, size_t size)
{
    const char *array = getenv("SLURM_ARRAY_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID");
    if (array && *array && task && *task) {
        snprintf(buf, size, "%s_%s", array, task);
        return buf;
    }
    const char *job = getenv("SLURM_JOB_ID");
    return job && *job ? job : NULL;
}

/* scontrol with SIGTERM blocked: the requeue it asks for has Slurm send SIGTERM to every
 * process of the job, scontrol included, and that signal could otherwise kill it before it
 * reports the requeue done (the pending signal goes away with it when it exits). */
static int spawn_scontrol(pid_t *pid, char **argv)
{
    posix_spawnattr_t attr;
    sigset_t term;
    int rc = posix_spawnattr_init(&attr);
    if (rc != 0)
        return rc;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    rc = posix_spawnattr_setsigmask(&attr, &term);
    if (rc == 0)
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    if (rc == 0)
        rc = posix_spawnp(pid, "scontrol", NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    return rc;
}

fg_status fg_requeue_submit(const fg_requeue *q, const fg_requeue_fit *f, fg_error *err)
{
    if (f->ranks.rank != 0) return FG_OK;
    char buf[256];
    const char *job = job_id(buf, sizeof buf);
    if (!job) {
        fprintf(f->out, "requeue: stopped at step %lld, not a SLURM job (no SLURM_JOB_ID): "
                "resume with --ckpt-path last (%s)\n", (long long)f->progress->global_step,
                q->checkpoint);
        return FG_OK;
    }
    char *argv[] = {"scontrol", "requeue", (char *)job, NULL};
    pid_t pid;
    int rc = spawn_scontrol(&pid, argv);
    if (rc != 0) {
        fprintf(f->out, "requeue: cannot run scontrol (%s): SLURM job %s is not requeued; "
                "resume with --ckpt-path last (%s)\n", strerror(rc), job, q->checkpoint);
        return FG_OK;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fg_error_set(err, FG_FATAL, "requeue: `scontrol requeue %s` %s %d: the job is not "
                            "requeued; %s resumes it (--ckpt-path last)", job,
                            WIFEXITED(status) ? "exited" : "died of signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                            q->checkpoint);
    fprintf(f->out, "requeue: SLURM job %s requeued (scontrol requeue %s) after step %lld; it "
            "resumes from %s with --ckpt-path last\n", job, job,
            (long long)f->progress->global_step,
            q->checkpoint);
    return FG_OK;
}
