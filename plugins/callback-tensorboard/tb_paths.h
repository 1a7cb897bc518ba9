/* Where the event file goes: run_dir/<subdir>/events.out.tfevents.<unix_time>.<hostname>,
 * the name TensorBoard's directory watcher looks for. */
#ifndef TB_PATHS_H
#define TB_PATHS_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

/* mkdir -p: creates dir and its missing parents (mode 0777 less the umask).
 * Returns 0, or an errno value with the prefix that failed left in `failed` (cap bytes). */
int tb_make_dirs(const char *dir, char *failed, size_t cap);

/* Creates a new event file in dir, never truncating one another writer made: when the name
 * is taken (two runs in one second), ".2", ".3" ... are appended. The chosen path is left in
 * path (cap bytes). Returns the stream, or NULL with errno set. */
FILE *tb_create_event_file(const char *dir, time_t unix_time, char *path, size_t cap);

#endif
