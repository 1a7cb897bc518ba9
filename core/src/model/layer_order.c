/* A relu directly followed by a max pooling runs after the pooling instead.
 *
 * Why: max pooling and relu commute exactly. relu keeps the order of values and maps every
 * value <= 0 to +0, so the largest relu'd value of a window is relu of its largest value,
 * the first maximum is at the same place, and the gradients match too: the pooling routes
 * dy to that place and relu's mask there is the same test (max > 0). After a convolution the
 * relu then sweeps a quarter of the values (a 2x2 pooling): on the CNN benchmark its forward
 * and backward passes over conv1's 11 MB output took 12% of the step. Forward values and
 * gradients are bitwise the same; only a NaN input differs (relu maps NaN to 0 before the
 * pooling, after it the window's NaN wins and no gradient reaches the window's other
 * values), and a NaN already fails the run (the finite checks, nan_guard).
 *
 * When: both sections read the layer before them (no `input`, no `repeat`), and no section
 * reads either by name, whose output the swap changes (the pooling's becomes pre-relu). */
#include "layer_order.h"

#include <ctype.h>
#include <string.h>

static int is_layer_section(const char *s)
{
    return strncmp(s, "layer.", 6) == 0 && s[6] != '\0';
}

/* Some section's `input` list names `name` (a layer name: the section less "layer."). */
static int read_by_name(const fg_config *cfg, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
        const char *text = fg_config_get(cfg, fg_config_section_name(cfg, i), "input");
        for (const char *p = text; p && *p;) {
            while (*p == ',' || isspace((unsigned char)*p))
                p++;
            const char *e = p;
            while (*e && *e != ',' && !isspace((unsigned char)*e))
                e++;
            if ((size_t)(e - p) == len && strncmp(p, name, len) == 0)
                return 1;
            p = e;
        }
    }
    return 0;
}

/* A section of this type that reads the layer before it and is read by nothing by name. */
static int plain(const fg_config *cfg, const char *section, const char *type)
{
    const char *t = fg_config_get(cfg, section, "type");
    return t && strcmp(t, type) == 0 && !fg_config_get(cfg, section, "input") &&
           !fg_config_get(cfg, section, "repeat") && !read_by_name(cfg, section + 6);
}

size_t fg_layer_order(const fg_config *cfg, size_t *order, size_t count)
{
    size_t n = 0, swapped = 0;
    for (size_t i = 0; i < fg_config_section_count(cfg) && n < count; i++)
        if (is_layer_section(fg_config_section_name(cfg, i)))
            order[n++] = i;
    for (size_t k = 0; k + 1 < n; k++) {
        const char *a = fg_config_section_name(cfg, order[k]);
        const char *b = fg_config_section_name(cfg, order[k + 1]);
        if (plain(cfg, a, "relu") && plain(cfg, b, "maxpool2d")) {
            size_t keep = order[k];
            order[k] = order[k + 1];
            order[k + 1] = keep;
            swapped++;
            k++; /* the pair is settled */
        }
    }
    return swapped;
}
