/* What a run asks of the backend: the list, what the model adds to it, and the check
 * against the backend's entries and capability query. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

void fg_op_needs_add(fg_op_needs *n, const char *who, uint32_t op, const uint32_t *dtypes)
{
    const fg_backend_op_desc *d = fg_backend_op_info(op);
    fg_op_need need = {op, {0}, who};
    for (int i = 0; d && i < d->dtype_count; i++)
        need.dtypes[i] = dtypes[i];
    for (size_t i = 0; i < n->count; i++)
        if (n->items[i].op == op && !memcmp(n->items[i].dtypes, need.dtypes, sizeof need.dtypes))
            return;
    if (n->count == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 16;
        fg_op_need *items = realloc(n->items, cap * sizeof *items);
        if (!items) {
            n->out_of_memory = 1;
            return;
        }
        n->items = items;
        n->cap = cap;
    }
    n->items[n->count++] = need;
}

void fg_op_needs_free(fg_op_needs *n)
{
    free(n->items);
    memset(n, 0, sizeof *n);
}

/* ---- the check ------------------------------------------------------------------------ */

/* Appends to buf (always terminated, silently cut at size). */
static void append(char *buf, size_t size, const char *fmt, ...) FG_PRINTF(3, 4);
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

/* "gemm(bf16)" when every dtype is the same, else "gemm(a bf16, b bf16, c f32)". */
static void append_need(char *buf, size_t size, const fg_op_need *need)
{
    const fg_backend_op_desc *d = fg_backend_op_info(need->op);
    int same = 1;
    for (int i = 1; i < d->dtype_count; i++)
        same = same && need->dtypes[i] == need->dtypes[0];
    append(buf, size, "%s(", d->name);
    for (int i = 0; i < (same ? 1 : d->dtype_count); i++)
        append(buf, size, "%s%s%s%s", i ? ", " : "", same ? "" : d->dtype_names[i],
               same ? "" : " ", fg_dtype_name((fg_dtype)need->dtypes[i]));
    if (!need->who)
        append(buf, size, ")");
    else if (strpbrk(need->who, " ["))
        append(buf, size, ") for %s", need->who);
    else /* a section's name */
        append(buf, size, ") for [%s]", need->who);
}

/* The entries every run calls: devices, memory, queues, copies. */
#define BASE_ENTRY(fn) {#fn, offsetof(fg_backend_vtable, fn)}
static const struct {
    const char *name;
    size_t offset;
} base_entries[] = {
    BASE_ENTRY(device_count), BASE_ENTRY(device_info),  BASE_ENTRY(alloc),
    BASE_ENTRY(free),         BASE_ENTRY(queue_create), BASE_ENTRY(queue_destroy),
    BASE_ENTRY(queue_sync),   BASE_ENTRY(copy),
};

static int has_entry(const fg_backend_vtable *be, size_t offset)
{
    void (*fn)(void) = NULL;
    if (offset + sizeof fn > be->struct_size)
        return 0;
    memcpy(&fn, (const char *)be + offset, sizeof fn);
    return fn != NULL;
}

fg_status fg_backend_check_needs(const fg_backend_vtable *be, void *bs, const char *name,
                                 const fg_op_needs *n, fg_error *err)
{
    if (n->out_of_memory)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory listing the backend's ops");
    /* the list, cut before the message would be: "..., and 7 more" */
    char list[FG_ERROR_MESSAGE_MAX - 64] = "", item[256];
    int missing = 0, left_out = 0;
    for (size_t i = 0; i < sizeof base_entries / sizeof base_entries[0] + n->count; i++) {
        item[0] = '\0';
        if (i < sizeof base_entries / sizeof base_entries[0]) {
            if (has_entry(be, base_entries[i].offset))
                continue;
            append(item, sizeof item, "%s", base_entries[i].name);
        } else {
            const fg_op_need *need = &n->items[i - sizeof base_entries / sizeof base_entries[0]];
            int conv = need->op == FG_OP_CONV2D_FORWARD || need->op == FG_OP_CONV2D_BACKWARD;
            if (fg_backend_can(be, bs, need->op, need->dtypes) &&
                (!conv || has_entry(be, offsetof(fg_backend_vtable, conv2d_workspace))))
                continue;
            append_need(item, sizeof item, need);
        }
        if (left_out || strlen(list) + strlen(item) + 3 > sizeof list)
            left_out++;
        else
            append(list, sizeof list, "%s%s", missing ? ", " : "", item);
        missing++;
    }
    if (!missing)
        return FG_OK;
    if (left_out)
        return fg_error_set(err, FG_UNAVAILABLE, "backend.%s lacks: %s, and %d more", name, list,
                            left_out);
    return fg_error_set(err, FG_UNAVAILABLE, "backend.%s lacks: %s", name, list);
}

/* ---- what the model calls ---------------------------------------------------------------- */

fg_status fg_model_op_needs(const fg_model *m, int training, fg_op_needs *n)
{
    fg_role_dtypes dt = m->typed ? m->dt : (fg_role_dtypes){FG_F32, FG_F32, FG_F32};
    for (size_t i = 0; i < m->layer_count; i++) {
        const fg_layer *l = &m->layers[i];
        if (l->ops->op_needs)
            l->ops->op_needs(l, &dt, training, n);
    }
    fg_layout_op_needs(m, dt.act, n);
    fg_loss_op_needs(m->loss, dt.act, training, n);
    if (m->label_smoothing > 0.0f)
        FG_NEED(n, "[model] label_smoothing", FG_OP_CLASSIFIER_SMOOTHED, dt.act);
    uint32_t param, grad;
    fg_model_storage_dtypes(m, &param, &grad);
    FG_NEED(n, "zeroing the gradients", FG_OP_FILL, grad);
    FG_NEED(n, "the loss and accuracy sums", FG_OP_FILL, FG_F32);
    if (dt.act != FG_F32)
        FG_NEED(n, "the input batch", FG_OP_CAST, dt.act, FG_F32);
    if (dt.param != FG_F32)
        FG_NEED(n, "the working parameters", FG_OP_CAST, dt.param, FG_F32);
    if (param != FG_F32) /* "true" half: parameters loaded and saved as f32 */
        FG_NEED(n, "saving the parameters", FG_OP_CAST, FG_F32, param);
    return n->out_of_memory ? FG_OUT_OF_MEMORY : FG_OK;
}
