/* A growing array: the doubling reallocation the plugins' tables and buffers share, and
 * the loggers' array of column names on it. */
#ifndef FULGUR_PLUGIN_COMMON_GROW_ARRAY_H
#define FULGUR_PLUGIN_COMMON_GROW_ARRAY_H

#include <stddef.h>

/* Makes room for `need` items of `item_size` bytes: `items` points at the array's pointer
 * (NULL when empty; on POSIX every object pointer has a void *'s representation), `*cap`
 * is its capacity in items. Below `need`, the capacity goes to `first` (from 0) or doubles
 * until it holds `need`, and the array is reallocated. 0 on success; -1 when out of
 * memory, the array and *cap unchanged. */
int fg_plugin_grow_array(void *items, size_t *cap, size_t need, size_t first, size_t item_size);

/* The index of `name` in a growing array of owned names (a logger's metric columns),
 * added at the end as a copy when new (fg_plugin_grow_array from `first`); -1 when out of
 * memory. A linear scan: a run logs tens of distinct names, not thousands. */
long fg_plugin_name_index(char ***names, size_t *count, size_t *cap, size_t first,
                          const char *name);

#endif
