/* A data split of a fit (train, val, test, predict): its data set, what the data plugin said
 * of it, its loader and the indices it reads. The trainer owns them; parts read them. */
#ifndef FG_DATA_SPLIT_H
#define FG_DATA_SPLIT_H

#include "dataloader.h"
#include "fulgur/data.h"

typedef struct fg_data_split {
    const char *name;
    void *dataset;
    fg_dataset_info info;
    fg_dataloader *loader;
    int64_t *subset; /* [data] val_split: the indices this split reads (data/val_split.h) */
} fg_data_split;

#endif
