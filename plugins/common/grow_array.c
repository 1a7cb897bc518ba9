/* The doubling reallocation and the array of names of grow_array.h. */
#include "grow_array.h"

#include <stdlib.h>
#include <string.h>

int fg_plugin_grow_array(void *items, size_t *cap, size_t need, size_t first, size_t item_size)
{
    if (need <= *cap)
        return 0;
    size_t count = *cap ? *cap : first;
    while (count < need)
        count *= 2;
    void *old;
    memcpy(&old, items, sizeof old);
    void *grown = realloc(old, count * item_size);
    if (grown == NULL)
        return -1;
    memcpy(items, &grown, sizeof grown);
    *cap = count;
    return 0;
}

long fg_plugin_name_index(char ***names, size_t *count, size_t *cap, size_t first,
                          const char *name)
{
    for (size_t i = 0; i < *count; i++)
        if (strcmp((*names)[i], name) == 0)
            return (long)i;
    if (fg_plugin_grow_array(names, cap, *count + 1, first, sizeof **names) != 0)
        return -1;
    size_t n = strlen(name) + 1;
    char *copy = malloc(n);
    if (copy == NULL)
        return -1;
    memcpy(copy, name, n);
    (*names)[*count] = copy;
    return (long)(*count)++;
}
