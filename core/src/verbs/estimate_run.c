/* What fulgur estimate measures through child `fulgur` processes: `check`'s memory lines
 * for each strategy (under mpirun for several ranks) and the step time of short fits. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "estimate.h"

#define MAX_ARGV 320

/* single and model-parallel run in one process, without a [comm] */
static int one_process(const char *strategy)
{
    return strcmp(strategy, "name = single") == 0 || strncmp(strategy, "name = model-parallel", 21) == 0;
}

/* The config with its [strategy] section replaced by `strategy`, written beside it so that
 * its relative paths still hold. A single process has no [comm]; the others get [comm]
 * name = mpi when the config has none. */
static fg_status strategy_config(const fg_est_runner *r, const char *strategy, char *out,
                                 size_t cap, fg_error *err)
{
    char *dup = strdup(r->config);
    if (!dup) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    snprintf(out, cap, "%s/.fulgur-estimate-%ld.ini", dirname(dup), (long)getpid());
    free(dup);
    FILE *in = fopen(r->config, "r"), *o = in ? fopen(out, "w") : NULL;
    if (!o) {
        if (in) fclose(in);
        return fg_error_set(err, FG_IO_ERROR, "fulgur estimate: cannot write %s beside %s: %s",
                            out, r->config, strerror(errno));
    }
    char line[4096];
    int skipping = 0, has_comm = 0, single = one_process(strategy);
    while (fgets(line, sizeof line, in)) {
        const char *s = line + strspn(line, " \t");
        int comm = strncmp(s, "[comm]", 6) == 0;
        if (*s == '[') skipping = strncmp(s, "[strategy]", 10) == 0 || (single && comm);
        has_comm |= comm;
        if (!skipping) fputs(line, o);
    }
    fprintf(o, "\n[strategy]\n%s\n%s", strategy, has_comm || single ? "" : "[comm]\nname = mpi\n");
    fclose(in);
    return fclose(o) == 0 ? FG_OK : fg_error_set(err, FG_IO_ERROR, "cannot write %s", out);
}

/* Runs argv with stdout and stderr to log; *rc its exit status, *secs its wall time or,
 * when shorter, its CPU time (user + system): on a machine whose other processes take the
 * cores, the CPU time is what the run itself needed. */
static fg_status run_child(char *const *argv, const char *log, int *rc, double *secs,
                           fg_error *err)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) return fg_error_set(err, FG_INTERNAL, "fulgur estimate: fork: %s", strerror(errno));
    if (pid == 0) {
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {}
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    if (cpu > 0 && cpu < *secs) *secs = cpu;
    *rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return FG_OK;
}

/* [mpirun -n ranks ...] fulgur --plugin-path ... VERB CONFIG overrides... extra...; single:
 * the config is strategy single's */
static int child_argv(const fg_est_runner *r, int ranks, int single, const char *verb, const char *config,
                      const char *const *extra, int extra_count, char **argv, char *nbuf)
{
    int n = 0;
    if (ranks > 1) {
        snprintf(nbuf, 16, "%d", ranks);
        argv[n++] = "mpirun";
        argv[n++] = "-n";
        argv[n++] = nbuf;
        argv[n++] = "--oversubscribe";
        if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
    }
    argv[n++] = (char *)r->fulgur;
    for (int i = 0; i < r->path_count && n < MAX_ARGV - 80; i++) {
        argv[n++] = "--plugin-path";
        argv[n++] = (char *)r->paths[i];
    }
    argv[n++] = (char *)verb;
    argv[n++] = (char *)config;
    /* [strategy] is the one the child's config was written with; a single process has no
     * [comm] */
    for (int i = 0; i < r->override_count && n < MAX_ARGV - 20; i++) {
        const char *o = r->overrides[i];
        if (strncmp(o, "strategy.", 9) != 0 && !(single && strncmp(o, "comm.", 5) == 0))
            argv[n++] = (char *)o;
    }
    for (int i = 0; i < extra_count; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return n;
}

static void last_lines(const char *log, char *out, size_t cap)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    out[0] = '\0';
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "fulgur:", 7) == 0 || strstr(line, "rror")) {
            size_t n = strcspn(line, "\n");
            if (n >= cap) n = cap - 1;
            memcpy(out, line, n);
            out[n] = '\0';
        }
    if (f) fclose(f);
}

/* Device 0's memory line, or with `largest` the line of the device of the largest total
 * (a pipeline's stages differ); *device its device. */
static int parse_memory(const char *log, int largest, fg_est_memory *m, int *device)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    int found = 0;
    while (f && (largest || !found) && fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "memory (device ");
        double v[7];
        int dev = -1;
        if (!s || sscanf(s, "memory (device %d): params %lf MiB, master %lf MiB, grads %lf MiB, "
                         "optimizer %lf MiB, activations %lf MiB, other %lf MiB, total %lf MiB", &dev,
                         &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 8)
            continue;
        if ((largest || dev == 0) && (!found || v[6] > m->mib[6])) {
            memcpy(m->mib, v, sizeof v);
            *device = dev;
            found = 1;
        }
    }
    if (f) fclose(f);
    return found;
}

fg_status fg_est_check_memory(const fg_est_runner *r, const char *strategy, int ranks,
                              const char *devices, fg_est_memory *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    char cfg[4200], log[320], nbuf[16];
    fg_status st = strategy_config(r, strategy, cfg, sizeof cfg, err);
    if (st != FG_OK) return st;
    char *argv[MAX_ARGV];
    const char *extra[1] = {devices};
    child_argv(r, ranks, one_process(strategy), "check", cfg, extra, devices ? 1 : 0, argv, nbuf);
    snprintf(log, sizeof log, "%s/check.log", r->work);
    int rc = 0;
    double secs;
    st = run_child(argv, log, &rc, &secs, err);
    unlink(cfg);
    if (st != FG_OK) return st;
    int device = 0;
    out->known = rc == 0 && parse_memory(log, devices != NULL, out, &device);
    out->device = device;
    if (!out->known) {
        char why[200];
        last_lines(log, why, sizeof why);
        char label[96];
        snprintf(label, sizeof label, "%s", strategy);
        for (char *c = label; *c; c++) *c = *c == '\n' ? ',' : *c;
        snprintf(out->note, sizeof out->note, "check [strategy] %s on %d rank(s) failed (exit %d): "
                 "%s", label, ranks, rc, why[0] ? why : "no memory line");
    }
    return FG_OK;
}

static fg_status timed_fit(const fg_est_runner *r, const char *cfg, int steps, double *secs,
                           fg_error *err)
{
    char ms[64], root[320], log[320], nbuf[16], why[200];
    snprintf(ms, sizeof ms, "trainer.max_steps=%d", steps);
    snprintf(root, sizeof root, "trainer.default_root_dir=%s", r->work);
    const char *extra[] = {ms, root, "trainer.max_epochs=1000000", "trainer.limit_val_batches=0",
                           "trainer.num_sanity_val_steps=0", "trainer.test_after_fit=false",
                           "trainer.final_checkpoint=", "trainer.enable_progress_bar=false",
                           "trainer.max_time=", "trainer.ckpt_path="};
    char *argv[MAX_ARGV];
    child_argv(r, 1, 1, "fit", cfg, extra, (int)(sizeof extra / sizeof extra[0]), argv, nbuf);
    snprintf(log, sizeof log, "%s/fit.log", r->work);
    int rc = 0;
    fg_status st = run_child(argv, log, &rc, secs, err);
    if (st == FG_OK && rc != 0) {
        last_lines(log, why, sizeof why);
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: the timed fit of %d steps "
                          "failed (exit %d): %s", steps, rc, why);
    }
    return st;
}

fg_status fg_est_measure_step(const fg_est_runner *r, int steps_a, int steps_b, double *step_s,
                              fg_error *err)
{
    char cfg[4200];
    fg_status st = strategy_config(r, "name = single", cfg, sizeof cfg, err);
    /* each twice, the faster kept: the first fit also pays for cold caches */
    double a = 1e30, b = 1e30, t = 0;
    for (int rep = 0; st == FG_OK && rep < 4; rep++) {
        st = timed_fit(r, cfg, rep % 2 ? steps_b : steps_a, &t, err);
        double *keep = rep % 2 ? &b : &a;
        if (t < *keep) *keep = t;
    }
    unlink(cfg);
    if (st == FG_OK && !(b > a))
        st = fg_error_set(err, FG_INTERNAL, "fulgur estimate: %d steps took no longer than %d "
                          "(%.3f s, %.3f s): the machine is too noisy to time", steps_b, steps_a, b, a);
    if (st == FG_OK) *step_s = (b - a) / (steps_b - steps_a);
    return st;
}
