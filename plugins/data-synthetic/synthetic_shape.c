/* Parsing the shape list once at init: the hot path then trusts rank and elements. */
#include "synthetic_shape.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

fg_status synthetic_parse_shape(const char *text, int32_t *rank, int64_t shape[FG_MAX_DIMS],
                                int64_t *elements, fg_error *err)
{
    int32_t r = 0;
    int64_t total = 1;
    const char *p = skip_spaces(text);
    if (*p == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "synthetic: option shape = \"%s\" is empty; expected a list like "
                            "\"1,28,28\"",
                            text);
    for (;;) {
        if (r == FG_MAX_DIMS)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "synthetic: option shape = \"%s\" has more than %d dimensions",
                                text, FG_MAX_DIMS);
        char *end = NULL;
        errno = 0;
        long long v = isdigit((unsigned char)*p) ? strtoll(p, &end, 10) : 0;
        if (!end || end == p || errno != 0 || v <= 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "synthetic: option shape = \"%s\": dimension %d is not a positive "
                                "integer",
                                text, r);
        if (v > SYNTHETIC_MAX_ELEMENTS || total * v > SYNTHETIC_MAX_ELEMENTS)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "synthetic: option shape = \"%s\" holds more than %lld elements "
                                "per sample",
                                text, (long long)SYNTHETIC_MAX_ELEMENTS);
        total *= v;
        shape[r++] = v;
        p = skip_spaces(end);
        if (*p == '\0')
            break;
        if (*p != ',')
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "synthetic: option shape = \"%s\": unexpected '%c' after "
                                "dimension %d (dimensions are separated by commas)",
                                text, *p, r - 1);
        p = skip_spaces(p + 1);
    }
    for (int32_t d = r; d < FG_MAX_DIMS; d++)
        shape[d] = 0;
    *rank = r;
    *elements = total;
    return FG_OK;
}
