/* JSON Lines output: one JSON object per line, so a reader can follow the file while it
 * grows (`tail -f`) and a crash leaves every finished line intact. */
#ifndef METRICS_JSON_JSON_LINE_H
#define METRICS_JSON_JSON_LINE_H

#include <stdio.h>

/* Writes s as a JSON string literal, quotes included; control characters are escaped. */
void json_line_write_string(FILE *f, const char *s);

/* Writes v with enough digits to read back the same double. JSON has no NaN or infinity:
 * those are written as null, so the line stays parseable when a loss diverges. */
void json_line_write_number(FILE *f, double v);

#endif
