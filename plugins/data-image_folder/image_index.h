/* The file list of one split folder, in torchvision's ImageFolder order:
 *   - classes are the subfolders of the root (symbolic links followed, hidden ones
 *     included), sorted by name (byte order); class index = position;
 *   - a class's images are every .png, .jpg or .jpeg (any case) under its folder,
 *     subfolders included, ordered as sorted(os.walk(class)) then sorted(file names);
 *   - other files are skipped and counted (ImageFolder skips them too), entries that are
 *     no regular file (FIFOs, sockets, devices, dangling links) among them, and so are
 *     the files beside the class folders; an entry with an image extension that is no
 *     regular file is an error naming it (ImageFolder lists it and fails when loading it);
 *     a folder with an image extension is a folder (walked, as os.walk does).
 * Only names are held, never pixels: 10^8 images cost their paths and 16 bytes each. */
#ifndef FG_IMAGE_INDEX_H
#define FG_IMAGE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

typedef struct image_entry {
    int64_t rel;     /* offset of "class/sub/name" in names */
    int32_t dir_len; /* bytes of its folder part ("class/sub") */
    int32_t label;
} image_entry;

typedef struct image_index {
    char *root;          /* the split folder, as configured */
    int32_t num_classes;
    char **classes;      /* (num_classes) sorted folder names */
    int64_t count;
    image_entry *entries; /* (count) */
    char *names;         /* NUL-terminated relative paths */
    size_t names_size;
    size_t names_cap;
    int64_t skipped;     /* entries in class folders without an image extension */
    int64_t loose;       /* entries beside the class folders */
} image_index;

/* Lists root. A root that is missing or no folder, one without class folders, and a
 * class folder without images are errors naming the folder (FG_INVALID_ARGUMENT). */
fg_status image_index_build(const char *root, image_index *out, fg_error *err);
/* The class folders only (root and classes filled, no files listed). */
fg_status image_index_classes(const char *root, image_index *out, fg_error *err);
void image_index_free(image_index *ix);

/* root/rel of entry i into buf (size bytes); 0 when it did not fit. */
int image_index_path(const image_index *ix, int64_t i, char *buf, size_t size);

#endif
