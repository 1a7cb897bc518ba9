/* Listing a split folder: class folders, then each class's image files, walked and
 * sorted as torchvision's ImageFolder does (see image_index.h). */
#define _DEFAULT_SOURCE

#include "image_index.h"

#include "grow_array.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define INDEX_PATH_MAX 4096
#define INDEX_MAX_DEPTH 32 /* followed links may loop */

enum { KIND_OTHER = 0, KIND_FILE, KIND_DIR };

/* One folder's entry names, sorted. */
typedef struct name_list {
    char **names;
    size_t count;
    size_t cap;
} name_list;

static void name_list_free(name_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static fg_status list_folder(const char *path, name_list *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(path);
    if (!d)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: cannot list %s: %s", path,
                            strerror(errno));
    struct dirent *e;
    fg_status st = FG_OK;
    while (st == FG_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (out->count == out->cap) {
            size_t cap = out->cap ? 2 * out->cap : 64;
            char **names = realloc(out->names, cap * sizeof *names);
            if (!names) {
                st = fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory listing %s",
                                  path);
                break;
            }
            out->names = names;
            out->cap = cap;
        }
        if (!(out->names[out->count] = strdup(e->d_name)))
            st = fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory listing %s",
                              path);
        else
            out->count++;
    }
    closedir(d);
    if (st != FG_OK) {
        name_list_free(out);
        return st;
    }
    if (out->count > 1)
        qsort(out->names, out->count, sizeof *out->names, compare_names);
    return FG_OK;
}

static int kind_of(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) /* follows links, as os.walk(followlinks=True) */
        return KIND_OTHER;
    return S_ISDIR(st.st_mode) ? KIND_DIR : S_ISREG(st.st_mode) ? KIND_FILE : KIND_OTHER;
}

/* What a path that is no file or folder is, for a message. */
static const char *other_kind(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return strerror(errno);
    if (S_ISLNK(st.st_mode))
        return stat(path, &st) != 0 ? "a dangling symbolic link" : "a link to no regular file";
    return S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "not a regular file";
}

static int has_image_extension(const char *name)
{
    static const char *const ext[] = {".png", ".jpg", ".jpeg"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t m = strlen(ext[i]);
        if (n > m && strcasecmp(name + n - m, ext[i]) == 0)
            return 1;
    }
    return 0;
}

static fg_status join(char *buf, const char *a, const char *b, fg_error *err)
{
    int n = snprintf(buf, INDEX_PATH_MAX, "%s/%s", a, b);
    if (n < 0 || n >= INDEX_PATH_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "image_folder: path %s/%s is longer than %d bytes", a, b,
                            INDEX_PATH_MAX - 1);
    return FG_OK;
}

/* ---- growing the index --------------------------------------------------------------- */

static fg_status add_entry(image_index *ix, const char *rel_dir, const char *name, int label,
                           fg_error *err)
{
    size_t dir_len = strlen(rel_dir), need = dir_len + 1 + strlen(name) + 1;
    if (fg_plugin_grow_array(&ix->names, &ix->names_cap, ix->names_size + need, 1 << 16, 1) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory indexing %s",
                            ix->root);
    if ((ix->count & (ix->count - 1)) == 0) { /* a power of two (or 0): grow */
        size_t cap = ix->count ? 2 * (size_t)ix->count : 1;
        image_entry *entries = realloc(ix->entries, cap * sizeof *entries);
        if (!entries)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory indexing %s",
                                ix->root);
        ix->entries = entries;
    }
    ix->entries[ix->count++] = (image_entry){(int64_t)ix->names_size, (int32_t)dir_len, label};
    snprintf(ix->names + ix->names_size, need, "%s/%s", rel_dir, name);
    ix->names_size += need;
    return FG_OK;
}

/* Every image under root/rel_dir, folder by folder. */
static fg_status walk(image_index *ix, const char *rel_dir, int label, int depth, fg_error *err)
{
    char path[INDEX_PATH_MAX], child[INDEX_PATH_MAX], child_rel[INDEX_PATH_MAX];
    fg_status st = join(path, ix->root, rel_dir, err);
    if (st != FG_OK)
        return st;
    if (depth > INDEX_MAX_DEPTH)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: %s is nested more than %d "
                            "folders deep (a symbolic link loop?)", path, INDEX_MAX_DEPTH);
    name_list names;
    if ((st = list_folder(path, &names, err)) != FG_OK)
        return st;
    for (size_t i = 0; st == FG_OK && i < names.count; i++) {
        if ((st = join(child, path, names.names[i], err)) != FG_OK)
            break;
        int kind = kind_of(child);
        int image = has_image_extension(names.names[i]);
        if (kind == KIND_FILE && image)
            st = add_entry(ix, rel_dir, names.names[i], label, err);
        else if (kind == KIND_OTHER && image) /* ImageFolder would list it, then fail on it */
            st = fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: %s is %s, not an image "
                              "file: replace or remove it", child, other_kind(child));
        else if (kind != KIND_DIR)
            ix->skipped++;
    }
    for (size_t i = 0; st == FG_OK && i < names.count; i++) {
        if ((st = join(child, path, names.names[i], err)) != FG_OK)
            break;
        if (kind_of(child) == KIND_DIR && (st = join(child_rel, rel_dir, names.names[i], err)) == FG_OK)
            st = walk(ix, child_rel, label, depth + 1, err);
    }
    name_list_free(&names);
    return st;
}

/* sorted(os.walk(class)) orders folders by their path string, which a depth-first walk
 * over sorted names does not ("a/b" before "a-c" by walk, after it by string): a class's
 * entries are sorted by (folder, name) once walked. */
static int compare_entries(const image_entry *a, const image_entry *b, const char *names)
{
    const char *pa = names + a->rel, *pb = names + b->rel;
    size_t la = (size_t)a->dir_len, lb = (size_t)b->dir_len;
    int c = memcmp(pa, pb, la < lb ? la : lb);
    if (c == 0 && la != lb)
        return la < lb ? -1 : 1;
    if (c != 0)
        return c;
    return strcmp(pa + la + 1, pb + lb + 1);
}

/* A bottom-up merge sort of a range (qsort has no context argument for `names`). */
static fg_status sort_range(image_index *ix, int64_t first, int64_t last, fg_error *err)
{
    int64_t n = last - first;
    if (n < 2)
        return FG_OK;
    image_entry *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory sorting %s",
                            ix->root);
    image_entry *a = ix->entries + first, *src = a, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = compare_entries(&src[j], &src[i], ix->names) < 0 ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        image_entry *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
    free(tmp);
    return FG_OK;
}

/* ---- the index ----------------------------------------------------------------------- */

static fg_status find_classes(image_index *ix, fg_error *err)
{
    name_list names;
    fg_status st = list_folder(ix->root, &names, err);
    if (st != FG_OK)
        return st;
    char child[INDEX_PATH_MAX];
    ix->classes = calloc(names.count ? names.count : 1, sizeof *ix->classes);
    if (!ix->classes)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory listing %s",
                          ix->root);
    for (size_t i = 0; st == FG_OK && i < names.count; i++) {
        if ((st = join(child, ix->root, names.names[i], err)) != FG_OK)
            break;
        if (kind_of(child) != KIND_DIR) { /* ImageFolder ignores them too */
            ix->loose++;
            continue;
        }
        ix->classes[ix->num_classes++] = names.names[i];
        names.names[i] = NULL; /* moved */
    }
    name_list_free(&names);
    if (st == FG_OK && ix->num_classes == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "image_folder: %s has no class folders (expected one subfolder per "
                          "class holding its images, as torchvision's ImageFolder reads)",
                          ix->root);
    return st;
}

fg_status image_index_classes(const char *root, image_index *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(root, &sb) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: %s: %s", root,
                            strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "image_folder: %s is not a folder", root);
    if (!(out->root = strdup(root)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "image_folder: out of memory");
    fg_status st = find_classes(out, err);
    if (st != FG_OK)
        image_index_free(out);
    return st;
}

fg_status image_index_build(const char *root, image_index *out, fg_error *err)
{
    fg_status st = image_index_classes(root, out, err);
    for (int32_t c = 0; st == FG_OK && c < out->num_classes; c++) {
        int64_t first = out->count;
        st = walk(out, out->classes[c], c, 0, err);
        if (st == FG_OK && out->count == first)
            st = fg_error_set(err, FG_INVALID_ARGUMENT,
                              "image_folder: class folder %s/%s holds no .png, .jpg or .jpeg "
                              "file (an empty class: add images or remove the folder)",
                              root, out->classes[c]);
        if (st == FG_OK)
            st = sort_range(out, first, out->count, err);
    }
    if (st != FG_OK)
        image_index_free(out);
    return st;
}

void image_index_free(image_index *ix)
{
    for (int32_t c = 0; ix->classes && c < ix->num_classes; c++)
        free(ix->classes[c]);
    free(ix->classes);
    free(ix->entries);
    free(ix->names);
    free(ix->root);
    memset(ix, 0, sizeof *ix);
}

int image_index_path(const image_index *ix, int64_t i, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/%s", ix->root, ix->names + ix->entries[i].rel);
    return n >= 0 && (size_t)n < size;
}
