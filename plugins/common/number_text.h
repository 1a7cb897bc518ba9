/* Numbers as text in the files the plugins write (CSV, logs). */
#ifndef FULGUR_PLUGIN_COMMON_NUMBER_TEXT_H
#define FULGUR_PLUGIN_COMMON_NUMBER_TEXT_H

#include <stddef.h>

/* The shorter of %.15g and %.17g that reads back as the same double: 0.1 stays "0.1".
 * cap of 32 holds any double. */
void fg_plugin_format_double(char *buf, size_t cap, double v);

#endif
