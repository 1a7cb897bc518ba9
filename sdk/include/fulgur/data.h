/* Data plugins: a dataset of samples and their labels (class indices or regression
 * targets), read by index into host memory. The core's loader owns sampling, worker
 * threads, prefetch and pinned staging; decoding and augmentation happen inside read(),
 * on those workers.
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
    /* label_dtype FG_I32: class indices in [0, num_classes). FG_F32: regression targets,
     * num_classes = 0. */
    int32_t num_classes;
    uint32_t label_dtype;           /* fg_dtype of the labels read() writes: FG_I32 or FG_F32 */
    int32_t label_elems;            /* labels per sample (1; a sequence model: T); 0: none */
    /* 1: this split is not the plugin's own but another one standing in for it (idx's
     * val split read from the test files when val_fraction = 0). The core replaces a
     * stand-in val split by [data] val_split when that is set; a split of its own
     * (0) is kept and val_split beside it is refused. */
    int32_t stand_in;
} fg_dataset_info;

/* What one read() call is for. The randomness of an augmentation must be a function of
 * (seed, epoch, sample index) alone, never of the call, the thread or the batch a sample
 * falls in: a batch is then bitwise the same for any number of workers and after a resume
 * from the middle of an epoch. */
typedef struct fg_data_read_args {
    uint32_t struct_size;
    int32_t split;   /* fg_split the batch serves: augment only under FG_SPLIT_TRAIN. It may
                      * differ from the split open() got: a validation carved out of the train
                      * dataset is read with FG_SPLIT_VAL, and must not be augmented. */
    uint64_t seed;   /* trainer.seed */
    int64_t epoch;   /* 0-based epoch of the batch */
} fg_data_read_args;

typedef struct fg_data_vtable {
    uint32_t struct_size;
    /* FG_NOT_FOUND when the split is not configured. */
    fg_status (*open)(void *state, int split, void **dataset, fg_dataset_info *info,
                      fg_error *err);
    void (*close)(void *state, void *dataset);
    /* Writes count samples (contiguous, info.shape each) and, when labels is not NULL,
     * count * info.label_elems labels of info.label_dtype. indices are in [0, length).
     * args is never NULL; read a field only when FG_HAS_FIELD(args, ...) says it is there.
     * A sample that cannot be read (a corrupt file, a bad value) fails the call with a
     * message naming the file and the place. */
    fg_status (*read)(void *state, void *dataset, const fg_data_read_args *args,
                      const int64_t *indices, int count, void *samples, void *labels,
                      fg_error *err);
} fg_data_vtable;

#ifdef __cplusplus
}
#endif
#endif
