/* One source for every ABI test fixture: compile definitions make each a well-formed
 * plugin or one broken in exactly one way.
 *   FIX_NAME            descriptor name (string)            required
 *   FIX_KIND            descriptor kind                      FG_KIND_CALLBACK
 *   FIX_MAGIC, FIX_MAJOR, FIX_MINOR, FIX_MIN_HOST_MINOR, FIX_STRUCT_SIZE   header fields
 *   FIX_ENTRY           the exported symbol                  fulgur_plugin_v1
 *   FIX_EXTENDED        built "against a newer minor": descriptor and options carry
 *                       appended fields, struct_size and option_size say so
 *   FIX_INIT_STATUS, FIX_INIT_MESSAGE   what init returns
 *   FIX_MARKER          init creates the file named by the host's "marker" option
 *   FIX_USE_MISSING     init calls into libfgmissing.so (linked, then not findable)
 *   FIX_DESCRIPTION     one line */
#include <stdio.h>

#include "fulgur/sdk.h"

#ifndef FIX_NAME
#error "FIX_NAME is required"
#endif
#ifndef FIX_KIND
#define FIX_KIND FG_KIND_CALLBACK
#endif
#ifndef FIX_MAGIC
#define FIX_MAGIC FG_PLUGIN_MAGIC
#endif
#ifndef FIX_MAJOR
#define FIX_MAJOR FG_ABI_MAJOR
#endif
#ifndef FIX_MINOR
#define FIX_MINOR FG_ABI_MINOR
#endif
#ifndef FIX_MIN_HOST_MINOR
#define FIX_MIN_HOST_MINOR 0
#endif
#ifndef FIX_ENTRY
#define FIX_ENTRY fulgur_plugin_v1
#endif
#ifndef FIX_INIT_STATUS
#define FIX_INIT_STATUS FG_OK
#endif
#ifndef FIX_INIT_MESSAGE
#define FIX_INIT_MESSAGE ""
#endif
#ifndef FIX_DESCRIPTION
#define FIX_DESCRIPTION "abi test fixture"
#endif

#ifdef FIX_USE_MISSING
void fg_missing_dependency(void);
#endif

static fg_status fixture_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
#ifdef FIX_MARKER
    /* Proof that init ran: the tests check that loading and scanning never call it. */
    const char *marker = NULL;
    if (host->get_string == NULL || host->get_string(host, "marker", &marker) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fixture: no marker option");
    FILE *f = fopen(marker, "w");
    if (f == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fixture: cannot create %s", marker);
    fclose(f);
#endif
#ifdef FIX_USE_MISSING
    fg_missing_dependency();
#endif
    if (FIX_INIT_STATUS != FG_OK)
        return fg_error_set(err, FIX_INIT_STATUS, "%s", FIX_INIT_MESSAGE);
    return FG_OK;
}

static void fixture_deinit(void *state)
{
    (void)state;
}

static const fg_callback_vtable fixture_vtable = {
    .struct_size = sizeof(fg_callback_vtable),
    .on_event = NULL,
};

#ifdef FIX_EXTENDED
/* What a plugin built against a later minor looks like to this host: the same structs
 * with fields appended. */
typedef struct fixture_option {
    fg_option base;
    const char *future_unit;
} fixture_option;

typedef struct fixture_plugin {
    fg_plugin base;
    uint64_t future_flags;
    const void *future_table;
} fixture_plugin;

static const fixture_option fixture_options[] = {
    {{.key = "patience", .type = FG_OPT_INT, .default_value = "3", .min = 0, .max = 100,
      .help = "epochs without improvement"}, "epochs"},
    {{.key = "mode", .type = FG_OPT_ENUM, .default_value = "min", .choices = "min|max",
      .help = "whether lower or higher is better"}, NULL},
};

FG_PLUGIN_EXPORT const fixture_plugin FIX_ENTRY = {
    .base = {
        .magic = FIX_MAGIC,
        .struct_size = sizeof(fixture_plugin),
        .abi_major = FIX_MAJOR,
        .abi_minor = FIX_MINOR,
        .min_host_minor = FIX_MIN_HOST_MINOR,
        .kind = FIX_KIND,
        .name = FIX_NAME,
        .version = "1.2.3",
        .description = FIX_DESCRIPTION,
        .options = &fixture_options[0].base,
        .option_count = 2,
        .option_size = sizeof(fixture_option),
        .init = fixture_init,
        .deinit = fixture_deinit,
        .vtable = &fixture_vtable,
    },
    .future_flags = 1,
    .future_table = NULL,
};
#else
#ifndef FIX_STRUCT_SIZE
#define FIX_STRUCT_SIZE sizeof(fg_plugin)
#endif

static const fg_option fixture_options[] = {
    {.key = "patience", .type = FG_OPT_INT, .default_value = "3", .min = 0, .max = 100,
     .help = "epochs without improvement"},
    {.key = "mode", .type = FG_OPT_ENUM, .default_value = "min", .choices = "min|max",
     .help = "whether lower or higher is better"},
    {.key = "marker", .type = FG_OPT_STRING, .default_value = "", .help = "test marker file"},
};

FG_PLUGIN_EXPORT const fg_plugin FIX_ENTRY = {
    .magic = FIX_MAGIC,
    .struct_size = FIX_STRUCT_SIZE,
    .abi_major = FIX_MAJOR,
    .abi_minor = FIX_MINOR,
    .min_host_minor = FIX_MIN_HOST_MINOR,
    .kind = FIX_KIND,
    .name = FIX_NAME,
    .version = "1.2.3",
    .description = FIX_DESCRIPTION,
    FG_PLUGIN_OPTIONS(fixture_options),
    .init = fixture_init,
    .deinit = fixture_deinit,
    .vtable = &fixture_vtable,
};
#endif
