/* What every core folder shares: the element count of an array, the end of a create
 * function, a growing array, what a path names, a monotonic clock. */
#ifndef FG_CORE_UTIL_H
#define FG_CORE_UTIL_H

#include <stddef.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The end of a create function: on FG_OK the new object goes to *out, otherwise it is
 * destroyed (destroy accepts a half-built one) and st returned. */
#define FG_CREATED(st, obj, out, destroy)                                                  \
    ((st) == FG_OK ? (*(out) = (obj), FG_OK) : ((destroy)(obj), (st)))

/* fg_plugin_grow_array (plugins/common/grow_array.h, built into libfulgur) of bytes. */
int fg_grow_bytes(void *bufp, size_t *cap, size_t need, size_t first);

/* Appends n bytes of src to a growing byte buffer of *len bytes used (fg_grow_bytes). */
int fg_append_bytes(void *bufp, size_t *len, size_t *cap, const void *src, size_t n,
                    size_t first);

/* 1 when path names a regular file (a directory), following links; 0 otherwise. */
int fg_is_regular_file(const char *path);
int fg_is_directory(const char *path);

/* Monotonic seconds, for durations: never the wall clock. */
double fg_now_seconds(void);

#endif
