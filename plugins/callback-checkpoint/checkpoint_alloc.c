/* Growing tables of the checkpoint callback; see checkpoint.h. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

fg_status ckpt_grow(void **items, size_t count, size_t *cap, size_t size, const char *what,
                    fg_error *err)
{
    if (count < *cap)
        return FG_OK;
    size_t bigger = *cap ? 2 * *cap : 8;
    void *p = realloc(*items, bigger * size);
    if (p == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for %s", what);
    *items = p;
    *cap = bigger;
    return FG_OK;
}

fg_status ckpt_copy_text(const char *text, char **copy, const char *what, fg_error *err)
{
    size_t len = strlen(text);
    *copy = malloc(len + 1);
    if (*copy == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for %s", what);
    memcpy(*copy, text, len + 1);
    return FG_OK;
}
