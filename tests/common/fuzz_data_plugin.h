/* What the CSV and image fuzz drivers share: a data plugin driven through its public
 * descriptor and vtable (init, open every split, read every sample, close, deinit), as the
 * core's loader would, with the fake host of tests/common answering its options. */
#ifndef FG_FUZZ_DATA_PLUGIN_H
#define FG_FUZZ_DATA_PLUGIN_H

#include <stdint.h>
#include <stdlib.h>

#include "fake_host.h"
#include "fulgur/data.h"

/* The plugin linked into the driver (its sources built with the sanitizers). */
extern const fg_plugin fulgur_plugin_v1;

/* Opens the split; when it opens, reads every sample (at most 64) into checked buffers. */
static inline void fuzz_read_split(const fg_data_vtable *vt, void *state, int split)
{
    void *ds = NULL;
    fg_dataset_info info = {.struct_size = sizeof info};
    fg_error err = {FG_OK, ""};
    if (vt->open(state, split, &ds, &info, &err) != FG_OK)
        return;
    int64_t elems = 1;
    for (int d = 0; d < info.rank; d++)
        elems *= info.shape[d];
    if (info.length < 0 || elems <= 0 || info.label_elems < 0)
        abort(); /* an opened dataset describes itself sanely */
    if (elems > (1 << 22)) { /* a header may declare a large image: not worth the memory */
        vt->close(state, ds);
        return;
    }
    float *sample = malloc((size_t)elems * sizeof(float));
    int32_t *label = malloc(((size_t)info.label_elems + 1) * sizeof(int32_t));
    fg_data_read_args args = {sizeof args, split, 1, 0};
    for (int64_t i = 0; sample && label && i < info.length && i < 64; i++)
        if (vt->read(state, ds, &args, &i, 1, sample, label, &err) != FG_OK)
            break;
    free(sample);
    free(label);
    vt->close(state, ds);
}

/* init with the options text (fake host), every split read, deinit. */
static inline void fuzz_run_data_plugin(const char *options)
{
    fg_fake_host h;
    fg_fake_host_init(&h, &fulgur_plugin_v1, "data");
    fg_fake_host_set_text(&h, options);
    void *state = NULL;
    fg_error err = {FG_OK, ""};
    if (fulgur_plugin_v1.init(&h.host, &state, &err) != FG_OK)
        return;
    const fg_data_vtable *vt = fulgur_plugin_v1.vtable;
    for (int split = FG_SPLIT_TRAIN; split <= FG_SPLIT_PREDICT; split++)
        fuzz_read_split(vt, state, split);
    fulgur_plugin_v1.deinit(state);
}

#endif
