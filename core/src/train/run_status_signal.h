/* status.json written from a signal handler: when SIGTERM or SIGINT reaches rank 0, the
 * record "failed ... SIGTERM at step N, killed before it stopped" is written at once, so that
 * a process killed before it reaches the next step boundary does not stay "running". Under
 * mpirun's defaults a rank that dies makes mpirun send its peers SIGTERM, then SIGKILL one
 * second later (odls_base_sigkill_timeout): a peer blocked in a collective never gets to the
 * boundary. A process that does stop overwrites the record with its real outcome
 * (fg_run_status_end disarms the handler's write first).
 *
 * The record is formatted when the run starts (run_status.c) with markers; the handler only
 * copies it, putting in the step, the signal, the exit code and the time with its own
 * digits, then open/write/rename: async-signal-safe, no allocation. */
#ifndef FG_RUN_STATUS_SIGNAL_H
#define FG_RUN_STATUS_SIGNAL_H

#include <stdint.h>

/* The template (a JSON document with the markers "@@STEP@@", "@@CODE@@", "@@END@@" as
 * quoted strings, @@SIG@@ and @@N@@ (the step) inside a string) and the file it goes to. 0 ok, -1 too long. */
int fg_run_status_signal_arm(const char *status_path, const char *json_template);
/* The step counter the record reports (the trainer's global step); NULL: 0. */
void fg_run_status_signal_watch_step(const volatile int64_t *step);
/* No more writes from the handler (the run records its own outcome now). */
void fg_run_status_signal_disarm(void);
/* From a signal handler: writes the record for signo with exit_code, when armed. */
void fg_run_status_signal_record(int signo, int exit_code);

#endif
