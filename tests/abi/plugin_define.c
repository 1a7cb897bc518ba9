/* abi.plugin_define: the one-statement plugin macros (plugin.h's FG_PLUGIN_DEFINE,
 * FG_PLUGIN_DEFINE_VTABLE, callback.h's FG_CALLBACK_PLUGIN_DEFINE) give the descriptor and
 * vtable a plugin spelling out the designated initialisers gives: every field, the options
 * (a table or none) and each vtable entry. Source level only: no ABI change. */
#include <stdint.h>

#include "check.h"
#include "fulgur/callback.h"
#include "fulgur/comm.h"

static fg_status init_fn(const fg_host *host, void **state, fg_error *err) { return FG_OK; }
static void deinit_fn(void *state) {}
static fg_status topology_fn(void *state, fg_comm_topology *out, fg_error *err) { return FG_OK; }
static fg_status event_fn(void *state, const fg_event *event, fg_callback_action *action,
                          fg_error *err) { return FG_OK; }
static fg_status requests_fn(void *state, fg_callback_requests *out, fg_error *err) { return FG_OK; }

static const fg_option options[] = {
    {.key = "k", .type = FG_OPT_INT, .default_value = "1", .min = 0, .max = 9, .help = "h"},
    {.key = "j", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0, .help = "i"},
};
static const fg_comm_vtable comm_vtable = {.struct_size = sizeof(fg_comm_vtable),
                                           .topology = topology_fn};

/* Each macro defines FG_PLUGIN_ENTRY: renamed before each use, so one file holds three. */
#undef FG_PLUGIN_ENTRY
#define FG_PLUGIN_ENTRY by_define
FG_PLUGIN_DEFINE(FG_KIND_COMM, 3, "n", "1.2.3", "d", FG_PLUGIN_NO_OPTIONS, init_fn, deinit_fn,
                 &comm_vtable);
#undef FG_PLUGIN_ENTRY
#define FG_PLUGIN_ENTRY by_define_vtable
FG_PLUGIN_DEFINE_VTABLE(fg_comm_vtable, FG_KIND_COMM, 0, "m", "0.1.0", "e",
                        FG_PLUGIN_OPTIONS(options), init_fn, deinit_fn, .topology = topology_fn);
#undef FG_PLUGIN_ENTRY
#define FG_PLUGIN_ENTRY by_callback
FG_CALLBACK_PLUGIN_DEFINE("c", "2.0.0", "f", FG_PLUGIN_OPTIONS(options), init_fn, deinit_fn,
                          event_fn, requests_fn);

static const fg_plugin by_hand = {
    FG_PLUGIN_HEADER(FG_KIND_COMM, 3), .name = "n", .version = "1.2.3", .description = "d",
    .init = init_fn, .deinit = deinit_fn, .vtable = &comm_vtable};

static void check_same(const fg_plugin *a, const fg_plugin *b)
{
    CHECK_EQ(a->magic, b->magic);
    CHECK_EQ(a->struct_size, b->struct_size);
    CHECK_EQ(a->abi_major, b->abi_major);
    CHECK_EQ(a->abi_minor, b->abi_minor);
    CHECK_EQ(a->min_host_minor, b->min_host_minor);
    CHECK_EQ(a->kind, b->kind);
    CHECK_STR(a->name, b->name);
    CHECK_STR(a->version, b->version);
    CHECK_STR(a->description, b->description);
    CHECK(a->options == b->options);
    CHECK_EQ(a->option_count, b->option_count);
    CHECK_EQ(a->option_size, b->option_size);
    CHECK(a->init == b->init);
    CHECK(a->deinit == b->deinit);
}

static void test_define(void)
{
    check_same(&by_define, &by_hand);
    CHECK(by_define.vtable == &comm_vtable);
}

static void test_define_vtable(void)
{
    const fg_plugin hand = {
        FG_PLUGIN_HEADER(FG_KIND_COMM, 0), .name = "m", .version = "0.1.0", .description = "e",
        FG_PLUGIN_OPTIONS(options), .init = init_fn, .deinit = deinit_fn};
    check_same(&by_define_vtable, &hand);
    CHECK_EQ(by_define_vtable.option_count, 2);
    const fg_comm_vtable *vt = by_define_vtable.vtable;
    CHECK_EQ(vt->struct_size, sizeof(fg_comm_vtable));
    CHECK(vt->topology == topology_fn);
    CHECK(vt->all_reduce == NULL);
}

static void test_callback(void)
{
    const fg_plugin hand = {
        FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0), .name = "c", .version = "2.0.0",
        .description = "f", FG_PLUGIN_OPTIONS(options), .init = init_fn, .deinit = deinit_fn};
    check_same(&by_callback, &hand);
    const fg_callback_vtable *vt = by_callback.vtable;
    CHECK_EQ(vt->struct_size, sizeof(fg_callback_vtable));
    CHECK(vt->on_event == event_fn);
    CHECK(vt->requests == requests_fn);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"define", test_define, NULL},
        {"define_vtable", test_define_vtable, NULL},
        {"callback", test_callback, NULL},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
