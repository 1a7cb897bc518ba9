/* [model] memory_format: which layers keep their (c, h, w) activations channels-last (NHWC)
 * on the device, and the transposes at the layout's edges (transpose_batched, ABI 1.10).
 * Under channels_last, conv2d, maxpool2d, avgpool2d and a batchnorm over (c, h, w) run NHWC;
 * relu, gelu, tanh, sigmoid, dropout and add keep their input's layout. A layer of those
 * that reads an NCHW tensor (the model's input) transposes it first into its own arena
 * bytes, and its input gradient back; flatten of an NHWC tensor transposes it to NCHW, so
 * the flattened order, and the weights after it, mean what they mean under contiguous.
 * Any other kind reading an NHWC tensor is refused with a message naming it. */
#ifndef FG_LAYOUT_H
#define FG_LAYOUT_H

#include "layer.h"

typedef enum fg_memory_format {
    FG_MEMORY_CONTIGUOUS = 0, /* NCHW everywhere: the default, today's bits */
    FG_MEMORY_CHANNELS_LAST = 1
} fg_memory_format;

#define FG_MEMORY_FORMAT_CHOICES "contiguous|channels_last"
/* Who asks for the transposes, in the backend check's message. */
#define FG_MEMORY_FORMAT_WHO "[model] memory_format = channels_last"

/* Reads [model] memory_format into *out. */
fg_status fg_layout_read(const fg_config *cfg, const fg_option *opts, size_t count,
                         fg_memory_format *out, fg_error *err);

/* The kind a layer of kind k runs as: flatten of an NHWC tensor is the transposing flatten. */
const fg_layer_ops *fg_layout_kind(const fg_model *m, const fg_layer *l, const fg_layer_ops *k);

/* After l's plan: sets l->nhwc and l->nhwc_entry (its arena grows by the transposed input
 * and input gradient), or refuses a kind that cannot read an NHWC input. */
fg_status fg_layout_plan(fg_model *m, fg_layer *l, fg_error *err);

/* Whether the tensor layer j gives (-1: the model input) is NHWC. */
int fg_layout_output_nhwc(const fg_model *m, int j);

/* An entry layer's NHWC copy of its input (else c->x), written by fg_layout_enter. */
const void *fg_layout_x(const fg_layer *l, const fg_layer_ctx *c);
/* Forward of an entry layer: c->x (NCHW) transposed into the copy; nothing otherwise. */
fg_status fg_layout_enter(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
/* Where an entry layer's backward writes its NHWC input gradient (else c->dx; NULL when
 * c->dx is), and its transpose into c->dx after. */
void *fg_layout_dx(const fg_layer *l, const fg_layer_ctx *c);
fg_status fg_layout_leave_dx(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);

/* transpose_batched on the context's queue in its activation dtype. */
fg_status fg_layout_transpose(const fg_layer_ctx *c, int rows, int cols, const void *x, void *y,
                              fg_error *err);

/* The transposes' op, when some layer runs NHWC. */
void fg_layout_op_needs(const fg_model *m, uint32_t act_dtype, fg_op_needs *n);

/* One line for the run's output: which layers run NHWC and where the transposes are;
 * "" under contiguous. */
void fg_layout_describe(const fg_model *m, char *buf, size_t size);

#endif
