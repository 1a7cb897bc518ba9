/* Model graphs: named inputs, gradient slots, backward in reverse file order. See graph.h. */
#include "graph.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* ---- inputs -------------------------------------------------------------------------- */

static int find_layer(const fg_model *m, const char *name, size_t len)
{
    for (size_t i = 0; i < m->layer_count; i++)
        if (strlen(m->layers[i].name) == len && strncmp(m->layers[i].name, name, len) == 0)
            return (int)i;
    return -2;
}

/* "a, b" -> the layer indices; names must be earlier layers. */
static fg_status parse_inputs(const fg_model *m, const fg_config *cfg, fg_layer *l,
                              const char *text, fg_error *err)
{
    const char *origin = fg_config_origin(cfg, l->section, "input");
    l->input_count = 0;
    for (const char *p = text; *p;) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',' && !isspace((unsigned char)*e))
            e++;
        int at = find_layer(m, p, (size_t)(e - p));
        if (at < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] input = %s: no earlier "
                                "layer is named '%.*s' (a layer reads layers above it in the "
                                "file)", origin ? origin : l->origin, l->section, text,
                                (int)(e - p), p);
        if (l->input_count == FG_LAYER_MAX_INPUTS)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] input = %s: at most %d "
                                "inputs", origin ? origin : l->origin, l->section, text,
                                FG_LAYER_MAX_INPUTS);
        l->inputs[l->input_count++] = at;
        p = e;
    }
    return FG_OK;
}

fg_status fg_graph_resolve_inputs(fg_model *m, const fg_config *cfg, fg_layer *l,
                                  fg_error *err)
{
    const char *text = fg_config_get(cfg, l->section, "input");
    int want = (l->ops->flags & FG_LAYER_TWO_INPUTS) ? 2 : 1;
    if (text && text[0]) {
        fg_status st = parse_inputs(m, cfg, l, text, err);
        if (st != FG_OK)
            return st;
    } else {
        l->input_count = 1;
        l->inputs[0] = l->index - 1; /* the previous layer; -1: the model input */
    }
    if (l->input_count != want)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (%s) reads %d input%s, but "
                            "input names %d%s", l->origin, l->section, l->ops->type, want,
                            want > 1 ? "s" : "", l->input_count,
                            want > 1 ? " (input = a, b)" : "");
    char a[FG_SHAPE_TEXT_MAX], b[FG_SHAPE_TEXT_MAX];
    int p = l->inputs[0];
    l->in = p < 0 ? m->input : m->layers[p].out;
    if (want == 1) {
        snprintf(l->input_text, sizeof l->input_text, "%s%s%s gives %s", p < 0 ? "" : "[",
                 p < 0 ? "[model] input" : m->layers[p].section, p < 0 ? "" : "]",
                 fg_shape_format(&l->in, a, sizeof a));
        return FG_OK;
    }
    int q = l->inputs[1];
    l->in2 = q < 0 ? m->input : m->layers[q].out;
    snprintf(l->input_text, sizeof l->input_text, "[%s] gives %s, [%s] gives %s",
             p < 0 ? "model input" : m->layers[p].section, fg_shape_format(&l->in, a, sizeof a),
             q < 0 ? "model input" : m->layers[q].section, fg_shape_format(&l->in2, b, sizeof b));
    return FG_OK;
}

/* ---- gradient slots ------------------------------------------------------------------- */

/* The layer whose memory output j is: aliases (flatten) hand their input on. */
static int owner_of(const fg_model *m, int j)
{
    while (j >= 0 && (m->layers[j].ops->flags & FG_LAYER_ALIAS))
        j = m->layers[j].inputs[0];
    return j;
}

static int take_slot(unsigned char *used, int *high)
{
    for (int s = 0; s < FG_GRAPH_MAX_SLOTS - 2; s++)
        if (!used[s]) {
            used[s] = 1;
            if (s + 1 > *high)
                *high = s + 1;
            return s;
        }
    return -1;
}

static fg_status check_outputs_read(const fg_model *m, fg_error *err)
{
    for (size_t j = 0; j + 1 < m->layer_count; j++) {
        int read = 0;
        for (size_t i = j + 1; i < m->layer_count && !read; i++)
            for (int k = 0; k < m->layers[i].input_count; k++)
                read |= m->layers[i].inputs[k] == (int)j;
        if (!read)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s]'s output is never read: "
                                "every layer but the last feeds a later one",
                                m->layers[j].origin, m->layers[j].section);
    }
    return FG_OK;
}

fg_status fg_graph_plan(fg_model *m, fg_error *err)
{
    m->is_graph = 0;
    for (size_t i = 0; i < m->layer_count; i++) {
        const fg_layer *l = &m->layers[i];
        m->is_graph |= l->input_count != 1 || l->inputs[0] != (int)i - 1;
    }
    m->grad_slots = 2;
    m->output_slot = 0;
    if (!m->is_graph)
        return FG_OK;
    fg_status st = check_outputs_read(m, err);
    if (st != FG_OK)
        return st;
    size_t n = m->layer_count;
    int *slot = malloc((n + 1) * sizeof *slot); /* by owner + 1 (0: the model input) */
    if (!slot)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory planning the model graph");
    for (size_t i = 0; i <= n; i++)
        slot[i] = -1;
    unsigned char used[FG_GRAPH_MAX_SLOTS] = {0};
    int high = 0;
    int out = owner_of(m, (int)n - 1);
    slot[out + 1] = m->output_slot = take_slot(used, &high);
    for (int i = (int)n - 1; i >= 0 && st == FG_OK; i--) {
        fg_layer *l = &m->layers[i];
        if (l->ops->flags & FG_LAYER_ALIAS)
            continue;
        l->grad_slot = slot[i + 1];
        for (int k = 0; k < l->input_count && st == FG_OK; k++) {
            int p = owner_of(m, l->inputs[k]);
            l->input_owner[k] = p;
            l->input_accumulate[k] = slot[p + 1] >= 0;
            if (slot[p + 1] < 0 && (slot[p + 1] = take_slot(used, &high)) < 0)
                st = fg_error_set(err, FG_UNAVAILABLE, "%s: [%s]: more than %d gradients "
                                  "would be alive at once in backward; fewer long skip "
                                  "connections", l->origin, l->section, FG_GRAPH_MAX_SLOTS - 2);
            l->input_slot[k] = slot[p + 1];
        }
        used[l->grad_slot] = 0; /* after this layer's backward nothing reads its dy */
    }
    m->input_slot = slot[0];
    free(slot);
    m->grad_slots = high + 2; /* and two scratch slots for sums */
    return st;
}

int fg_model_is_graph(const fg_model *m) { return m->is_graph; }
int fg_model_grad_slots(const fg_model *m) { return m->grad_slots; }
int fg_model_output_grad_slot(const fg_model *m) { return m->output_slot; }

/* ---- backward -------------------------------------------------------------------------- */

fg_status fg_graph_backward(const fg_model *m, const fg_graph_backward_args *a,
                            const void **input_grad, fg_error *err)
{
    void *scratch[2] = {a->slots[m->grad_slots - 2], a->slots[m->grad_slots - 1]};
    for (int i = (int)m->layer_count - 1; i >= a->stop; i--) {
        const fg_layer *l = &m->layers[i];
        if (l->ops->flags & FG_LAYER_ALIAS)
            continue;
        void *dx[FG_LAYER_MAX_INPUTS] = {NULL, NULL};
        int add[FG_LAYER_MAX_INPUTS] = {0, 0};
        for (int k = 0; k < l->input_count; k++) {
            int p = l->input_owner[k];
            int want = p >= 0 ? p >= a->stop : a->need_input_grad;
            if (!want)
                dx[k] = k == 0 && (l->ops->flags & FG_LAYER_DX_OPTIONAL) ? NULL : scratch[k];
            else if (l->input_accumulate[k])
                dx[k] = scratch[k], add[k] = 1;
            else
                dx[k] = a->slots[l->input_slot[k]];
        }
        fg_status st = a->step(a->user, (size_t)i, a->slots[l->grad_slot], dx[0], dx[1], err);
        for (int k = 0; st == FG_OK && k < l->input_count; k++) {
            if (!add[k])
                continue;
            size_t count = (size_t)a->batch * fg_shape_numel(k ? &l->in2 : &l->in);
            if (!FG_BACKEND_HAS(a->be, axpy))
                return fg_backend_lacks(err, "axpy");
            st = a->be->axpy(a->bs, a->queue, a->act_dtype, a->act_dtype, 1.0f, dx[k],
                             a->slots[l->input_slot[k]], count, err);
        }
        if (st != FG_OK)
            return st;
    }
    *input_grad = a->need_input_grad && m->input_slot >= 0 ? a->slots[m->input_slot] : NULL;
    return FG_OK;
}
