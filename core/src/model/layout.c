/* [model] memory_format = channels_last: the layout of each layer's activations and the
 * transposes where NCHW and NHWC meet (layout.h). */
#include "layout.h"

#include <stdio.h>
#include <string.h>

#include "model_internal.h"

#define ENTRY_ALIGN 64

fg_status fg_layout_read(const fg_config *cfg, const fg_option *opts, size_t count,
                         fg_memory_format *out, fg_error *err)
{
    const char *origin;
    const char *v = fg_section_value(cfg, "model", opts, count, "memory_format", &origin);
    *out = FG_MEMORY_CONTIGUOUS;
    if (!v || strcmp(v, "contiguous") == 0)
        return FG_OK;
    if (strcmp(v, "channels_last") == 0) {
        *out = FG_MEMORY_CHANNELS_LAST;
        return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] memory_format = '%s' is not one "
                        "of " FG_MEMORY_FORMAT_CHOICES, origin, v);
}

int fg_layout_output_nhwc(const fg_model *m, int j)
{
    return j >= 0 && m->layers[j].nhwc;
}

/* conv2d, the poolings and a batchnorm over (c, h, w): kinds with NHWC kernels. */
static int runs_nhwc(const fg_layer *l)
{
    const fg_layer_ops *k = l->ops;
    return k == &fg_layer_conv2d || k == &fg_layer_maxpool2d || k == &fg_layer_avgpool2d ||
           (k == &fg_layer_batchnorm && l->in.rank == 3);
}

/* Elementwise kinds: the output in the input's layout. */
static int keeps_layout(const fg_layer *l)
{
    const fg_layer_ops *k = l->ops;
    return k == &fg_layer_relu || k == &fg_layer_gelu || k == &fg_layer_tanh ||
           k == &fg_layer_sigmoid || k == &fg_layer_dropout || k == &fg_layer_add;
}

const fg_layer_ops *fg_layout_kind(const fg_model *m, const fg_layer *l, const fg_layer_ops *k)
{
    if (k == &fg_layer_flatten && fg_layout_output_nhwc(m, l->inputs[0]))
        return &fg_layer_flatten_nhwc;
    return k;
}

static const char *input_name(const fg_model *m, int j)
{
    return j < 0 ? "model input" : m->layers[j].section;
}

/* The entry copies: the input and its gradient, NHWC, after the kind's own bytes. */
static void add_entry_copies(fg_layer *l)
{
    size_t per_sample = fg_shape_numel(&l->in) * sizeof(float); /* the widest act dtype */
    per_sample = align_up(per_sample, ENTRY_ALIGN);
    l->nhwc_entry = 1;
    l->nhwc_own_fixed = l->aux_fixed;
    l->nhwc_own_per_sample = l->aux_per_sample;
    l->nhwc_entry_per_sample = per_sample;
    l->aux_fixed += ENTRY_ALIGN; /* room to align the copies */
    l->aux_per_sample += 2 * per_sample;
}

fg_status fg_layout_plan(fg_model *m, fg_layer *l, fg_error *err)
{
    if (m->memory_format != FG_MEMORY_CHANNELS_LAST)
        return FG_OK;
    int in_nhwc = fg_layout_output_nhwc(m, l->inputs[0]);
    if (l->input_count > 1 && fg_layout_output_nhwc(m, l->inputs[1]) != in_nhwc)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] (%s) adds [%s] (%s) and [%s] (%s) under [model] "
                            "memory_format = channels_last; both inputs must be in one layout: "
                            "read the model input through a conv2d first, or set memory_format "
                            "= contiguous", l->origin, l->section, l->ops->type,
                            input_name(m, l->inputs[0]), in_nhwc ? "NHWC" : "NCHW",
                            input_name(m, l->inputs[1]), in_nhwc ? "NCHW" : "NHWC");
    if (runs_nhwc(l)) {
        l->nhwc = 1;
        if (!in_nhwc)
            add_entry_copies(l);
        return FG_OK;
    }
    if (keeps_layout(l) || l->ops == &fg_layer_flatten_nhwc || !in_nhwc) {
        l->nhwc = keeps_layout(l) && in_nhwc;
        return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "%s: [%s] (%s) reads [%s]'s (c, h, w) output, which is channels-last "
                        "(NHWC) under [model] memory_format = channels_last, and %s has no NHWC "
                        "form; put a flatten before it, or set memory_format = contiguous",
                        l->origin, l->section, l->ops->type, input_name(m, l->inputs[0]),
                        l->ops->type);
}

static char *entry_copy(const fg_layer *l, const fg_layer_ctx *c, int which)
{
    size_t own = l->nhwc_own_fixed + l->nhwc_own_per_sample * (size_t)c->batch;
    return (char *)c->aux + align_up(own, ENTRY_ALIGN) +
           (size_t)which * l->nhwc_entry_per_sample * (size_t)c->batch;
}

/* (c, h*w) of the layer's input */
static int in_channels(const fg_layer *l) { return (int)l->in.dims[0]; }
static int in_plane(const fg_layer *l) { return (int)(l->in.dims[1] * l->in.dims[2]); }

fg_status fg_layout_transpose(const fg_layer_ctx *c, int rows, int cols, const void *x, void *y,
                              fg_error *err)
{
    return FG_OP(c, err, transpose_batched, c->dt.act, c->batch, rows, cols, x, y);
}

const void *fg_layout_x(const fg_layer *l, const fg_layer_ctx *c)
{
    return l->nhwc_entry ? entry_copy(l, c, 0) : c->x;
}

fg_status fg_layout_enter(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (!l->nhwc_entry)
        return FG_OK;
    return fg_layout_transpose(c, in_channels(l), in_plane(l), c->x, entry_copy(l, c, 0), err);
}

void *fg_layout_dx(const fg_layer *l, const fg_layer_ctx *c)
{
    return l->nhwc_entry && c->dx ? entry_copy(l, c, 1) : c->dx;
}

fg_status fg_layout_leave_dx(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (!l->nhwc_entry || !c->dx)
        return FG_OK;
    return fg_layout_transpose(c, in_plane(l), in_channels(l), entry_copy(l, c, 1), c->dx, err);
}

void fg_layout_op_needs(const fg_model *m, uint32_t act_dtype, fg_op_needs *n)
{
    for (size_t i = 0; i < m->layer_count; i++)
        if (m->layers[i].nhwc_entry || m->layers[i].ops == &fg_layer_flatten_nhwc) {
            FG_NEED(n, FG_MEMORY_FORMAT_WHO, FG_OP_TRANSPOSE_BATCHED, act_dtype);
            return;
        }
}

/* Appends "[a], [b]" of the layers that pass test, cut to fit. */
static void list_layers(const fg_model *m, int (*test)(const fg_layer *), char *buf,
                        size_t size)
{
    int any = 0;
    for (size_t i = 0; i < m->layer_count; i++) {
        if (!test(&m->layers[i]))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s[%s]", any ? ", " : "", m->layers[i].section);
        any = 1;
    }
    if (!any) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "none");
    }
}

static int is_nhwc(const fg_layer *l) { return l->nhwc; }
static int is_entry(const fg_layer *l) { return l->nhwc_entry; }
static int is_exit(const fg_layer *l) { return l->ops == &fg_layer_flatten_nhwc; }

void fg_layout_describe(const fg_model *m, char *buf, size_t size)
{
    buf[0] = '\0';
    if (m->memory_format != FG_MEMORY_CHANNELS_LAST || size < 2)
        return;
    snprintf(buf, size, "model: [model] memory_format = channels_last: NHWC activations in ");
    list_layers(m, is_nhwc, buf, size);
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "; NCHW -> NHWC at ");
    list_layers(m, is_entry, buf, size);
    used = strlen(buf);
    snprintf(buf + used, size - used, "; NHWC -> NCHW at ");
    list_layers(m, is_exit, buf, size);
}
