/* Model graphs: a layer reads the previous layer's output, or the outputs it names
 * (`input = a` or `input = a, b`, earlier layers only, so file order is a topological
 * order). Forward runs the layers in file order; backward runs them in reverse and sums
 * the gradients of an output read more than once.
 *
 * Gradients live in a few arena slots shared by all layers (a chain needs 2, a residual
 * block 3, plus 2 scratch slots for the sums): graph planning at build gives each output a
 * slot by liveness in backward order, and each (layer, input) whether its dx is the first
 * write of that slot (written in place) or a later one (written to scratch, then added with
 * the backend's axpy). Every decision is made at build time: backward allocates nothing.
 *
 * A model whose layers all read their predecessor is "sequential" and keeps the replica's
 * ping-pong path; pipeline stages take only sequential models. */
#ifndef FG_GRAPH_H
#define FG_GRAPH_H

#include "layer.h"

#define FG_GRAPH_MAX_SLOTS 12

typedef struct fg_model fg_model;

/* Reads [layer.NAME] input (empty: the previous layer, or the model input for the first),
 * checks the count the kind takes and sets l->inputs, l->in (and l->in2), l->input_text.
 * Names that are not earlier layers fail naming the section's file:line. */
fg_status fg_graph_resolve_inputs(fg_model *m, const fg_config *cfg, fg_layer *l,
                                  fg_error *err);
/* After every layer is built: the gradient slots (and whether the model is sequential). */
fg_status fg_graph_plan(fg_model *m, fg_error *err);
int fg_model_is_graph(const fg_model *m);
/* Gradient slots a whole replica needs (2 for a sequential model), scratch included. */
int fg_model_grad_slots(const fg_model *m);
/* The slot the loss writes d(loss)/d(output) into. */
int fg_model_output_grad_slot(const fg_model *m);

/* Where layer i reads its input k in forward: the model input x or an earlier output. */
static inline const void *fg_graph_input(const fg_layer *l, int k, const void *const *out,
                                         const void *x)
{
    return l->inputs[k] < 0 ? x : out[l->inputs[k]];
}

/* One layer's backward: dy in, dx (input 0) and dx2 (input 1) out; dx NULL when not
 * wanted and the kind allows it. */
typedef fg_status (*fg_graph_step_fn)(void *user, size_t layer, const void *dy, void *dx,
                                      void *dx2, fg_error *err);

typedef struct fg_graph_backward_args {
    const fg_backend_vtable *be;
    void *bs, *queue;
    uint32_t act_dtype;
    int batch;
    int stop;            /* the lowest layer that runs backward */
    int need_input_grad; /* also d(loss)/d(model input) */
    void *const *slots;  /* fg_model_grad_slots() buffers, each of the widest activation */
    fg_graph_step_fn step;
    void *user;
} fg_graph_backward_args;

/* Backward through the whole model from the loss's gradient (in the output slot). Sets
 * *input_grad to the model input's gradient when asked for. */
fg_status fg_graph_backward(const fg_model *m, const fg_graph_backward_args *a,
                            const void **input_grad, fg_error *err);

#endif
