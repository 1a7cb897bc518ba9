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

size_t report_json_number_text(char *buf, double v)
{
    if (isnan(v))
        return (size_t)snprintf(buf, REPORT_NUMBER_CHARS, "\"nan\"");
    if (isinf(v))
        return (size_t)snprintf(buf, REPORT_NUMBER_CHARS, v > 0 ? "\"inf\"" : "\"-inf\"");
    int n = snprintf(buf, REPORT_NUMBER_CHARS, "%.15g", v);
    if (strtod(buf, NULL) != v)
        n = snprintf(buf, REPORT_NUMBER_CHARS, "%.17g", v);
    return (size_t)n;
}

void report_json_number(FILE *out, double v)
{
    char buf[REPORT_NUMBER_CHARS];
    fwrite(buf, 1, report_json_number_text(buf, v), out);
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
