/* The order the [layer.*] sections run in: the file's, except that a relu directly followed
 * by a max pooling runs after it (layer_order.c says when and why). */
#ifndef FG_LAYER_ORDER_H
#define FG_LAYER_ORDER_H

#include <stddef.h>

#include "config.h"

/* Fills order[0 .. count) with the indices (fg_config_section_name) of cfg's layer
 * sections in the order they are built and run; count is the number of layer sections,
 * which the caller sized order for. Returns how many relu / max pooling pairs were
 * swapped. */
size_t fg_layer_order(const fg_config *cfg, size_t *order, size_t count);

#endif
