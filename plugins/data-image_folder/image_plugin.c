/* fulgur-data-image_folder.so: the descriptor, the option schema and the data vtable.
 * open() lists a split's folder (names only); read() decodes, transforms and augments
 * each sample on the calling worker thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_plugin.h"
#include "fulgur/data.h"
#include "image_augment.h"
#include "image_config.h"
#include "image_decode.h"
#include "image_index.h"
#include "image_pipeline.h"
#include "plugin_created.h"

#define NO_RANGE .min = 1, .max = 0
#define PATH_BYTES 4096

static const fg_option image_options[] = {
    {.key = "dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "folder that relative train_dir, val_dir and test_dir are resolved against"},
    {.key = "train_dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "training images, one subfolder per class (torchvision's ImageFolder layout); "
             "empty: no train split"},
    {.key = "val_dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "validation images, the same class folders; empty: no val split"},
    {.key = "test_dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "test images, the same class folders (predict reads them too); empty: none"},
    {.key = "mode", .type = FG_OPT_ENUM, .default_value = "rgb", NO_RANGE,
     .choices = "rgb|grayscale",
     .help = "3 channels, or 1 (Pillow's luma: (19595 R + 38470 G + 7471 B + 32768) >> 16)"},
    {.key = "resize", .type = FG_OPT_LIST, .default_value = "", NO_RANGE,
     .help = "N: the shorter side to N (needs center_crop); H,W: exactly; antialiased "
             "bilinear as PIL; empty: none"},
    {.key = "center_crop", .type = FG_OPT_LIST, .default_value = "", NO_RANGE,
     .help = "N or H,W: the central crop after resize (zero-padded when larger); it sets the "
             "output size. Neither key: every image must have the first image's size"},
    {.key = "mean", .type = FG_OPT_LIST, .default_value = "0", NO_RANGE,
     .help = "subtracted per channel from pixel/255: one value, or one per channel"},
    {.key = "std", .type = FG_OPT_LIST, .default_value = "1", NO_RANGE,
     .help = "divided by per channel after the mean: one value, or one per channel"},
    {.key = "random_crop_padding", .type = FG_OPT_INT, .default_value = "0", .min = 0,
     .max = 65536,
     .help = "train: pad by P zeros on every side and crop back at a random offset "
             "(torchvision's RandomCrop(size, padding=P)); 0: off"},
    {.key = "hflip", .type = FG_OPT_FLOAT, .default_value = "0", .min = 0, .max = 1,
     .help = "train: probability of a horizontal flip (0.5 as RandomHorizontalFlip); 0: off"},
    {.key = "random_resized_crop", .type = FG_OPT_BOOL, .default_value = "false", NO_RANGE,
     .help = "train: torchvision's RandomResizedCrop to the output size instead of "
             "resize/center_crop"},
    {.key = "rrc_scale", .type = FG_OPT_LIST, .default_value = "0.08,1", NO_RANGE,
     .help = "train: RandomResizedCrop's range of area fractions"},
    {.key = "rrc_ratio", .type = FG_OPT_LIST, .default_value = "0.75,1.3333333333333333",
     NO_RANGE, .help = "train: RandomResizedCrop's range of aspect ratios (w/h), log-uniform"},
    {.key = "brightness", .type = FG_OPT_FLOAT, .default_value = "0", .min = 0, .max = 1e6,
     .help = "train: ColorJitter brightness b: a factor in [max(0, 1-b), 1+b]; 0: off"},
    {.key = "contrast", .type = FG_OPT_FLOAT, .default_value = "0", .min = 0, .max = 1e6,
     .help = "train: ColorJitter contrast c: blend with the gray mean by a factor in "
             "[max(0, 1-c), 1+c]; 0: off"},
};

typedef struct image_state {
    const fg_host *host;
    image_config cfg;
} image_state;

typedef struct image_dataset {
    const image_state *state;
    const char *split_name;
    image_index index;
    char size_from[PATH_BYTES + 64];
    image_target target;
} image_dataset;

static const char *dir_key(int split)
{
    return split == FG_SPLIT_TRAIN ? "train_dir" : split == FG_SPLIT_VAL ? "val_dir" : "test_dir";
}

/* ---- init ---------------------------------------------------------------------------- */

static void image_deinit(void *state)
{
    image_state *s = state;
    if (!s)
        return;
    image_config_free(&s->cfg);
    free(s);
}

static fg_status image_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    image_state *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory");
    s->host = host;
    fg_status st = image_config_read(host, &s->cfg, err);
    return FG_PLUGIN_CREATED(st, s, state, free);
}

/* ---- open ---------------------------------------------------------------------------- */

/* The other split folders must hold the train folder's classes, or class indices would
 * silently mean different things. */
static fg_status check_classes(const image_state *s, const image_dataset *ds, int split,
                               fg_error *err)
{
    const char *train = s->cfg.dirs[FG_SPLIT_TRAIN];
    if (split == FG_SPLIT_TRAIN || train[0] == '\0')
        return FG_OK;
    image_index ref;
    fg_status st = image_index_classes(train, &ref, err);
    if (st != FG_OK)
        return st;
    const image_index *ix = &ds->index;
    int32_t n = ref.num_classes < ix->num_classes ? ref.num_classes : ix->num_classes;
    int32_t c = 0;
    while (c < n && strcmp(ref.classes[c], ix->classes[c]) == 0)
        c++;
    if (c < n || ref.num_classes != ix->num_classes)
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "image_folder: the %s split's classes differ from the train split's: "
                          "class %d is \"%s\" in %s but \"%s\" in %s (%d and %d classes); every "
                          "split needs the same class folders",
                          ds->split_name, c, c < ix->num_classes ? ix->classes[c] : "(none)",
                          ix->root, c < ref.num_classes ? ref.classes[c] : "(none)", train,
                          ix->num_classes, ref.num_classes);
    image_index_free(&ref);
    return st;
}

/* The output size: center_crop, else resize = H,W, else the split's first image. */
static fg_status output_size(const image_state *s, image_dataset *ds, int *oh, int *ow,
                             fg_error *err)
{
    const image_config *cfg = &s->cfg;
    if (cfg->crop_h || cfg->resize_h) {
        *oh = cfg->crop_h ? cfg->crop_h : cfg->resize_h;
        *ow = cfg->crop_h ? cfg->crop_w : cfg->resize_w;
        snprintf(ds->size_from, sizeof ds->size_from, "the %s option",
                 cfg->crop_h ? "center_crop" : "resize");
        return FG_OK;
    }
    char path[PATH_BYTES];
    if (!image_index_path(&ds->index, 0, path, sizeof path))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: a path under %s is longer "
                            "than %d bytes", ds->index.root, PATH_BYTES - 1);
    uint8_t *data = NULL;
    size_t size = 0;
    fg_status st = image_read_file(path, &data, &size, err);
    if (st == FG_OK)
        st = image_probe(path, data, size, oh, ow, err);
    free(data);
    if (st == FG_OK)
        snprintf(ds->size_from, sizeof ds->size_from,
                 "the size of %s, the %s split's first image", path, ds->split_name);
    return st;
}

static void image_close(void *state, void *dataset)
{
    image_dataset *ds = dataset;
    if (!ds)
        return;
    image_index_free(&ds->index);
    free(ds);
}

static void fill_info(const image_state *s, const image_dataset *ds, fg_dataset_info *info)
{
    fg_dataset_info full;
    memset(&full, 0, sizeof full);
    full.struct_size = sizeof full;
    full.length = ds->index.count;
    full.rank = 3;
    full.shape[0] = s->cfg.channels;
    full.shape[1] = ds->target.oh;
    full.shape[2] = ds->target.ow;
    full.sample_dtype = FG_F32;
    full.num_classes = ds->index.num_classes;
    full.label_dtype = FG_I32;
    full.label_elems = 1;
    fg_plugin_copy_dataset_info(info, &full);
}

static fg_status image_open(void *state, int split, void **dataset, fg_dataset_info *info,
                            fg_error *err)
{
    const image_state *s = state;
    *dataset = NULL;
    const char *name = fg_plugin_split_name(split);
    if (!name)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: unknown split %d", split);
    if (s->cfg.dirs[split][0] == '\0')
        return fg_error_set(err, FG_NOT_FOUND,
                            "image_folder: the %s split is not configured (option %s is empty)",
                            name, dir_key(split));
    image_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory");
    ds->state = s;
    ds->split_name = name;
    int oh = 0, ow = 0;
    fg_status st = image_index_build(s->cfg.dirs[split], &ds->index, err);
    if (st == FG_OK)
        st = check_classes(s, ds, split, err);
    if (st == FG_OK)
        st = output_size(s, ds, &oh, &ow, err);
    if (st != FG_OK) {
        image_close(state, ds);
        return st;
    }
    image_target_init(&ds->target, &s->cfg, oh, ow, ds->size_from);
    if (s->host && s->host->log)
        s->host->log(s->host, FG_LOG_INFO,
                     "image_folder: %s split: %lld images in %d classes from %s (%lld other "
                     "files skipped, %lld outside the class folders), samples (%d, %d, %d)%s",
                     name, (long long)ds->index.count, ds->index.num_classes, ds->index.root,
                     (long long)ds->index.skipped, (long long)ds->index.loose, s->cfg.channels,
                     oh, ow,
                     split == FG_SPLIT_TRAIN && image_config_augments(&s->cfg)
                         ? ", augmented" : "");
    if (info)
        fill_info(s, ds, info);
    *dataset = ds;
    return FG_OK;
}

/* ---- read ---------------------------------------------------------------------------- */

static fg_status image_read(void *state, void *dataset, const fg_data_read_args *args,
                            const int64_t *indices, int count, void *samples, void *labels,
                            fg_error *err)
{
    const image_state *s = state;
    const image_dataset *ds = dataset;
    fg_status checked = fg_plugin_check_read("image_folder", ds->split_name, ds->index.count,
                                             indices, count, samples, err);
    if (checked != FG_OK)
        return checked;
    int augment = FG_HAS_FIELD(args, fg_data_read_args, epoch) &&
                  args->split == FG_SPLIT_TRAIN && image_config_augments(&s->cfg);
    size_t elems = (size_t)s->cfg.channels * (size_t)ds->target.oh * (size_t)ds->target.ow;
    char path[PATH_BYTES];
    for (int k = 0; k < count; k++) {
        int64_t i = indices[k];
        if (!image_index_path(&ds->index, i, path, sizeof path))
            return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: the path of image %lld "
                                "under %s is longer than %d bytes", (long long)i,
                                ds->index.root, PATH_BYTES - 1);
        sample_rng rng;
        if (augment)
            sample_rng_init(&rng, args->seed, args->epoch, i);
        fg_status st = image_pipeline_sample(&s->cfg, &ds->target, path, augment ? &rng : NULL,
                                             (float *)samples + (size_t)k * elems, err);
        if (st != FG_OK)
            return st;
        if (labels)
            ((int32_t *)labels)[k] = ds->index.entries[i].label;
    }
    return FG_OK;
}

FG_PLUGIN_DEFINE_VTABLE(fg_data_vtable, FG_KIND_DATA, 0, "image_folder", "1.0.0",
                        "PNG/JPEG class folders (torchvision's ImageFolder), decoded and augmented "
                        "on the loader's workers",
                        FG_PLUGIN_OPTIONS(image_options), image_init, image_deinit,
                        .open = image_open, .close = image_close, .read = image_read);
