/* The plugin loader against the fixture plugins: what loads, what is refused, with which
 * status and message, what a scan reports, and that no plugin code runs while loading.
 * usage: abi_loader SCRATCH_DIR   (a folder of this test's own: marker file, fake $HOME)
 * ABI_DIR_A and ABI_DIR_B are the fixture folders; B holds a second fulgur-callback-abi-good.so. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/callback.h"
#include "loader.h"

#define FILE_A(name) ABI_DIR_A "/" name
#define FILE_B(name) ABI_DIR_B "/" name

/* A check at a caller's line (the helpers below report where they were called from). */
static FG_PRINTF(3, 4) void expect(int ok, int line, const char *fmt, ...)
{
    if (ok)
        return;
    char what[FG_ERROR_MESSAGE_MAX * 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fg_check_failed(__FILE__, line, what);
}

static int contains(const char *s, const char *fragment)
{
    return s != NULL && strstr(s, fragment) != NULL;
}

static fg_loader *new_loader(const char *first, const char *second)
{
    fg_loader *l = NULL;
    fg_error err = {FG_OK, ""};
    if (fg_loader_create(&l, &err) != FG_OK) {
        fprintf(stderr, "fg_loader_create: %s\n", err.message);
        exit(1);
    }
    if ((first && fg_loader_add_path(l, first, &err) != FG_OK) ||
        (second && fg_loader_add_path(l, second, &err) != FG_OK)) {
        fprintf(stderr, "fg_loader_add_path: %s\n", err.message);
        exit(1);
    }
    return l;
}

/* Loads callback.NAME and checks the status; a refusal must name the file and the reason. */
static const fg_plugin *expect_load(fg_loader *l, const char *name, fg_status want,
                                    const char *fragment, int line)
{
    const fg_plugin *p = NULL;
    const char *path = NULL;
    fg_error err = {FG_OK, ""};
    fg_status st = fg_loader_load(l, FG_KIND_CALLBACK, name, &p, &path, &err);
    expect(st == want, line, "load callback.%s: status %s, expected %s (%s)", name,
           fg_status_name(st), fg_status_name(want), err.message);
    if (want == FG_OK) {
        expect(p != NULL && path != NULL, line, "load callback.%s: no descriptor or path", name);
        return p;
    }
    char file[256];
    snprintf(file, sizeof file, "fulgur-callback-%s.so", name);
    expect(p == NULL, line, "load callback.%s: refused but a descriptor was returned", name);
    expect(err.status == want, line, "load callback.%s: err.status %s", name,
           fg_status_name(err.status));
    expect(contains(err.message, file), line, "message does not name %s: '%s'", file,
           err.message);
    expect(contains(err.message, fragment), line, "message lacks '%s': '%s'", fragment,
           err.message);
    expect(strchr(err.message, '\n') == NULL, line, "message is not one line: '%s'",
           err.message);
    return NULL;
}

/* The common fake host for calling init directly, with the marker option set. */
static void marker_host(fg_fake_host *h, const fg_plugin *p, const char *marker)
{
    fg_fake_host_init(h, p, "callback.abi");
    fg_fake_host_set(h, "marker", marker);
}

/* ---- load ---------------------------------------------------------------------------- */

static void test_load_good(void)
{
    fg_loader *l = new_loader(ABI_DIR_A, ABI_DIR_B);
    const fg_plugin *p = expect_load(l, "abi-good", FG_OK, NULL, __LINE__);
    const char *path1 = NULL, *path2 = NULL;
    const fg_plugin *p1 = NULL, *p2 = NULL;
    fg_error err;
    fg_loader_load(l, FG_KIND_CALLBACK, "abi-good", &p1, &path1, &err);
    fg_loader_load(l, FG_KIND_CALLBACK, "abi-good", &p2, &path2, &err);
    CHECK(p != NULL && p1 == p && p2 == p, "loading twice gave different descriptors");
    CHECK(path1 != NULL && path1 == path2, "the second load did not come from the cache");
    CHECK(path1 && strcmp(path1, FILE_A("fulgur-callback-abi-good.so")) == 0,
           "first folder should win: path %s", path1 ? path1 : "(null)");
    if (p) {
        CHECK(strcmp(p->name, "abi-good") == 0, "name %s", p->name);
        CHECK(strcmp(p->version, "1.2.3") == 0, "version %s", p->version);
        CHECK(strcmp(p->description, "abi test fixture") == 0, "description %s",
               p->description);
        CHECK(p->option_count == 3, "option_count %u", p->option_count);
    }
    fg_loader_destroy(l);

    /* The other order: folder B's copy wins. */
    l = new_loader(ABI_DIR_B, ABI_DIR_A);
    p = expect_load(l, "abi-good", FG_OK, NULL, __LINE__);
    CHECK(p && strcmp(p->description, "copy in b") == 0, "folder B's copy should win: %s",
           p ? p->description : "(null)");
    fg_loader_destroy(l);
}

static void test_load_minors(void)
{
    fg_loader *l = new_loader(ABI_DIR_A, NULL);
    const fg_plugin *p = expect_load(l, "abi-oldminor", FG_OK, NULL, __LINE__);
    CHECK(p && p->struct_size == offsetof(fg_plugin, vtable) + sizeof(void *),
           "oldminor struct_size %u", p ? p->struct_size : 0);
    /* Built against a later minor with appended fields, needing nothing new of the host. */
    p = expect_load(l, "abi-newerminor", FG_OK, NULL, __LINE__);
    if (p) {
        CHECK(p->abi_minor == FG_ABI_MINOR + 1, "newerminor abi_minor %u", p->abi_minor);
        CHECK(p->struct_size > sizeof(fg_plugin), "newerminor struct_size %u", p->struct_size);
        CHECK(p->option_size > sizeof(fg_option), "newerminor option_size %u",
               p->option_size);
        const fg_option *second =
            (const fg_option *)((const char *)p->options + p->option_size);
        CHECK(strcmp(second->key, "mode") == 0, "option stride: second key %s", second->key);
    }
    fg_loader_destroy(l);
}

static void test_load_refusals(void)
{
    char needs[128];
    snprintf(needs, sizeof needs, "needs host ABI %d.%d, this host is %d.%d", FG_ABI_MAJOR,
             FG_ABI_MINOR + 1, FG_ABI_MAJOR, FG_ABI_MINOR);
    struct {
        const char *name;
        fg_status status;
        const char *fragment;
    } cases[] = {
        {"abi-needsnewer", FG_INCOMPATIBLE, needs},
        {"abi-major2", FG_INCOMPATIBLE, "built for ABI major 2; this host speaks major 1"},
        {"abi-noentry", FG_INVALID_ARGUMENT,
         "no symbol fulgur_plugin_v1 (not a fulgur plugin, or built for another ABI)"},
        {"abi-badmagic", FG_INVALID_ARGUMENT, "bad magic 0xDEADBEEF, expected 0x464C4752"},
        {"abi-truncated", FG_INCOMPATIBLE, "descriptor truncated: struct_size 16"},
        {"abi-weirdkind", FG_INVALID_ARGUMENT, "unknown plugin kind 99"},
        {"abi-wrongkind", FG_INVALID_ARGUMENT,
         "descriptor declares kind backend but the file name says callback"},
        {"abi-misnamed", FG_INVALID_ARGUMENT,
         "descriptor names the plugin 'other' but the file name says 'abi-misnamed'"},
        {"abi-missingdep", FG_UNAVAILABLE,
         "libfgmissing.so: cannot open shared object file"},
        {"abi-nope", FG_NOT_FOUND, "not found: no fulgur-callback-abi-nope.so in " ABI_DIR_A
                                   ", " ABI_DIR_B},
    };
    fg_loader *l = new_loader(ABI_DIR_A, ABI_DIR_B);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_load(l, cases[i].name, cases[i].status, cases[i].fragment, __LINE__);
        /* A refusal is not remembered as a success. */
        expect_load(l, cases[i].name, cases[i].status, cases[i].fragment, __LINE__);
    }
    fg_loader_destroy(l);

    l = new_loader(NULL, NULL);
    expect_load(l, "abi-good", FG_NOT_FOUND, "the plugin search path is empty", __LINE__);
    fg_loader_destroy(l);
}

static void test_bad_requests(void)
{
    fg_loader *l = new_loader(ABI_DIR_A, NULL);
    const fg_plugin *p = NULL;
    fg_error err = {FG_OK, ""};
    fg_status st = fg_loader_load(l, 42, "abi-good", &p, NULL, &err);
    CHECK(st == FG_INVALID_ARGUMENT && contains(err.message, "unknown plugin kind 42"),
           "kind 42: %s %s", fg_status_name(st), err.message);
    st = fg_loader_load(l, FG_KIND_CALLBACK, "", &p, NULL, &err);
    CHECK(st == FG_INVALID_ARGUMENT && contains(err.message, "callback plugin: empty name"),
           "empty name: %s %s", fg_status_name(st), err.message);
    st = fg_loader_load(l, FG_KIND_CALLBACK, "../a/abi-good", &p, NULL, &err);
    CHECK(st == FG_INVALID_ARGUMENT && contains(err.message, "cannot contain '/'"),
           "name with '/': %s %s", fg_status_name(st), err.message);
    st = fg_loader_add_path(l, "", &err);
    CHECK(st == FG_INVALID_ARGUMENT && contains(err.message, "empty path"), "empty folder: %s",
           err.message);
    fg_loader_destroy(l);
}

/* init runs only when called: its status and message come through the descriptor. */
static void test_init_results(const char *marker)
{
    fg_loader *l = new_loader(ABI_DIR_A, NULL);
    fg_fake_host host;
    struct {
        const char *name;
        fg_status status;
        const char *message;
    } cases[] = {
        {"abi-unavail", FG_UNAVAILABLE, "no widget on this machine"},
        {"abi-fatal", FG_FATAL, "widget lost"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fg_plugin *p = expect_load(l, cases[i].name, FG_OK, NULL, __LINE__);
        if (p == NULL)
            continue;
        void *state = NULL;
        fg_error err = {FG_OK, ""};
        marker_host(&host, p, marker);
        fg_status st = p->init(&host.host, &state, &err);
        CHECK(st == cases[i].status, "%s init: %s, expected %s", cases[i].name,
               fg_status_name(st), fg_status_name(cases[i].status));
        CHECK(err.status == cases[i].status && strcmp(err.message, cases[i].message) == 0,
               "%s init message '%s' (%s)", cases[i].name, err.message,
               fg_status_name(err.status));
    }
    fg_loader_destroy(l);
}

/* ---- scan ---------------------------------------------------------------------------- */

#define MAX_SEEN 64

typedef struct seen_file {
    char path[PATH_MAX];
    fg_status status;
    char reason[FG_ERROR_MESSAGE_MAX];
    const fg_plugin *desc;
} seen_file;

typedef struct scan_result {
    seen_file files[MAX_SEEN];
    int count;
} scan_result;

static void collect(void *user, const fg_plugin_file *f)
{
    scan_result *r = user;
    if (r->count >= MAX_SEEN)
        return;
    seen_file *s = &r->files[r->count++];
    snprintf(s->path, sizeof s->path, "%s", f->path);
    s->status = f->status;
    snprintf(s->reason, sizeof s->reason, "%s", f->reason ? f->reason : "(null)");
    s->desc = f->desc;
}

static const seen_file *find_file(const scan_result *r, const char *path)
{
    for (int i = 0; i < r->count; i++)
        if (strcmp(r->files[i].path, path) == 0)
            return &r->files[i];
    return NULL;
}

static void expect_scanned(const scan_result *r, const char *path, fg_status status,
                           const char *fragment, int line)
{
    const seen_file *s = find_file(r, path);
    expect(s != NULL, line, "scan did not report %s", path);
    if (s == NULL)
        return;
    expect(s->status == status, line, "scan %s: %s, expected %s (%s)", path,
           fg_status_name(s->status), fg_status_name(status), s->reason);
    if (status == FG_OK) {
        expect(s->desc != NULL, line, "scan %s: loaded without a descriptor", path);
        return;
    }
    expect(s->desc == NULL, line, "scan %s: refused with a descriptor", path);
    expect(contains(s->reason, path), line, "scan %s: reason does not name it: %s", path,
           s->reason);
    expect(contains(s->reason, fragment), line, "scan %s: reason lacks '%s': %s", path,
           fragment, s->reason);
}

static void test_scan(void)
{
    fg_loader *l = new_loader(ABI_DIR_A, ABI_DIR_B);
    const fg_plugin *good = expect_load(l, "abi-good", FG_OK, NULL, __LINE__);
    static scan_result r;
    memset(&r, 0, sizeof r);
    fg_loader_scan(l, collect, &r);

    expect_scanned(&r, FILE_A("fulgur-callback-abi-good.so"), FG_OK, NULL, __LINE__);
    const seen_file *s = find_file(&r, FILE_A("fulgur-callback-abi-good.so"));
    CHECK(s && s->desc == good, "scan and load disagree on the descriptor");
    expect_scanned(&r, FILE_A("fulgur-callback-abi-oldminor.so"), FG_OK, NULL, __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-newerminor.so"), FG_OK, NULL, __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-unavail.so"), FG_OK, NULL, __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-fatal.so"), FG_OK, NULL, __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-marker.so"), FG_OK, NULL, __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-needsnewer.so"), FG_INCOMPATIBLE,
                   "needs host ABI", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-major2.so"), FG_INCOMPATIBLE,
                   "built for ABI major 2", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-noentry.so"), FG_INVALID_ARGUMENT,
                   "no symbol fulgur_plugin_v1", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-badmagic.so"), FG_INVALID_ARGUMENT,
                   "bad magic 0xDEADBEEF", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-truncated.so"), FG_INCOMPATIBLE,
                   "descriptor truncated", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-weirdkind.so"), FG_INVALID_ARGUMENT,
                   "unknown plugin kind 99", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-wrongkind.so"), FG_INVALID_ARGUMENT,
                   "declares kind backend", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-misnamed.so"), FG_INVALID_ARGUMENT,
                   "names the plugin 'other'", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-missingdep.so"), FG_UNAVAILABLE,
                   "libfgmissing.so", __LINE__);
    expect_scanned(&r, FILE_A("fulgur-gizmo-abi-thing.so"), FG_INVALID_ARGUMENT,
                   "unknown plugin kind 'gizmo' in the file name", __LINE__);
    expect_scanned(&r, FILE_B("fulgur-callback-abi-good.so"), FG_UNAVAILABLE,
                   "shadowed by " FILE_A("fulgur-callback-abi-good.so"), __LINE__);
    /* Exactly the fixture files, each once: ABI_FIXTURE_COUNT in A, one in B. */
    CHECK(r.count == ABI_FIXTURE_COUNT + 1, "scan reported %d files, expected %d", r.count,
           ABI_FIXTURE_COUNT + 1);
    for (int i = 0; i < r.count; i++)
        for (int j = i + 1; j < r.count; j++)
            CHECK(strcmp(r.files[i].path, r.files[j].path) != 0, "%s reported twice",
                   r.files[i].path);
    /* Folder order is report order. */
    for (int i = 0; i + 1 < r.count; i++)
        CHECK(!(strncmp(r.files[i].path, ABI_DIR_B "/", strlen(ABI_DIR_B "/")) == 0 &&
                 strncmp(r.files[i + 1].path, ABI_DIR_A "/", strlen(ABI_DIR_A "/")) == 0),
               "a file of B was reported before one of A");
    fg_loader_destroy(l);

    /* The other order: B's copy is found first, A's is the shadowed one. */
    l = new_loader(ABI_DIR_B, ABI_DIR_A);
    memset(&r, 0, sizeof r);
    fg_loader_scan(l, collect, &r);
    expect_scanned(&r, FILE_B("fulgur-callback-abi-good.so"), FG_OK, NULL, __LINE__);
    expect_scanned(&r, FILE_A("fulgur-callback-abi-good.so"), FG_UNAVAILABLE,
                   "shadowed by " FILE_B("fulgur-callback-abi-good.so"), __LINE__);
    s = find_file(&r, FILE_B("fulgur-callback-abi-good.so"));
    CHECK(s && s->desc && strcmp(s->desc->description, "copy in b") == 0,
           "B's copy should be the one loaded");
    fg_loader_destroy(l);

    l = new_loader(NULL, NULL);
    memset(&r, 0, sizeof r);
    fg_loader_scan(l, collect, &r);
    CHECK(r.count == 0, "an empty search path reported %d files", r.count);
    fg_loader_destroy(l);
}

/* ---- descriptor checks on descriptors in memory --------------------------------------- */

static fg_status dummy_init(const fg_host *host, void **state, fg_error *err)
{
    return FG_OK;
}

#define MEM_PATH "/plugins/fulgur-callback-mem.so"

static void expect_check(const fg_plugin *p, fg_status want, const char *fragment, int line)
{
    fg_error err = {FG_OK, ""};
    fg_status st = fg_loader_check_descriptor(p, MEM_PATH, FG_KIND_CALLBACK, "mem", &err);
    expect(st == want, line, "check: %s, expected %s (%s)", fg_status_name(st),
           fg_status_name(want), err.message);
    if (want == FG_OK)
        return;
    expect(contains(err.message, MEM_PATH), line, "check message does not name the file: %s",
           err.message);
    expect(contains(err.message, fragment), line, "check message lacks '%s': %s", fragment,
           err.message);
}

static void test_check_descriptor(void)
{
    static const fg_callback_vtable vtable = {.struct_size = sizeof vtable};
    static fg_option options[2];
    fg_option good_options[2] = {
        {.key = "patience", .type = FG_OPT_INT, .default_value = "3", .min = 0, .max = 9},
        {.key = "mode", .type = FG_OPT_ENUM, .default_value = "min", .choices = "min|max"},
    };
    const fg_plugin good = {
        FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0),
        .name = "mem",
        .version = "0",
        FG_PLUGIN_OPTIONS(options),
        .init = dummy_init,
        .vtable = &vtable,
    };
    fg_plugin p;
    uint32_t big_vtable[2] = {70000, 0}, zero_vtable[2] = {0, 0};

#define RESET() (p = good, memcpy(options, good_options, sizeof options))
    RESET();
    expect_check(&p, FG_OK, NULL, __LINE__);
    fg_error err = {FG_OK, ""};
    CHECK(fg_loader_check_descriptor(&p, MEM_PATH, 0, NULL, &err) == FG_OK,
           "no expected kind or name: %s", err.message);
    expect_check(NULL, FG_INVALID_ARGUMENT, "descriptor is NULL", __LINE__);
    RESET(), p.magic = 0x12345678u;
    expect_check(&p, FG_INVALID_ARGUMENT, "bad magic 0x12345678, expected 0x464C4752",
                 __LINE__);
    RESET(), p.struct_size = (uint32_t)offsetof(fg_plugin, vtable);
    expect_check(&p, FG_INCOMPATIBLE, "descriptor truncated", __LINE__);
    RESET(), p.struct_size = 70000;
    expect_check(&p, FG_INCOMPATIBLE, "struct_size 70000 is absurd", __LINE__);
    RESET(), p.abi_major = 0;
    expect_check(&p, FG_INCOMPATIBLE, "built for ABI major 0; this host speaks major 1",
                 __LINE__);
    RESET(), p.min_host_minor = FG_ABI_MINOR;
    expect_check(&p, FG_OK, NULL, __LINE__);
    RESET(), p.min_host_minor = FG_ABI_MINOR + 5;
    expect_check(&p, FG_INCOMPATIBLE, "needs host ABI", __LINE__);
    RESET(), p.kind = 0;
    expect_check(&p, FG_INVALID_ARGUMENT, "unknown plugin kind 0", __LINE__);
    RESET(), p.kind = FG_KIND_DATA;
    expect_check(&p, FG_INVALID_ARGUMENT, "declares kind data but the file name says callback",
                 __LINE__);
    RESET(), p.name = NULL;
    expect_check(&p, FG_INVALID_ARGUMENT, "descriptor has no name", __LINE__);
    RESET(), p.name = "";
    expect_check(&p, FG_INVALID_ARGUMENT, "descriptor has no name", __LINE__);
    RESET(), p.name = "other";
    expect_check(&p, FG_INVALID_ARGUMENT, "names the plugin 'other' but the file name says 'mem'",
                 __LINE__);
    RESET(), p.init = NULL;
    expect_check(&p, FG_INVALID_ARGUMENT, "no init function", __LINE__);
    RESET(), p.vtable = NULL;
    expect_check(&p, FG_INVALID_ARGUMENT, "no vtable", __LINE__);
    RESET(), p.vtable = zero_vtable;
    expect_check(&p, FG_INCOMPATIBLE, "vtable struct_size 0", __LINE__);
    RESET(), p.vtable = big_vtable;
    expect_check(&p, FG_INCOMPATIBLE, "vtable struct_size 70000", __LINE__);
    RESET(), p.option_size = (uint32_t)offsetof(fg_option, help);
    expect_check(&p, FG_INCOMPATIBLE, "is smaller than a v1.0 fg_option", __LINE__);
    RESET(), p.option_size = 100000;
    expect_check(&p, FG_INCOMPATIBLE, "option_size 100000 is absurd", __LINE__);
    RESET(), p.options = NULL;
    expect_check(&p, FG_INVALID_ARGUMENT, "option_count is 2 but the option table is NULL",
                 __LINE__);
    RESET(), p.options = NULL, p.option_count = 0, p.option_size = 0;
    expect_check(&p, FG_OK, NULL, __LINE__);
    RESET(), options[1].key = NULL;
    expect_check(&p, FG_INVALID_ARGUMENT, "option #1 has no key", __LINE__);
    RESET(), options[0].type = 0;
    expect_check(&p, FG_INVALID_ARGUMENT, "option patience has unknown type 0", __LINE__);
    RESET(), options[1].type = FG_OPT_LIST + 1;
    expect_check(&p, FG_INVALID_ARGUMENT, "option mode has unknown type 7", __LINE__);
    RESET(), options[1].choices = NULL;
    expect_check(&p, FG_INVALID_ARGUMENT, "option mode is an enum without choices", __LINE__);
    RESET(), options[1].choices = "";
    expect_check(&p, FG_INVALID_ARGUMENT, "option mode is an enum without choices", __LINE__);
#undef RESET
}

/* ---- default search path ------------------------------------------------------------- */

static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return 0;
        *p = '/';
    }
    return mkdir(buf, 0755) == 0 || errno == EEXIST;
}

static void test_default_paths(const char *scratch)
{
    char home[PATH_MAX], home_plugins[PATH_MAX], exe[PATH_MAX], rel[PATH_MAX];
    char want[4][PATH_MAX], real[PATH_MAX];
    if (snprintf(home, sizeof home, "%s/home", scratch) >= (int)sizeof home ||
        snprintf(home_plugins, sizeof home_plugins, "%s/.local/lib/fulgur/plugins", home) >=
            (int)sizeof home_plugins) {
        CHECK(0, "scratch folder name too long: %s", scratch);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0, "readlink /proc/self/exe failed");
    if (n <= 0)
        return;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    CHECK(snprintf(rel, sizeof rel, "%s/%s", exe, ABI_PLUGIN_REL_DIR) < (int)sizeof rel,
           "executable folder name too long: %s", exe);
    CHECK(make_dirs(home_plugins) && make_dirs(rel), "cannot create %s or %s", home_plugins,
           rel);

    setenv("FULGUR_PLUGIN_PATH", ABI_DIR_B "::/nonexistent-fulgur-folder:" ABI_DIR_A ":"
           ABI_DIR_B "/", 1);
    setenv("HOME", home, 1);
    fg_loader *l = new_loader(ABI_DIR_A, NULL);
    fg_error err = {FG_OK, ""};
    fg_status st = fg_loader_add_default_paths(l, &err);
    CHECK(st == FG_OK, "add_default_paths: %s", err.message);

    /* Order: what was added, FULGUR_PLUGIN_PATH (A again and missing folders skipped),
     * ~/.local/lib/fulgur/plugins, the folder next to the running library (here the test
     * executable, which has the core linked in). */
    snprintf(want[0], sizeof want[0], "%s", ABI_DIR_A);
    CHECK(realpath(ABI_DIR_B, want[1]) && realpath(home_plugins, want[2]) &&
           realpath(rel, want[3]), "realpath failed");
    size_t count = fg_loader_path_count(l);
    CHECK(count >= 4, "%zu folders on the default search path, expected at least 4", count);
    for (size_t i = 0; i < 4 && i < count; i++)
        CHECK(strcmp(fg_loader_path(l, i), want[i]) == 0, "search path [%zu] is %s, expected %s",
               i, fg_loader_path(l, i), want[i]);
    for (size_t i = 0; i < count; i++) {
        const char *dir = fg_loader_path(l, i);
        struct stat sb;
        CHECK(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode), "search path has %s, not a folder",
               dir);
        CHECK(realpath(dir, real) != NULL, "realpath %s", dir);
        for (size_t j = i + 1; j < count; j++) {
            char other[PATH_MAX];
            CHECK(!(realpath(fg_loader_path(l, j), other) && strcmp(real, other) == 0),
                   "search path has %s twice", real);
        }
    }
    CHECK(fg_loader_path(l, count) == NULL, "fg_loader_path past the end is not NULL");
    /* Adding the defaults again adds nothing. */
    fg_loader_add_default_paths(l, &err);
    CHECK(fg_loader_path_count(l) == count, "defaults added twice: %zu folders",
           fg_loader_path_count(l));
    fg_loader_destroy(l);

    setenv("FULGUR_PLUGIN_PATH", "", 1);
    l = new_loader(NULL, NULL);
    fg_loader_add_default_paths(l, &err);
    CHECK(fg_loader_path_count(l) >= 2 && strcmp(fg_loader_path(l, 0), want[2]) == 0,
           "empty FULGUR_PLUGIN_PATH: first folder %s",
           fg_loader_path(l, 0) ? fg_loader_path(l, 0) : "(none)");
    fg_loader_destroy(l);
}

static void test_kind_names(void)
{
    static const char *const names[] = {NULL,   "backend", "precision", "strategy",
                                        "comm", "data",    "callback"};
    for (int k = FG_KIND_FIRST; k <= FG_KIND_LAST; k++) {
        CHECK(fg_kind_name(k) && strcmp(fg_kind_name(k), names[k]) == 0, "kind %d name %s", k,
               fg_kind_name(k) ? fg_kind_name(k) : "(null)");
        CHECK(fg_kind_from_name(names[k]) == k, "kind %s -> %d", names[k],
               fg_kind_from_name(names[k]));
    }
    CHECK(fg_kind_name(0) == NULL && fg_kind_name(FG_KIND_LAST + 1) == NULL,
           "out-of-range kinds have names");
    CHECK(fg_kind_from_name("gizmo") == 0 && fg_kind_from_name(NULL) == 0,
           "unknown kind names map to a kind");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s/init-ran", argv[1]);
    if (!make_dirs(argv[1]) || (unlink(marker) != 0 && errno != ENOENT)) {
        fprintf(stderr, "cannot prepare %s\n", argv[1]);
        return 2;
    }

    test_kind_names();
    test_load_good();
    test_load_minors();
    test_load_refusals();
    test_bad_requests();
    test_scan();
    test_check_descriptor();

    /* Everything above opened and checked abi-marker, and nothing ran its init. */
    {
        fg_loader *l = new_loader(ABI_DIR_A, NULL);
        const fg_plugin *p = expect_load(l, "abi-marker", FG_OK, NULL, __LINE__);
        CHECK(access(marker, F_OK) != 0, "loading or scanning ran a plugin's init (%s exists)",
               marker);
        /* The marker does appear when init is called: the check above can fail. */
        if (p) {
            fg_fake_host host;
            marker_host(&host, p, marker);
            void *state = NULL;
            fg_error err = {FG_OK, ""};
            fg_status st = p->init(&host.host, &state, &err);
            CHECK(st == FG_OK, "abi-marker init: %s %s", fg_status_name(st), err.message);
            CHECK(access(marker, F_OK) == 0, "abi-marker init did not create %s", marker);
        }
        fg_loader_destroy(l);
    }
    test_init_results(marker);
    test_default_paths(argv[1]);

    return fg_test_report("abi loader");
}
