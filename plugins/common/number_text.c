/* Numbers as text; see number_text.h. */
#include "number_text.h"

#include <stdio.h>
#include <stdlib.h>

void fg_plugin_format_double(char *buf, size_t cap, double v)
{
    snprintf(buf, cap, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, cap, "%.17g", v);
}
