/* Under a comm, every rank must run the same training: before the strategy moves a byte,
 * the ranks compare a fingerprint of what must match (the resolved config without the keys
 * that may differ per rank, the parameter layout, the data set sizes, the checkpoint being
 * resumed). Equal fingerprints cost one all-reduce of 8 int32; a mismatch stops every rank
 * with the lowest differing rank and the first item it differs in (rank 0's order). */
#ifndef FG_RANK_AGREEMENT_H
#define FG_RANK_AGREEMENT_H

#include "config.h"
#include "data_split.h"
#include "fulgur/plugin.h"
#include "model.h"
#include "ranks.h"

struct fg_ckpt;

/* What the ranks compare, given by the trainer. */
typedef struct fg_rank_agreement {
    fg_ranks ranks;
    const fg_config *cfg;
    const fg_model *model;
    const fg_data_vtable *data; /* the data plugin, to read the train split's samples */
    void *data_state;
    const fg_data_split *train, *val, *test;
    struct fg_ckpt *resumed; /* the checkpoint being resumed, or NULL */
} fg_rank_agreement;

/* FG_INVALID_ARGUMENT naming the rank and the key, config entry, tensor, data split or
 * checkpoint field; FG_OK alone or when every rank agrees. */
fg_status fg_agree_across_ranks(const fg_rank_agreement *a, fg_error *err);

#endif
