/* What a run will ask of the backend, worked out at setup before anything runs: the ops
 * the model's layers and loss, the precision's dtypes and the optimizer will call, each
 * with its dtype arguments (fg_backend_op, backend.h), checked against the backend's
 * entries and capability query in one go, so that a missing op is one message naming all
 * of them rather than a failure in the middle of a step. */
#ifndef FG_OP_NEEDS_H
#define FG_OP_NEEDS_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/backend.h"

/* One op a run calls, with its dtype arguments, and who calls it: a config section's name
 * ("layer.fc1", shown as [layer.fc1]) or words ("[optimizer] name = adamw", "the loss"); a
 * string that outlives the list. */
typedef struct fg_op_need {
    uint32_t op; /* fg_backend_op */
    uint32_t dtypes[FG_OP_MAX_DTYPES];
    const char *who;
} fg_op_need;

/* The needs of a run, each (op, dtypes) once (the first who is kept); zero-initialise. Built
 * by the layers (fg_layer_ops.op_needs), fg_xent_op_needs, fg_model_op_needs and
 * fg_optimizer_op_needs. */
typedef struct fg_op_needs {
    fg_op_need *items;
    size_t count, cap;
    int out_of_memory; /* an add failed: the check then fails saying so */
} fg_op_needs;

/* Adds op with fg_backend_op_info(op)->dtype_count dtypes. */
void fg_op_needs_add(fg_op_needs *n, const char *who, uint32_t op, const uint32_t *dtypes);
#define FG_NEED(n, who, op, ...)                                                           \
    fg_op_needs_add((n), (who), (op), (const uint32_t[]){__VA_ARGS__})
void fg_op_needs_free(fg_op_needs *n);
/* FG_OK when the backend has every entry a run needs (devices, memory, queues, copies) and
 * runs every op of n with its dtypes; otherwise FG_UNAVAILABLE with one message naming all
 * that are missing: "backend.NAME lacks: batchnorm_forward(bf16) for [layer.bn1],
 * adamw_update(param f16, grad f16) for [optimizer] adamw". */
fg_status fg_backend_check_needs(const fg_backend_vtable *be, void *bs, const char *name,
                                 const fg_op_needs *n, fg_error *err);

#endif
