/* JSON writing for the report's data block. */
#include "report_json.h"

#include <math.h>
#include <stdlib.h>

void report_json_string(FILE *out, const char *text)
{
    if (text == NULL) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '<': fputs("\\u003c", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

void report_json_number(FILE *out, double v)
{
    if (isnan(v)) {
        fputs("\"nan\"", out);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", out);
        return;
    }
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, out);
}

void report_json_raw(FILE *out, const char *json)
{
    for (const char *p = json; *p != '\0'; p++) {
        if (*p == '<')
            fputs("\\u003c", out);
        else
            fputc(*p, out);
    }
}
