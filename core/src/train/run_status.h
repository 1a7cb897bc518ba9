/* status.json in a run folder: whether the run is running, finished, failed or was
 * interrupted, which process runs it, and which plugins it used. Written by rank 0,
 * atomically (a temporary file renamed over the old one), when the run folder is made
 * ("running", with the pid) and when the verb ends:
 *
 *   {"format": "fulgur-run-status", "version": 1, "status": "finished",
 *    "verb": "fit", "config": "examples/x.ini", "fulgur_version": "0.1.0",
 *    "host": "node-a", "pid": 4242, "pid_start_ticks": 123456, "boot_id": "...",
 *    "started": "2025-01-02T03:04:05Z", "start_unix": 1735787045.1,
 *    "ended": "...", "end_unix": ..., "wall_s": 41.2, "exit_code": 0,
 *    "message": "why it failed or stopped", "global_step": 2814, "epoch": 3,
 *    "plugins": [{"section": "backend", "kind": "backend", "name": "cpu",
 *                 "version": "1.0.0", "path": "/.../fulgur-backend-cpu.so"}, ...]}
 *
 * status: "running", "finished", "failed" or "interrupted" (a requeue stop). A run whose
 * process died without ending (killed, or a crash) stays "running": a reader tells it
 * from a live one with fg_run_status_process_alive. */
#ifndef FG_RUN_STATUS_H
#define FG_RUN_STATUS_H

#include <stdint.h>

#include "fulgur/fulgur.h"

struct fg_runtime;

typedef struct fg_run_outcome {
    const char *status;  /* "finished", "failed", "interrupted" */
    const char *message; /* why it failed or stopped; NULL: none */
    int exit_code;       /* what the command exits with (fg_status_exit_code) */
    int64_t global_step; /* optimizer steps taken */
    int64_t epoch;       /* epochs completed */
} fg_run_outcome;

/* "running", this process and the configured plugins, to run_dir/status.json. */
fg_status fg_run_status_begin(const char *run_dir, struct fg_runtime *rt, fg_verb verb,
                              fg_error *err);
/* The outcome, over the fields begin wrote (kept when the file can still be read). */
fg_status fg_run_status_end(const char *run_dir, const fg_run_outcome *o, fg_error *err);

/* Whether process pid of host runs still, as the same process: its start time (in clock
 * ticks since boot, /proc/PID/stat) must match start_ticks when that is > 0, on the same
 * boot (boot_id when not NULL). 1 alive, 0 gone, -1 cannot tell (another host). */
int fg_run_status_process_alive(const char *host, int64_t pid, int64_t start_ticks,
                                const char *boot_id);

#endif
