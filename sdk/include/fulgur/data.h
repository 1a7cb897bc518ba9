/* Data plugins: a dataset of samples and integer labels, read by index into host memory.
 * The core's loader owns sampling, worker threads, prefetch and pinned staging.
 * Thread rule: open/close from the trainer's thread; read() may be called concurrently
 * from several worker threads on the same dataset. */
#ifndef FULGUR_DATA_H
#define FULGUR_DATA_H

#include "fulgur/plugin.h"
#include "fulgur/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fg_split {
    FG_SPLIT_TRAIN = 1,
    FG_SPLIT_VAL = 2,
    FG_SPLIT_TEST = 3,
    FG_SPLIT_PREDICT = 4
} fg_split;

typedef struct fg_dataset_info {
    uint32_t struct_size;
    int64_t length;                 /* number of samples */
    int32_t rank;                   /* dimensions of one sample */
    int64_t shape[FG_MAX_DIMS];     /* one sample, e.g. (1, 28, 28) */
    uint32_t sample_dtype;          /* fg_dtype written by read(): FG_F32 */
    int32_t num_classes;            /* labels are int32 in [0, num_classes); 0: no labels */
} fg_dataset_info;

typedef struct fg_data_vtable {
    uint32_t struct_size;
    /* FG_NOT_FOUND when the split is not configured. */
    fg_status (*open)(void *state, int split, void **dataset, fg_dataset_info *info,
                      fg_error *err);
    void (*close)(void *state, void *dataset);
    /* Writes count samples (contiguous, info.shape each) and, when labels is not NULL,
     * count labels. indices are in [0, length). */
    fg_status (*read)(void *state, void *dataset, const int64_t *indices, int count,
                      void *samples, int32_t *labels, fg_error *err);
} fg_data_vtable;

#ifdef __cplusplus
}
#endif
#endif
