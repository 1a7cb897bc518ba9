/* The CPU backend's dtype staging: an op's half-precision operands are widened into f32
 * views in the queue's scratch before the f32 op runs, and its outputs rounded back after
 * it (cpu_ops.c). */
#ifndef FG_CPU_STAGE_H
#define FG_CPU_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

/* One tensor of an op: read from `in` before it (NULL: not read), written to `out` after
 * it (NULL: not written); `f` is what the f32 op sees. */
typedef struct fg_cpu_operand {
    const void *in;
    void *out;
    uint32_t dtype;
    size_t n;
    float *f;
} fg_cpu_operand;

#define ARG_IN(p, t, count) {(p), NULL, (t), (count), NULL}
#define ARG_OUT(p, t, count) {NULL, (p), (t), (count), NULL}
#define ARG_INOUT(p, t, count) {(p), (p), (t), (count), NULL}
#define ARG_ACC(p, t, count, acc) {(acc) ? (p) : NULL, (p), (t), (count), NULL}
#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Makes the f32 views (o[i].f); FG_UNAVAILABLE for a dtype the backend does not store. */
fg_status fg_cpu_stage(void *state, void *queue, const char *op, fg_cpu_operand *o, int count,
                       fg_error *err);
/* Rounds the outputs back into their storage when st is FG_OK; returns st. */
fg_status fg_cpu_unstage(void *state, const fg_cpu_operand *o, int count, fg_status st);

#endif
