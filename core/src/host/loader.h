/* Plugin loader: search path, on-demand loading by kind and name, descriptor checks.
 * Plugins are opened RTLD_NOW|RTLD_LOCAL and never unloaded. */
#ifndef FG_LOADER_H
#define FG_LOADER_H

#include "fulgur/plugin.h"

typedef struct fg_loader fg_loader;

/* "backend" for FG_KIND_BACKEND ...; NULL for an unknown kind. */
const char *fg_kind_name(int kind);
/* FG_KIND_* for a name, 0 when unknown. */
int fg_kind_from_name(const char *name);

fg_status fg_loader_create(fg_loader **out, fg_error *err);
/* Closes no library (plugins are never unloaded); frees the loader's bookkeeping. */
void fg_loader_destroy(fg_loader *loader);

/* Appends a folder to the search path; earlier folders win. A folder that does not exist
 * (FG_NOT_FOUND) or is not a folder (FG_INVALID_ARGUMENT) is refused: one the user named
 * must be there. */
fg_status fg_loader_add_path(fg_loader *loader, const char *dir, fg_error *err);
/* Appends the defaults after whatever was added: FULGUR_PLUGIN_PATH (':'-separated, read
 * with secure_getenv), ~/.local/lib/fulgur/plugins, then the install folder (the one next
 * to the running libfulgur, ../lib/fulgur/plugins relative to it, and the configured
 * install prefix). */
fg_status fg_loader_add_default_paths(fg_loader *loader, fg_error *err);
size_t fg_loader_path_count(const fg_loader *loader);
const char *fg_loader_path(const fg_loader *loader, size_t i);

/* Finds fulgur-<kind>-<name>.so in the search path (the first folder that has it wins),
 * opens it and checks its descriptor. Loading the same plugin twice returns the same
 * descriptor. On refusal: the status and a one-line message naming the file and why. */
fg_status fg_loader_load(fg_loader *loader, int kind, const char *name,
                         const fg_plugin **plugin, const char **path, fg_error *err);

/* Checks a descriptor without calling any of its functions: magic, struct_size, major,
 * min_host_minor against FG_ABI_MINOR, kind, the name against the file's, option_size,
 * the option table, init and vtable present, the vtable's struct_size. */
fg_status fg_loader_check_descriptor(const fg_plugin *plugin, const char *path,
                                     int expected_kind, const char *expected_name,
                                     fg_error *err);

/* One file seen by a scan: desc is NULL when it was refused (status, reason say why). */
typedef struct fg_plugin_file {
    const char *path;
    const fg_plugin *desc;
    fg_status status;
    const char *reason;
} fg_plugin_file;

typedef void (*fg_loader_visit_fn)(void *user, const fg_plugin_file *file);
/* Opens every fulgur-*.so in the search path and reports each, loaded or refused; a file
 * shadowed by one of the same name in an earlier folder is reported as refused, and so is
 * a folder, a dangling link or anything else not a regular file under such a name. Every
 * file is checked as ELF (elf_check.h) before dlopen. */
void fg_loader_scan(fg_loader *loader, fg_loader_visit_fn visit, void *user);

#endif
