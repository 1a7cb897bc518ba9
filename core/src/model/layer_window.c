/* A window sweep over a (c, h, w) input, what conv2d and the pools share: the output's
 * shape planned from kernel, stride and padding, and the backend's descriptor of it. */
#include <inttypes.h>
#include <string.h>

#include "layer.h"

/* Output side of a window sweep over `in` values; 0 when the window does not fit. */
static int64_t window_out(int64_t in, int kernel, int stride, int padding)
{
    return in + 2 * padding < kernel ? 0 : (in + 2 * padding - kernel) / stride + 1;
}

fg_status fg_layer_plan_window(fg_layer *l, int64_t channels, fg_error *err)
{
    int64_t h = l->in.dims[1], w = l->in.dims[2];
    int64_t oh = window_out(h, l->kernel, l->stride, l->padding);
    int64_t ow = window_out(w, l->kernel, l->stride, l->padding);
    if (!oh || !ow)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] kernel_size %d is larger than its input: %s, padded by %d "
                            "to %" PRId64 "x%" PRId64,
                            l->origin, l->section, l->kernel, l->input_text, l->padding,
                            h + 2 * l->padding, w + 2 * l->padding);
    l->out.rank = 3;
    l->out.dims[0] = channels;
    l->out.dims[1] = oh;
    l->out.dims[2] = ow;
    return FG_OK;
}

void fg_layer_window_desc(const fg_layer *l, int batch, fg_conv2d_desc *d)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->n = batch;
    d->c = (int32_t)l->in.dims[0];
    d->h = (int32_t)l->in.dims[1];
    d->w = (int32_t)l->in.dims[2];
    d->k = (int32_t)l->units;
    d->r = d->s = l->kernel;
    d->pad_h = d->pad_w = l->padding;
    d->stride_h = d->stride_w = l->stride;
    d->out_h = (int32_t)l->out.dims[1];
    d->out_w = (int32_t)l->out.dims[2];
    d->layout = l->nhwc ? FG_LAYOUT_NHWC : FG_LAYOUT_NCHW;
}
