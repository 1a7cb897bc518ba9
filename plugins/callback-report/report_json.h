/* JSON text for the page's data block, written straight to a file. Strings are escaped
 * so that the block can sit inside a <script> element: '<' is written as \u003c (JSON has
 * '<' only inside strings), so neither "</script" nor "<!--" can appear in it. */
#ifndef REPORT_JSON_H
#define REPORT_JSON_H

#include <stdio.h>

/* "text" with JSON escapes; NULL writes null. */
void report_json_string(FILE *out, const char *text);
/* The shortest of %.15g / %.17g that reads back as the same double (metrics.csv's
 * spelling); NaN and infinities as the strings "nan", "inf", "-inf". */
void report_json_number(FILE *out, double v);
/* Copies JSON text, writing every '<' as \u003c. */
void report_json_raw(FILE *out, const char *json);

#endif
