/* Plugin loader: the search path, on-demand loading by kind and name, descriptor checks
 * and the scan behind `fulgur plugins`.
 *
 * Invariants: a descriptor is read, field by field within its declared struct_size, before
 * any of the plugin's functions could run, and no check calls into the plugin. Libraries
 * are never closed: descriptors, names and vtables point into them for the life of the
 * process. Status mapping: version and size mismatches are FG_INCOMPATIBLE, a missing
 * file FG_NOT_FOUND, a library that cannot be opened on this machine (an unresolved
 * dependency) or a file shadowed by an earlier one FG_UNAVAILABLE, anything else
 * malformed FG_INVALID_ARGUMENT. */
#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core_util.h"
#include "elf_check.h"
#include "loader.h"

/* A descriptor, vtable or option larger than this is garbage, not a future minor. */
#define FG_ABI_STRUCT_MAX 65536u
/* More options than this is a corrupt count, not a schema. */
#define FG_OPTION_COUNT_MAX 4096u
/* The highest other major a v1 host probes for, only to name it in the refusal. */
#define FG_PROBED_MAJOR_MAX 9

/* The v1.0 layouts: the least a plugin of this major can have been built with. */
#define FG_PLUGIN_V1_0_SIZE (offsetof(fg_plugin, vtable) + sizeof(void *))
#define FG_OPTION_V1_0_SIZE (offsetof(fg_option, help) + sizeof(const char *))

#define FG_PLUGIN_FILE_PREFIX "fulgur-"
#define FG_PLUGIN_FILE_SUFFIX ".so"

typedef struct fg_loaded_plugin {
    int kind;
    char *name;
    char *path;
    const fg_plugin *desc;
} fg_loaded_plugin;

struct fg_loader {
    char **paths;
    size_t path_count, path_cap;
    fg_loaded_plugin *plugins;
    size_t plugin_count, plugin_cap;
};

/* One scan's state: the files seen so far (the first folder that has a file name wins)
 * and where to report. */
typedef struct fg_scan_seen {
    char *file_name;
    char *path;
} fg_scan_seen;

typedef struct fg_scan_state {
    fg_scan_seen *seen;
    size_t seen_count, seen_cap;
    fg_loader_visit_fn visit;
    void *user;
} fg_scan_state;

/* ---- small helpers ----------------------------------------------------------------- */

/* Makes room for one more element; 0 when out of memory. */
static int grow(void **array, size_t *cap, size_t count, size_t elem_size)
{
    if (count < *cap)
        return 1;
    size_t new_cap = *cap ? *cap * 2 : 8;
    void *p = realloc(*array, new_cap * elem_size);
    if (p == NULL)
        return 0;
    *array = p;
    *cap = new_cap;
    return 1;
}

/* dir + "/" + file into out; 0 when it does not fit. */
static int join_path(char *out, size_t out_size, const char *dir, const char *file)
{
    int n = snprintf(out, out_size, "%s/%s", dir, file);
    return n >= 0 && (size_t)n < out_size;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- create / destroy / search path ------------------------------------------------ */

fg_status fg_loader_create(fg_loader **out, fg_error *err)
{
    if (out == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_loader_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "plugin loader: out of memory");
    return FG_OK;
}

void fg_loader_destroy(fg_loader *loader)
{
    if (loader == NULL)
        return;
    for (size_t i = 0; i < loader->path_count; i++)
        free(loader->paths[i]);
    free(loader->paths);
    for (size_t i = 0; i < loader->plugin_count; i++) {
        free(loader->plugins[i].name);
        free(loader->plugins[i].path);
    }
    free(loader->plugins);
    free(loader);
}

static fg_status append_path(fg_loader *loader, const char *dir, fg_error *err)
{
    if (!grow((void **)&loader->paths, &loader->path_cap, loader->path_count,
              sizeof *loader->paths))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "plugin folder %s: out of memory", dir);
    char *copy = strdup(dir);
    if (copy == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "plugin folder %s: out of memory", dir);
    /* "dir/" and "dir" are one folder; messages read better without the slash. */
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    loader->paths[loader->path_count++] = copy;
    return FG_OK;
}

fg_status fg_loader_add_path(fg_loader *loader, const char *dir, fg_error *err)
{
    if (loader == NULL || dir == NULL || dir[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "plugin folder: empty path");
    /* A folder the user named must be there: a typo would otherwise search nothing. */
    struct stat st;
    if (stat(dir, &st) != 0)
        return fg_error_set(err, FG_NOT_FOUND, "plugin folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "plugin folder %s: not a folder", dir);
    for (size_t i = 0; i < loader->path_count; i++)
        if (strcmp(loader->paths[i], dir) == 0)
            return FG_OK;
    return append_path(loader, dir, err);
}

/* True when `real` (a resolved path) is already on the search path, spelled any way. */
static int has_folder(const fg_loader *loader, const char *real)
{
    char other[PATH_MAX];
    for (size_t i = 0; i < loader->path_count; i++) {
        if (strcmp(loader->paths[i], real) == 0)
            return 1;
        if (realpath(loader->paths[i], other) != NULL && strcmp(other, real) == 0)
            return 1;
    }
    return 0;
}

/* A default folder is optional: one that does not exist, or is already there, is skipped. */
static fg_status add_default_path(fg_loader *loader, const char *dir, fg_error *err)
{
    char real[PATH_MAX];
    if (dir[0] == '\0' || realpath(dir, real) == NULL || !fg_is_directory(real))
        return FG_OK;
    if (has_folder(loader, real))
        return FG_OK;
    return append_path(loader, real, err);
}

static fg_status add_env_paths(fg_loader *loader, fg_error *err)
{
    const char *env = secure_getenv("FULGUR_PLUGIN_PATH");
    if (env == NULL)
        return FG_OK;
    char dir[PATH_MAX];
    while (*env) {
        const char *end = strchr(env, ':');
        size_t n = end ? (size_t)(end - env) : strlen(env);
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, env, n);
            dir[n] = '\0';
            fg_status st = add_default_path(loader, dir, err);
            if (st != FG_OK)
                return st;
        }
        env += n + (end ? 1 : 0);
    }
    return FG_OK;
}

static fg_status add_home_path(fg_loader *loader, fg_error *err)
{
    const char *home = secure_getenv("HOME");
    char dir[PATH_MAX];
    if (home == NULL || home[0] == '\0' ||
        !join_path(dir, sizeof dir, home, ".local/lib/fulgur/plugins"))
        return FG_OK;
    return add_default_path(loader, dir, err);
}

/* The folder next to the running libfulgur, so a relocated install (or the build tree,
 * which mirrors it) finds its own plugins. */
static fg_status add_library_relative_path(fg_loader *loader, fg_error *err)
{
#ifdef FULGUR_PLUGIN_REL_DIR
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&fg_loader_add_default_paths, &info) == 0 ||
        info.dli_fname == NULL)
        return FG_OK;
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash == NULL)
        return FG_OK;
    char lib_dir[PATH_MAX], dir[PATH_MAX];
    size_t n = (size_t)(slash - info.dli_fname);
    if (n == 0 || n >= sizeof lib_dir)
        return FG_OK;
    memcpy(lib_dir, info.dli_fname, n);
    lib_dir[n] = '\0';
    if (!join_path(dir, sizeof dir, lib_dir, FULGUR_PLUGIN_REL_DIR))
        return FG_OK;
    return add_default_path(loader, dir, err);
#else
    (void)loader;
    (void)err;
    return FG_OK;
#endif
}

fg_status fg_loader_add_default_paths(fg_loader *loader, fg_error *err)
{
    if (loader == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_loader_add_default_paths: no loader");
    fg_status st = add_env_paths(loader, err);
    if (st == FG_OK)
        st = add_home_path(loader, err);
    if (st == FG_OK)
        st = add_library_relative_path(loader, err);
#ifdef FULGUR_INSTALL_PLUGIN_DIR
    if (st == FG_OK)
        st = add_default_path(loader, FULGUR_INSTALL_PLUGIN_DIR, err);
#endif
    return st;
}

size_t fg_loader_path_count(const fg_loader *loader)
{
    return loader ? loader->path_count : 0;
}

const char *fg_loader_path(const fg_loader *loader, size_t i)
{
    return loader && i < loader->path_count ? loader->paths[i] : NULL;
}

/* ---- descriptor checks ------------------------------------------------------------- */

static fg_status check_option(const fg_option *opt, uint32_t index, const char *path,
                              fg_error *err)
{
    if (opt->key == NULL || opt->key[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: option #%u has no key", path,
                            index);
    if (opt->type < FG_OPT_BOOL || opt->type > FG_OPT_LIST)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: option %s has unknown type %u",
                            path, opt->key, opt->type);
    if (opt->type == FG_OPT_ENUM && (opt->choices == NULL || opt->choices[0] == '\0'))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: option %s is an enum without choices", path, opt->key);
    return FG_OK;
}

/* The option table is walked with the plugin's own stride, option_size, so a plugin built
 * against a newer fg_option (fields appended) reads correctly. */
static fg_status check_options(const fg_plugin *p, const char *path, fg_error *err)
{
    if (p->option_count == 0)
        return FG_OK;
    if (p->option_size < FG_OPTION_V1_0_SIZE)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: option_size %u is smaller than a v1.0 fg_option (%zu bytes)",
                            path, p->option_size, FG_OPTION_V1_0_SIZE);
    if (p->option_size > FG_ABI_STRUCT_MAX)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: option_size %u is absurd (more than %u bytes)", path,
                            p->option_size, FG_ABI_STRUCT_MAX);
    if (p->options == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: option_count is %u but the option table is NULL", path,
                            p->option_count);
    if (p->option_count > FG_OPTION_COUNT_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: option_count %u is absurd (more than %u)", path,
                            p->option_count, FG_OPTION_COUNT_MAX);
    const unsigned char *base = (const unsigned char *)p->options;
    for (uint32_t i = 0; i < p->option_count; i++) {
        const fg_option *opt = (const fg_option *)(base + (size_t)i * p->option_size);
        fg_status st = check_option(opt, i, path, err);
        if (st != FG_OK)
            return st;
    }
    return FG_OK;
}

static fg_status check_header(const fg_plugin *p, const char *path, fg_error *err)
{
    if (p->magic != FG_PLUGIN_MAGIC)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: bad magic 0x%08X, expected 0x%08X (not a fulgur descriptor)",
                            path, (unsigned)p->magic, (unsigned)FG_PLUGIN_MAGIC);
    if (p->struct_size < FG_PLUGIN_V1_0_SIZE)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: descriptor truncated: struct_size %u, a v1.0 descriptor has "
                            "%zu bytes", path, p->struct_size, FG_PLUGIN_V1_0_SIZE);
    if (p->struct_size > FG_ABI_STRUCT_MAX)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: descriptor struct_size %u is absurd (more than %u bytes)",
                            path, p->struct_size, FG_ABI_STRUCT_MAX);
    if (p->abi_major != FG_ABI_MAJOR)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: built for ABI major %u; this host speaks major %d", path,
                            (unsigned)p->abi_major, FG_ABI_MAJOR);
    /* An older abi_minor is fine: fields are only appended, and the plugin says through
     * min_host_minor which of the host's fields it relies on. */
    if (p->min_host_minor > FG_ABI_MINOR)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: needs host ABI %d.%u, this host is %d.%d", path, FG_ABI_MAJOR,
                            (unsigned)p->min_host_minor, FG_ABI_MAJOR, FG_ABI_MINOR);
    return FG_OK;
}

static fg_status check_identity(const fg_plugin *p, const char *path, int expected_kind,
                                const char *expected_name, fg_error *err)
{
    const char *kind = fg_kind_name(p->kind);
    if (kind == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: unknown plugin kind %u", path,
                            (unsigned)p->kind);
    if (expected_kind != 0 && p->kind != expected_kind) {
        const char *expected = fg_kind_name(expected_kind);
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: descriptor declares kind %s but the file name says %s", path,
                            kind, expected ? expected : "(unknown)");
    }
    if (p->name == NULL || p->name[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: descriptor has no name", path);
    if (expected_name != NULL && strcmp(p->name, expected_name) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: descriptor names the plugin '%s' but the file name says '%s'",
                            path, p->name, expected_name);
    return FG_OK;
}

static fg_status check_entry_points(const fg_plugin *p, const char *path, fg_error *err)
{
    if (p->init == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: descriptor has no init function",
                            path);
    if (p->vtable == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: descriptor has no vtable", path);
    /* Every kind's vtable starts with its own struct_size. */
    uint32_t vtable_size = *(const uint32_t *)p->vtable;
    if (vtable_size == 0 || vtable_size > FG_ABI_STRUCT_MAX)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: vtable struct_size %u is not a size (expected 1..%u)", path,
                            vtable_size, FG_ABI_STRUCT_MAX);
    return FG_OK;
}

fg_status fg_loader_check_descriptor(const fg_plugin *plugin, const char *path,
                                     int expected_kind, const char *expected_name,
                                     fg_error *err)
{
    if (path == NULL)
        path = "(unknown file)";
    if (plugin == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: descriptor is NULL", path);
    /* The header first: nothing past it may be read until struct_size vouches for it. */
    fg_status st = check_header(plugin, path, err);
    if (st == FG_OK)
        st = check_identity(plugin, path, expected_kind, expected_name, err);
    if (st == FG_OK)
        st = check_entry_points(plugin, path, err);
    if (st == FG_OK)
        st = check_options(plugin, path, err);
    return st;
}

/* ---- opening one file -------------------------------------------------------------- */

/* Size of the ELF symbol at sym, 0 when unknown. */
static size_t symbol_size(const void *sym)
{
    Dl_info info;
    const ElfW(Sym) *elf = NULL;
    if (dladdr1(sym, &info, (void **)&elf, RTLD_DL_SYMENT) == 0 || elf == NULL ||
        info.dli_saddr != sym)
        return 0;
    return (size_t)elf->st_size;
}

/* No v1 entry: name the major it was built for when it exports another one. */
static fg_status refuse_missing_entry(void *handle, const char *path, fg_error *err)
{
    char symbol[32];
    for (int major = 2; major <= FG_PROBED_MAJOR_MAX; major++) {
        if (major == FG_ABI_MAJOR)
            continue;
        snprintf(symbol, sizeof symbol, FG_PLUGIN_ENTRY_PREFIX "%d", major);
        if (dlsym(handle, symbol) != NULL)
            return fg_error_set(err, FG_INCOMPATIBLE,
                                "%s: built for ABI major %d; this host speaks major %d", path,
                                major, FG_ABI_MAJOR);
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "%s: no symbol " FG_PLUGIN_ENTRY_NAME
                        " (not a fulgur plugin, or built for another ABI)", path);
}

/* Opens a library, finds its descriptor and checks it. The library stays open either way:
 * nothing is ever unloaded. */
static fg_status open_plugin(const char *path, int kind, const char *name,
                             const fg_plugin **out, fg_error *err)
{
    /* dlopen of a truncated file dies of SIGBUS, so the file is vouched for first. */
    fg_status elf = fg_elf_check_file(path, err);
    if (elf != FG_OK)
        return elf;
    dlerror();
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        return fg_error_set(err, FG_UNAVAILABLE, "%s: cannot be opened: %s", path,
                            why ? why : "dlopen failed");
    }
    const fg_plugin *desc = dlsym(handle, FG_PLUGIN_ENTRY_NAME);
    if (desc == NULL)
        return refuse_missing_entry(handle, path, err);
    /* The ELF symbol size, where known, bounds what may be read at all. */
    size_t have = symbol_size(desc);
    if (have != 0 && have < FG_PLUGIN_V1_0_SIZE)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: symbol " FG_PLUGIN_ENTRY_NAME " has %zu bytes, a v1.0 "
                            "descriptor has %zu", path, have, FG_PLUGIN_V1_0_SIZE);
    fg_status st = fg_loader_check_descriptor(desc, path, kind, name, err);
    if (st != FG_OK)
        return st;
    if (have != 0 && desc->struct_size > have)
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: descriptor declares struct_size %u but the symbol "
                            FG_PLUGIN_ENTRY_NAME " has %zu bytes", path, desc->struct_size,
                            have);
    *out = desc;
    return FG_OK;
}

static fg_loaded_plugin *find_loaded(fg_loader *loader, int kind, const char *name)
{
    for (size_t i = 0; i < loader->plugin_count; i++)
        if (loader->plugins[i].kind == kind && strcmp(loader->plugins[i].name, name) == 0)
            return &loader->plugins[i];
    return NULL;
}

static fg_status remember(fg_loader *loader, int kind, const char *name, const char *path,
                          const fg_plugin *desc, fg_loaded_plugin **out, fg_error *err)
{
    if (!grow((void **)&loader->plugins, &loader->plugin_cap, loader->plugin_count,
              sizeof *loader->plugins))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    fg_loaded_plugin *p = &loader->plugins[loader->plugin_count];
    p->kind = kind;
    p->name = strdup(name);
    p->path = strdup(path);
    p->desc = desc;
    if (p->name == NULL || p->path == NULL) {
        free(p->name);
        free(p->path);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    loader->plugin_count++;
    *out = p;
    return FG_OK;
}

/* ---- load by kind and name --------------------------------------------------------- */

static fg_status check_plugin_name(const char *kind, const char *name, fg_error *err)
{
    if (name == NULL || name[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s plugin: empty name", kind);
    if (strchr(name, '/') != NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s plugin '%s': a plugin name cannot contain '/'", kind, name);
    return FG_OK;
}

static fg_status refuse_not_found(const fg_loader *loader, const char *kind, const char *name,
                                  const char *file, fg_error *err)
{
    if (loader->path_count == 0)
        return fg_error_set(err, FG_NOT_FOUND,
                            "plugin %s.%s not found: no %s, the plugin search path is empty",
                            kind, name, file);
    char folders[FG_ERROR_MESSAGE_MAX];
    size_t used = 0;
    folders[0] = '\0';
    for (size_t i = 0; i < loader->path_count && used < sizeof folders; i++) {
        int n = snprintf(folders + used, sizeof folders - used, "%s%s", i ? ", " : "",
                         loader->paths[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return fg_error_set(err, FG_NOT_FOUND, "plugin %s.%s not found: no %s in %s", kind, name,
                        file, folders);
}

fg_status fg_loader_load(fg_loader *loader, int kind, const char *name,
                         const fg_plugin **plugin, const char **path, fg_error *err)
{
    if (loader == NULL || plugin == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_loader_load: no loader or output");
    *plugin = NULL;
    if (path)
        *path = NULL;
    const char *kind_name = fg_kind_name(kind);
    if (kind_name == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "unknown plugin kind %d", kind);
    fg_status st = check_plugin_name(kind_name, name, err);
    if (st != FG_OK)
        return st;

    fg_loaded_plugin *found = find_loaded(loader, kind, name);
    if (found == NULL) {
        char file[NAME_MAX + 1], full[PATH_MAX];
        int n = snprintf(file, sizeof file, FG_PLUGIN_FILE_PREFIX "%s-%s" FG_PLUGIN_FILE_SUFFIX,
                         kind_name, name);
        if (n < 0 || (size_t)n >= sizeof file)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s plugin '%s': name too long",
                                kind_name, name);
        size_t i = 0;
        for (; i < loader->path_count; i++)
            if (join_path(full, sizeof full, loader->paths[i], file) && fg_is_regular_file(full))
                break;
        if (i == loader->path_count)
            return refuse_not_found(loader, kind_name, name, file, err);
        const fg_plugin *desc = NULL;
        st = open_plugin(full, kind, name, &desc, err);
        if (st == FG_OK)
            st = remember(loader, kind, name, full, desc, &found, err);
        if (st != FG_OK)
            return st;
    }
    *plugin = found->desc;
    if (path)
        *path = found->path;
    return FG_OK;
}

/* ---- scan -------------------------------------------------------------------------- */

static int is_plugin_file_name(const char *name)
{
    return strncmp(name, FG_PLUGIN_FILE_PREFIX, strlen(FG_PLUGIN_FILE_PREFIX)) == 0 &&
           strlen(name) > strlen(FG_PLUGIN_FILE_PREFIX) + strlen(FG_PLUGIN_FILE_SUFFIX) &&
           ends_with(name, FG_PLUGIN_FILE_SUFFIX);
}

static int plugin_file_filter(const struct dirent *entry)
{
    return is_plugin_file_name(entry->d_name);
}

/* Splits "fulgur-<kind>-<name>.so" into kind and name (both in buf); 0 when it is not of
 * that form. The kind is everything up to the first '-': kind names have none. */
static int parse_file_name(const char *file, char *buf, size_t buf_size, const char **kind,
                           const char **name)
{
    size_t len = strlen(file) - strlen(FG_PLUGIN_FILE_PREFIX) - strlen(FG_PLUGIN_FILE_SUFFIX);
    if (len >= buf_size)
        return 0;
    memcpy(buf, file + strlen(FG_PLUGIN_FILE_PREFIX), len);
    buf[len] = '\0';
    char *dash = strchr(buf, '-');
    if (dash == NULL || dash == buf || dash[1] == '\0')
        return 0;
    *dash = '\0';
    *kind = buf;
    *name = dash + 1;
    return 1;
}

static void report(fg_loader_visit_fn visit, void *user, const char *path,
                   const fg_plugin *desc, fg_status status, const char *reason)
{
    if (visit == NULL)
        return;
    fg_plugin_file file = {.path = path, .desc = desc, .status = status, .reason = reason};
    visit(user, &file);
}

/* Opens (or finds already open) one file whose name was not shadowed, and reports it. */
static void scan_file(fg_loader *loader, const char *path, const char *file,
                      fg_loader_visit_fn visit, void *user)
{
    fg_error err = {FG_OK, ""};
    char buf[NAME_MAX + 1];
    const char *kind_name = NULL, *name = NULL;
    if (!parse_file_name(file, buf, sizeof buf, &kind_name, &name)) {
        fg_error_set(&err, FG_INVALID_ARGUMENT,
                     "%s: file name is not fulgur-<kind>-<name>.so", path);
        report(visit, user, path, NULL, err.status, err.message);
        return;
    }
    int kind = fg_kind_from_name(kind_name);
    if (kind == 0) {
        fg_error_set(&err, FG_INVALID_ARGUMENT,
                     "%s: unknown plugin kind '%s' in the file name (known: backend, "
                     "precision, strategy, comm, data, callback)", path, kind_name);
        report(visit, user, path, NULL, err.status, err.message);
        return;
    }
    /* The descriptor must match the file name, so a kind/name provided already is known
     * before the file is opened. */
    fg_loaded_plugin *known = find_loaded(loader, kind, name);
    if (known != NULL) {
        if (strcmp(known->path, path) == 0) {
            report(visit, user, path, known->desc, FG_OK, "");
            return;
        }
        fg_error_set(&err, FG_INVALID_ARGUMENT,
                     "%s: duplicate plugin %s.%s, already provided by %s", path, kind_name,
                     name, known->path);
        report(visit, user, path, NULL, err.status, err.message);
        return;
    }
    const fg_plugin *desc = NULL;
    fg_status st = open_plugin(path, kind, name, &desc, &err);
    if (st == FG_OK)
        st = remember(loader, kind, name, path, desc, &known, &err);
    if (st != FG_OK)
        report(visit, user, path, NULL, st, err.message);
    else
        report(visit, user, path, desc, FG_OK, "");
}

static const char *find_seen(const fg_scan_state *scan, const char *file)
{
    for (size_t i = 0; i < scan->seen_count; i++)
        if (strcmp(scan->seen[i].file_name, file) == 0)
            return scan->seen[i].path;
    return NULL;
}

static int remember_seen(fg_scan_state *scan, const char *file, const char *path)
{
    if (!grow((void **)&scan->seen, &scan->seen_cap, scan->seen_count, sizeof *scan->seen))
        return 0;
    char *file_copy = strdup(file), *path_copy = strdup(path);
    if (file_copy == NULL || path_copy == NULL) {
        free(file_copy);
        free(path_copy);
        return 0;
    }
    scan->seen[scan->seen_count].file_name = file_copy;
    scan->seen[scan->seen_count].path = path_copy;
    scan->seen_count++;
    return 1;
}

/* A directory, a dangling symlink or a device named like a plugin is said, not skipped. */
static void report_not_a_file(fg_scan_state *scan, const char *path)
{
    struct stat st;
    fg_error err;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) != 0)
        fg_error_set(&err, FG_NOT_FOUND, "%s: dangling symbolic link", path);
    else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        fg_error_set(&err, FG_INVALID_ARGUMENT, "%s: a folder, not a plugin file", path);
    else
        fg_error_set(&err, FG_INVALID_ARGUMENT, "%s: not a regular file", path);
    report(scan->visit, scan->user, path, NULL, err.status, err.message);
}

/* Scans one folder in name order. Returns 0 when out of memory. */
static int scan_folder(fg_loader *loader, const char *dir, fg_scan_state *scan)
{
    struct dirent **entries = NULL;
    int n = scandir(dir, &entries, plugin_file_filter, alphasort);
    if (n < 0)
        return 1; /* an unreadable or missing folder holds no plugins */
    int ok = 1;
    for (int i = 0; i < n; i++) {
        const char *file = entries[i]->d_name;
        char path[PATH_MAX];
        if (ok && join_path(path, sizeof path, dir, file) && !fg_is_regular_file(path)) {
            report_not_a_file(scan, path);
        } else if (ok && join_path(path, sizeof path, dir, file)) {
            const char *earlier = find_seen(scan, file);
            if (earlier != NULL) {
                fg_error err;
                fg_error_set(&err, FG_UNAVAILABLE, "%s: shadowed by %s", path, earlier);
                report(scan->visit, scan->user, path, NULL, err.status, err.message);
            } else if (remember_seen(scan, file, path)) {
                scan_file(loader, path, file, scan->visit, scan->user);
            } else {
                ok = 0;
            }
        }
        free(entries[i]);
    }
    free(entries);
    return ok;
}

void fg_loader_scan(fg_loader *loader, fg_loader_visit_fn visit, void *user)
{
    if (loader == NULL)
        return;
    fg_scan_state scan = {.visit = visit, .user = user};
    for (size_t i = 0; i < loader->path_count; i++)
        if (!scan_folder(loader, loader->paths[i], &scan))
            break;
    for (size_t i = 0; i < scan.seen_count; i++) {
        free(scan.seen[i].file_name);
        free(scan.seen[i].path);
    }
    free(scan.seen);
}
