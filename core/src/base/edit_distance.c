/* Levenshtein distance and "did you mean": the nearest candidate to a misspelt word. */
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define FG_DISTANCE_STACK_ROW 128

size_t fg_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n < m) { /* keep the row as short as the shorter word */
        const char *t = a; a = b; b = t;
        size_t tn = n; n = m; m = tn;
    }
    if (m == 0)
        return n;

    size_t stack_row[FG_DISTANCE_STACK_ROW];
    size_t *row = stack_row;
    if (m + 1 > FG_DISTANCE_STACK_ROW) {
        row = malloc((m + 1) * sizeof *row);
        if (!row)
            return n; /* out of memory: n is an upper bound, and "far" is the safe answer */
    }
    for (size_t j = 0; j <= m; j++)
        row[j] = j;
    /* row[j] holds the distance between a[0..i) and b[0..j); `diag` the previous row's j-1. */
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[m];
    if (row != stack_row)
        free(row);
    return d;
}

const char *fg_nearest(const char *word, const char *const *candidates, size_t count)
{
    if (!word || !candidates)
        return NULL;
    size_t len = strlen(word);
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < count; i++) {
        const char *c = candidates[i];
        if (!c)
            continue;
        size_t clen = strlen(c);
        /* The length difference is a lower bound of the distance: skip far words cheaply. */
        size_t gap = clen > len ? clen - len : len - clen;
        if (gap >= best_d)
            continue;
        size_t d = fg_edit_distance(word, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best;
}
