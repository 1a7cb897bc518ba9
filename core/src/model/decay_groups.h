/* Which parameters weight decay applies to ([optimizer] weight_decay_params and no_decay,
 * decay_groups.c): nanoGPT's and Hugging Face's two parameter groups, as runs of the flat
 * parameter region the optimizer walks. */
#ifndef FG_DECAY_GROUPS_H
#define FG_DECAY_GROUPS_H

#include <stdio.h>

#include "model.h"
#include "optimizer.h"

typedef struct fg_decay_groups {
    fg_decay_run *runs; /* cover [0, fg_model_params_size) in order; NULL: every value decays */
    size_t run_count;
    size_t tensors[2], elems[2]; /* [0]: not decayed, [1]: decayed */
} fg_decay_groups;

/* Nonzero when tensor t is decayed under oc. */
int fg_decay_applies(const fg_optimizer_config *oc, const fg_tensor_info *t);
/* The runs of the model's parameters under oc; runs stay NULL when oc selects every
 * parameter the default way (weight_decay_params = all, no no_decay). */
fg_status fg_decay_groups_build(const fg_model *m, const fg_optimizer_config *oc,
                                fg_decay_groups *out, fg_error *err);
void fg_decay_groups_free(fg_decay_groups *g);
/* nanoGPT's two lines (tensors and values decayed and not) and the names of each group. */
void fg_decay_groups_report(const fg_model *m, const fg_optimizer_config *oc, FILE *out);

#endif
