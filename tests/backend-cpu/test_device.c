/* Devices, memory accounting and the memory limit, queues, copies and option errors. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_devices(void)
{
    test_backend tb;
    test_backend_open(&tb, 3, 2, 0);
    int count = 0;
    CHECK_OK(tb.vt->device_count(tb.state, &count, &test_err));
    CHECK(count == 3, "device_count = %d, want 3", count);
    fg_device_info info = { .struct_size = sizeof info };
    CHECK_OK(tb.vt->device_info(tb.state, 2, &info, &test_err));
    CHECK(info.index == 2, "index %d", info.index);
    CHECK(strncmp(info.name, "CPU virtual device 2 (2 threads, ", 33) == 0, "name '%s'",
          info.name);
    CHECK(info.total_memory > (1ull << 26), "total_memory %llu is not the physical memory",
          (unsigned long long)info.total_memory);
    fg_status st = tb.vt->device_info(tb.state, 3, &info, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "device 3 does not exist"),
          "%s", test_err.message);

    /* separate allocations per device, memcpy between them */
    float *a = NULL, *b = NULL;
    CHECK_OK(tb.vt->alloc(tb.state, 0, 1000 * sizeof(float), (void **)&a, &test_err));
    CHECK_OK(tb.vt->alloc(tb.state, 2, 1000 * sizeof(float), (void **)&b, &test_err));
    CHECK(a && b && a != b, "allocations");
    CHECK(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0, "not 64-byte aligned");
    float host[1000];
    for (int i = 0; i < 1000; i++)
        host[i] = (float)i;
    void *q2 = NULL;
    CHECK_OK(tb.vt->queue_create(tb.state, 2, &q2, &test_err));
    CHECK_OK(tb.vt->copy(tb.state, tb.queue, a, 0, host, -1, sizeof host, &test_err));
    CHECK_OK(tb.vt->copy(tb.state, q2, b, 2, a, 0, sizeof host, &test_err));
    CHECK_OK(tb.vt->queue_sync(tb.state, q2, &test_err));
    CHECK(memcmp(b, host, sizeof host) == 0, "device 0 -> 2 copy differs");
    st = tb.vt->copy(tb.state, q2, b, 5, a, 0, 4, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "device 0 -> 5"), "%s",
          test_err.message);
    void *q = NULL;
    st = tb.vt->queue_create(tb.state, 7, &q, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "device 7 does not exist"),
          "%s", test_err.message);
    void *pinned = NULL;
    CHECK_OK(tb.vt->host_alloc(tb.state, 12345, &pinned, &test_err));
    CHECK(pinned && ((uintptr_t)pinned % 64) == 0, "host_alloc not 64-byte aligned");
    tb.vt->host_free(tb.state, pinned);
    tb.vt->queue_destroy(tb.state, q2);
    tb.vt->free(tb.state, 0, a);
    tb.vt->free(tb.state, 2, b);
    test_backend_close(&tb);
}

static void test_memory_limit(void)
{
    test_backend tb;
    test_backend_open(&tb, 2, 1, 1);
    fg_device_info info = { .struct_size = sizeof info };
    CHECK_OK(tb.vt->device_info(tb.state, 0, &info, &test_err));
    CHECK(info.total_memory == 1048576, "total_memory %llu, want the 1 MiB limit",
          (unsigned long long)info.total_memory);
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tb.vt->alloc(tb.state, 0, 524288, &a, &test_err));
    CHECK_OK(tb.vt->device_info(tb.state, 0, &info, &test_err));
    CHECK(info.free_memory == 524288, "free_memory %llu after 512 KiB",
          (unsigned long long)info.free_memory);
    fg_status st = tb.vt->alloc(tb.state, 0, 614400, &b, &test_err);
    CHECK(st == FG_OUT_OF_MEMORY, "status %s", fg_status_name(st));
    CHECK(b == NULL, "refused alloc returned a pointer");
    CHECK(strstr(test_err.message, "device 0") && strstr(test_err.message, "614400 bytes") &&
              strstr(test_err.message, "524288 bytes in use") &&
              strstr(test_err.message, "1048576 bytes") &&
              strstr(test_err.message, "memory_limit_mb = 1") &&
              strstr(test_err.message, "smaller batch_size") &&
              strstr(test_err.message, "half precision"),
          "message: %s", test_err.message);
    /* the limit is per device */
    CHECK_OK(tb.vt->alloc(tb.state, 1, 614400, &c, &test_err));
    /* freeing gives the bytes back */
    tb.vt->free(tb.state, 0, a);
    CHECK_OK(tb.vt->alloc(tb.state, 0, 614400, &b, &test_err));
    tb.vt->free(tb.state, 0, b);
    tb.vt->free(tb.state, 1, c);
    st = tb.vt->alloc(tb.state, 0, (size_t)2 << 20, &a, &test_err);
    CHECK(st == FG_OUT_OF_MEMORY && strstr(test_err.message, "0 bytes in use"), "%s",
          test_err.message);
    test_backend_close(&tb);
}

static void test_options(void)
{
    test_backend tb;
    fg_status st = test_backend_try_open(&tb, 1, 2000, 0);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "threads = 2000"), "%s",
          test_err.message);
    st = test_backend_try_open(&tb, 65, 1, 0);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "devices = 65"), "%s",
          test_err.message);
    /* threads = 0 means the online CPUs */
    test_backend_open(&tb, 1, 0, 0);
    fg_device_info info = { .struct_size = sizeof info };
    CHECK_OK(tb.vt->device_info(tb.state, 0, &info, &test_err));
    CHECK(strstr(info.name, " thread") != NULL, "name '%s'", info.name);
    test_backend_close(&tb);
}

static void test_descriptor(void)
{
    test_backend tb;
    test_backend_open(&tb, 1, 1, 0);
    CHECK(tb.plugin->option_count == 7, "option_count %u", tb.plugin->option_count);
    const char *keys[] = { "devices", "threads", "memory_limit_mb" };
    for (int i = 0; i < 3; i++)
        CHECK(strcmp(tb.plugin->options[i].key, keys[i]) == 0 &&
                  tb.plugin->options[i].type == FG_OPT_INT,
              "option %d is %s", i, tb.plugin->options[i].key);
    CHECK(strcmp(tb.plugin->options[3].key, "conv_algorithm") == 0 &&
              tb.plugin->options[3].type == FG_OPT_ENUM &&
              strcmp(tb.plugin->options[3].choices, "auto|im2col|onednn") == 0 &&
              strcmp(tb.plugin->options[3].default_value, "auto") == 0,
          "option 3 is %s", tb.plugin->options[3].key);
    CHECK(strcmp(tb.plugin->options[4].key, "bf16") == 0 &&
              tb.plugin->options[4].type == FG_OPT_ENUM &&
              strcmp(tb.plugin->options[4].choices, "auto|native|emulated") == 0,
          "option 4 is %s", tb.plugin->options[4].key);
    CHECK(strcmp(tb.plugin->options[5].key, "gemm") == 0 &&
              tb.plugin->options[5].type == FG_OPT_ENUM &&
              strcmp(tb.plugin->options[5].choices, "default|auto|openblas|onednn") == 0 &&
              strcmp(tb.plugin->options[5].default_value, "default") == 0,
          "option 5 is %s", tb.plugin->options[5].key);
    CHECK(strcmp(tb.plugin->options[6].key, "tuning") == 0 &&
              tb.plugin->options[6].type == FG_OPT_ENUM &&
              strcmp(tb.plugin->options[6].choices, "auto|off") == 0 &&
              strcmp(tb.plugin->options[6].default_value, "auto") == 0,
          "option 6 is %s", tb.plugin->options[6].key);
    const fg_backend_vtable *vt = tb.vt;
    CHECK(vt->struct_size == sizeof(fg_backend_vtable), "vtable struct_size %u",
          vt->struct_size);
    /* every function is implemented, but for copy_queue_create (a CPU copy is a memcpy on
     * the calling thread, and a queue of its own would overlap nothing: cpu_event.h),
     * queue_native (a CPU queue has no handle another library enqueues on) and the graph
     * four entries of ABI 1.7 (CUDA graphs: a CPU queue captures nothing; [backend]
     * cuda_graphs is refused naming the key); the ops after them (1.8) are set */
    const void *const *fns = (const void *const *)((const char *)vt +
                                                   offsetof(fg_backend_vtable, device_count));
    size_t nfns = (sizeof(fg_backend_vtable) - offsetof(fg_backend_vtable, device_count)) /
                  sizeof(void *);
    size_t no_copy_queue = (offsetof(fg_backend_vtable, copy_queue_create) -
                            offsetof(fg_backend_vtable, device_count)) / sizeof(void *);
    size_t no_native = (offsetof(fg_backend_vtable, queue_native) -
                        offsetof(fg_backend_vtable, device_count)) / sizeof(void *);
    size_t graphs = (offsetof(fg_backend_vtable, graph_begin) -
                     offsetof(fg_backend_vtable, device_count)) / sizeof(void *);
    for (size_t i = 0; i < nfns; i++)
        CHECK((fns[i] != NULL) == (i != no_copy_queue && i != no_native && (i < graphs || i >= graphs + 4)),
              "vtable function %zu is %s", i, fns[i] ? "set" : "NULL");
    test_backend_close(&tb);
}

void test_group_device(void)
{
    test_devices();
    test_memory_limit();
    test_options();
    test_descriptor();
}
