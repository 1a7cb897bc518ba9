/* The resolved configuration as YAML (see hparams_yaml.h). */
#define _POSIX_C_SOURCE 200809L
#include "hparams_yaml.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output_file.h"

static int is_number(const char *v)
{
    char *end = NULL;
    if (v[0] == '\0' || v[0] == ' ' || v[0] == '\t') return 0;
    double d = strtod(v, &end);
    return end != NULL && *end == '\0' && isfinite(d);
}

static int is_plain_key(const char *k)
{
    if (k[0] == '\0' || k[0] == '-') return 0;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-' || *p == '/'))
            return 0;
    return 1;
}

/* A double-quoted YAML scalar: backslash, quote and control characters escaped. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void put_key(FILE *f, const char *k)
{
    if (is_plain_key(k)) fputs(k, f);
    else put_quoted(f, k);
}

static void put_value(FILE *f, const char *v)
{
    if (is_number(v) || strcmp(v, "true") == 0 || strcmp(v, "false") == 0) fputs(v, f);
    else put_quoted(f, v);
}

static int write_yaml(FILE *f, void *user)
{
    const fg_host *host = user;
    fputs("# the run's resolved configuration (its config.ini), one mapping per section\n", f);
    const char *prev = NULL, *section, *key, *value;
    for (size_t i = 0; host->config_entry(host, i, &section, &key, &value) == FG_OK; i++) {
        if (prev == NULL || strcmp(prev, section) != 0) {
            put_key(f, section);
            fputs(":\n", f);
            prev = section;
        }
        fputs("  ", f);
        put_key(f, key);
        fputs(": ", f);
        put_value(f, value ? value : "");
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

fg_status hparams_yaml_write(const fg_host *host, const char *path, fg_error *err)
{
    return fg_output_write_atomic(path, write_yaml, (void *)host, err);
}
