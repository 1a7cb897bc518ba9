/* JSON text for the page's data block, written straight to a file. Strings are escaped
 * so that the block can sit inside a <script> element: '<' is written as \u003c (JSON has
 * '<' only inside strings), so neither "</script" nor "<!--" can appear in it. */
#ifndef REPORT_JSON_H
#define REPORT_JSON_H

#include <stddef.h>
#include <stdio.h>

/* "text" with JSON escapes; NULL writes null. */
void report_json_string(FILE *out, const char *text);
/* The shortest of %.15g / %.17g that reads back as the same double (metrics.csv's
 * spelling); NaN and infinities as the strings "nan", "inf", "-inf". The text form
 * writes it to buf (at least REPORT_NUMBER_CHARS) and returns its length. */
#define REPORT_NUMBER_CHARS 40
size_t report_json_number_text(char *buf, double v);
void report_json_number(FILE *out, double v);
/* Copies JSON text, writing every '<' as \u003c. */
void report_json_raw(FILE *out, const char *json);

#endif
