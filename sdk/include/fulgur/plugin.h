/* fulgur plugin ABI, major version 1.
 *
 * A plugin is a shared object named fulgur-<kind>-<name>.so that exports exactly one
 * symbol: the constant descriptor `fulgur_plugin_v1` (FG_PLUGIN_ENTRY). The host reads
 * the descriptor before running any plugin code, checks magic, sizes, versions, kind and
 * name, validates the user's options against the declared schema, and only then calls
 * init(). Structs are only ever extended by appending fields; a reader touches a field
 * only when offsetof + sizeof <= struct_size. A NULL function means "not supported".
 *
 * Thread rules: init/deinit are called from the host's main thread, once per instance.
 * Host services may be called from any thread unless noted otherwise. */
#ifndef FULGUR_PLUGIN_H
#define FULGUR_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FG_PLUGIN_MAGIC 0x464C4752u /* "FLGR" */
#define FG_ABI_MAJOR 1
#define FG_ABI_MINOR 11

#define FG_PLUGIN_ENTRY fulgur_plugin_v1
#define FG_PLUGIN_ENTRY_NAME "fulgur_plugin_v1"
/* Symbol prefix a host looks for to name a plugin built for another major precisely. */
#define FG_PLUGIN_ENTRY_PREFIX "fulgur_plugin_v"

#if defined(_WIN32)
#define FG_PLUGIN_EXPORT __declspec(dllexport)
#else
#define FG_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- errors ------------------------------------------------------------------------ */

typedef enum fg_status {
    FG_OK = 0,
    FG_UNAVAILABLE = 1,      /* "skip me": e.g. a CUDA backend on a machine without a GPU */
    FG_INCOMPATIBLE = 2,     /* versions or sizes do not match */
    FG_INVALID_ARGUMENT = 3, /* bad input from the user or the caller */
    FG_NOT_FOUND = 4,
    FG_OUT_OF_MEMORY = 5,
    FG_BACKEND_ERROR = 6,    /* a device library reported an error */
    FG_INTERNAL = 7,         /* a bug */
    FG_FATAL = 8,            /* the process cannot go on (device lost, peer died) */
    FG_IO_ERROR = 9          /* 1.4: a file could not be written for lack of space or a device
                              * fault (ENOSPC, EDQUOT, EFBIG, EIO, EROFS): exit 4, not 2 */
} fg_status;

#define FG_ERROR_MESSAGE_MAX 512

/* Caller-owned; a callee that fails fills it. */
typedef struct fg_error {
    fg_status status;
    char message[FG_ERROR_MESSAGE_MAX];
} fg_error;

#if defined(__GNUC__)
#define FG_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define FG_PRINTF(fmt, args)
#endif

/* A message of n >= FG_ERROR_MESSAGE_MAX bytes into msg, shortened in the middle ("head
 * ... tail"): the reason, at the end, survives a long path before it. No UTF-8 sequence is
 * split. */
static inline void fg_error_shorten_(char *msg, const char *full, size_t n)
{
    static const char mark[] = " ... ";
    size_t keep = FG_ERROR_MESSAGE_MAX - sizeof mark; /* bytes of the message kept */
    size_t head = keep / 3, from = n - (keep - head);
    while (head > 0 && ((unsigned char)full[head] & 0xC0) == 0x80)
        head--;
    while (from < n && ((unsigned char)full[from] & 0xC0) == 0x80)
        from++;
    memcpy(msg, full, head);
    memcpy(msg + head, mark, sizeof mark - 1);
    memcpy(msg + head + sizeof mark - 1, full + from, n - from + 1);
}

/* Fills err (when not NULL) and returns status, so a callee can `return fg_error_set(...)`.
 * A message longer than the buffer loses its middle, not its end. */
static inline FG_PRINTF(3, 4) fg_status fg_error_set(fg_error *err, fg_status status,
                                                     const char *fmt, ...)
{
    if (err) {
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        err->status = status;
        int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
        char *full = n >= (int)sizeof err->message ? (char *)malloc((size_t)n + 1) : NULL;
        if (full && vsnprintf(full, (size_t)n + 1, fmt, again) == n)
            fg_error_shorten_(err->message, full, (size_t)n);
        free(full);
        va_end(again);
        va_end(ap);
    }
    return status;
}

static inline const char *fg_status_name(fg_status s)
{
    switch (s) {
    case FG_OK: return "ok";
    case FG_UNAVAILABLE: return "unavailable";
    case FG_INCOMPATIBLE: return "incompatible";
    case FG_INVALID_ARGUMENT: return "invalid argument";
    case FG_NOT_FOUND: return "not found";
    case FG_OUT_OF_MEMORY: return "out of memory";
    case FG_BACKEND_ERROR: return "backend error";
    case FG_INTERNAL: return "internal error";
    case FG_FATAL: return "fatal";
    case FG_IO_ERROR: return "I/O error";
    }
    return "unknown status";
}

/* ---- plugin kinds ------------------------------------------------------------------ */

typedef enum fg_plugin_kind {
    FG_KIND_BACKEND = 1,
    FG_KIND_PRECISION = 2,
    FG_KIND_STRATEGY = 3,
    FG_KIND_COMM = 4,
    FG_KIND_DATA = 5,
    FG_KIND_CALLBACK = 6
} fg_plugin_kind;

#define FG_KIND_FIRST FG_KIND_BACKEND
#define FG_KIND_LAST FG_KIND_CALLBACK

/* ---- option schemas ---------------------------------------------------------------- */

typedef enum fg_option_type {
    FG_OPT_BOOL = 1,   /* true|false|1|0|yes|no|on|off */
    FG_OPT_INT = 2,    /* 64-bit signed, range [min, max] */
    FG_OPT_FLOAT = 3,  /* double, range [min, max] */
    FG_OPT_STRING = 4,
    FG_OPT_ENUM = 5,   /* one of `choices`, '|'-separated */
    FG_OPT_LIST = 6    /* comma-separated strings */
} fg_option_type;

#define FG_OPT_REQUIRED NULL /* as default_value: the user must set the key */

typedef struct fg_option {
    const char *key;
    uint32_t type;             /* fg_option_type */
    const char *default_value; /* as written in an INI file; NULL: required */
    double min;                /* INT/FLOAT: inclusive range; ignored when min > max */
    double max;
    const char *choices;       /* ENUM: "a|b|c" */
    const char *help;          /* one line */
} fg_option;

/* ---- host services ----------------------------------------------------------------- */

typedef enum fg_log_level { FG_LOG_ERROR = 0, FG_LOG_WARN = 1, FG_LOG_INFO = 2, FG_LOG_DEBUG = 3 } fg_log_level;

typedef struct fg_host fg_host;

/* One host table per plugin instance; it outlives the instance. Option getters read the
 * instance's own config section, already validated against its schema with defaults
 * applied; they answer FG_NOT_FOUND for a key the schema does not declare. */
struct fg_host {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
    const char *section; /* the config section this instance was configured from */

    void (*log)(const fg_host *host, int level, const char *fmt, ...) FG_PRINTF(3, 4);

    fg_status (*get_bool)(const fg_host *host, const char *key, int *out);
    fg_status (*get_int)(const fg_host *host, const char *key, int64_t *out);
    fg_status (*get_float)(const fg_host *host, const char *key, double *out);
    /* The string is owned by the host and lives as long as the instance. */
    fg_status (*get_string)(const fg_host *host, const char *key, const char **out);

    /* Aligned host memory; align is a power of two. Returns NULL when out of memory. */
    void *(*aligned_alloc)(const fg_host *host, size_t align, size_t size);
    void (*aligned_free)(const fg_host *host, void *ptr);

    /* Metrics sink: a named scalar at a global step. During a fit, what a backend,
     * precision or strategy plugin reports is averaged by the trainer over the logging
     * window and carried on the next TRAIN_STEP_END event: names starting "time/" as
     * seconds per optimizer step (the window's sum over its steps), others as the mean of
     * the reports. A callback's reports are only logged (at debug level). Pass the same
     * (literal) name every time: the trainer keys its slots on it. */
    void (*metric)(const fg_host *host, const char *name, double value, int64_t step);

    /* The instance of another configured plugin of `kind` (a strategy asks for its backend
     * and comm): its kind vtable and instance state. FG_NOT_FOUND when none is configured. */
    fg_status (*find_plugin)(const fg_host *host, uint32_t kind, const void **vtable,
                             void **state, fg_error *err);

    /* The run's whole configuration as resolved (every section and key,
     * command-line overrides applied, as saved in the run folder's config.ini): entry
     * `index` in file order, FG_NOT_FOUND past the last. The strings are the host's and
     * live as long as the instance. For loggers of hyperparameters. */
    fg_status (*config_entry)(const fg_host *host, size_t index, const char **section,
                              const char **key, const char **value);
};

/* ---- the descriptor ---------------------------------------------------------------- */

typedef struct fg_plugin {
    uint32_t magic;          /* FG_PLUGIN_MAGIC */
    uint32_t struct_size;    /* sizeof(fg_plugin) as the plugin was built */
    uint16_t abi_major;      /* FG_ABI_MAJOR */
    uint16_t abi_minor;      /* FG_ABI_MINOR the plugin was built against */
    uint16_t min_host_minor; /* oldest host minor whose fields this plugin needs */
    uint16_t kind;           /* fg_plugin_kind */
    const char *name;        /* must match the file name fulgur-<kind>-<name>.so */
    const char *version;     /* the plugin's own version, "1.0.0" */
    const char *description; /* one line */
    const fg_option *options; /* schema of the plugin's config keys */
    uint32_t option_count;
    uint32_t option_size;    /* sizeof(fg_option) as the plugin was built */

    /* Creates an instance. The host table outlives it. Must not call exit(). */
    fg_status (*init)(const fg_host *host, void **state, fg_error *err);
    void (*deinit)(void *state);
    /* The kind's vtable (fg_backend_vtable, ...), starting with its own struct_size. */
    const void *vtable;
} fg_plugin;

/* Fills the fixed part of a descriptor. Use in the plugin's one exported definition
 * (FG_PLUGIN_DEFINE below writes it for you):
 *   FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
 *       FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0), .name = "...", ... }; */
#define FG_PLUGIN_HEADER(kind_, min_host_minor_)                                          \
    .magic = FG_PLUGIN_MAGIC, .struct_size = sizeof(fg_plugin), .abi_major = FG_ABI_MAJOR, \
    .abi_minor = FG_ABI_MINOR, .min_host_minor = (min_host_minor_), .kind = (kind_)

#define FG_PLUGIN_OPTIONS(array_)                                                          \
    .options = (array_), .option_count = (uint32_t)(sizeof(array_) / sizeof((array_)[0])),  \
    .option_size = sizeof(fg_option)

/* No config keys besides `name`: the descriptor's options left empty. */
#define FG_PLUGIN_NO_OPTIONS .options = NULL, .option_count = 0

/* Defines the plugin's one exported descriptor in one statement (source level only: it
 * expands to the designated initialiser above, so the descriptor's bytes are those a
 * plugin writes by hand; plugins that spell it out keep building):
 *   FG_PLUGIN_DEFINE(FG_KIND_COMM, 0, "mpi", "1.0.0",
 *                    "one line: what the plugin does",
 *                    FG_PLUGIN_OPTIONS(options), mpi_init, mpi_deinit, &vtable);
 * options_ is FG_PLUGIN_OPTIONS(table) or FG_PLUGIN_NO_OPTIONS. */
#define FG_PLUGIN_DEFINE(kind_, min_host_minor_, name_, version_, description_, options_,   \
                         init_, deinit_, vtable_)                                          \
    FG_PLUGIN_DEFINE_(kind_, min_host_minor_, name_, version_, description_, init_, deinit_, \
                      vtable_, options_)

/* FG_PLUGIN_DEFINE's body, the options last: a macro that passes FG_PLUGIN_OPTIONS(t) on
 * hands over its expansion, three designated initialisers, which only a trailing `...`
 * takes whole. */
#define FG_PLUGIN_DEFINE_(kind_, min_host_minor_, name_, version_, description_, init_,      \
                          deinit_, vtable_, ...)                                            \
    FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {                                   \
        FG_PLUGIN_HEADER(kind_, min_host_minor_), .name = (name_), .version = (version_),  \
        .description = (description_), __VA_ARGS__, .init = (init_), .deinit = (deinit_),  \
        .vtable = (vtable_)}

/* The same with the kind's vtable written in the statement: vtable_type_ is the kind's
 * vtable struct, the trailing arguments its entries as designated initialisers
 * (struct_size is filled in):
 *   FG_PLUGIN_DEFINE_VTABLE(fg_comm_vtable, FG_KIND_COMM, 0, "mpi", "1.0.0",
 *                           "one line: what the plugin does",
 *                           FG_PLUGIN_OPTIONS(options), mpi_init, mpi_deinit,
 *                           .topology = mpi_topology,
 *                           .all_reduce = mpi_all_reduce);
 * No preprocessor lines may stand among the entries (a macro's arguments). */
#define FG_PLUGIN_DEFINE_VTABLE(vtable_type_, kind_, min_host_minor_, name_, version_,       \
                                description_, options_, init_, deinit_, ...)                \
    static const vtable_type_ fg_plugin_vtable = {.struct_size = sizeof(vtable_type_),       \
                                                  __VA_ARGS__};                              \
    FG_PLUGIN_DEFINE_(kind_, min_host_minor_, name_, version_, description_, init_,        \
                      deinit_, &fg_plugin_vtable, options_)

/* True when a struct whose first member is its struct_size has the field. */
#define FG_HAS_FIELD(ptr, type, field)                                                     \
    ((ptr) != NULL && offsetof(type, field) + sizeof(((type *)0)->field) <= (ptr)->struct_size)

#ifdef __cplusplus
}
#endif
#endif
