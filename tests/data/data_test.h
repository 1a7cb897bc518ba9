/* Shared by the data plugin tests: a data plugin loaded from its built .so with dlopen
 * (no plugin source is linked) and configured through the common fake host
 * (tests/common), concurrent reads, and the case runner. */
#ifndef FG_DATA_TEST_H
#define FG_DATA_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/data.h"

/* ctest's SKIP_RETURN_CODE: the data a case needs is not installed. */
#define TEST_SKIPPED 77

/* Args for a read() outside a loader: the test split, seed 0, epoch 0. */
extern const fg_data_read_args test_read_args;

/* ---- plugins ----------------------------------------------------------------------- */

/* dlopens path, checks the descriptor is a data plugin called name (with a whole data
 * vtable); NULL (and a message on stderr) otherwise. */
const fg_plugin *load_data_plugin(const char *path, const char *name);

static inline const fg_data_vtable *data_vtable(const fg_plugin *p)
{
    return (const fg_data_vtable *)p->vtable;
}

/* One configured instance and one open split of it. */
typedef struct test_instance {
    const fg_plugin *plugin;
    const fg_data_vtable *vt;
    void *state;
} test_instance;

/* init() through the fake host: the status, with err filled on failure. */
fg_status instance_init(test_instance *in, const fg_plugin *plugin, fg_fake_host *fh,
                        fg_error *err);
void instance_deinit(test_instance *in);

/* Reads all n samples (elems floats each) of an open split in a fixed permuted order,
 * once sequentially and then from 4 threads at once, each starting at a different
 * batch: every thread must get the sequential bytes and labels. */
void check_concurrent_reads(const test_instance *in, void *ds, int64_t n, int64_t elems);

/* A case: 0 when it ran (its checks counted), TEST_SKIPPED, or -1 when it could not run. */
typedef struct data_case {
    const char *name;
    int (*run)(void);
} data_case;
/* Runs the case named argv[1]: its exit status (TEST_SKIPPED passes through). */
int data_test_main(int argc, char **argv, const data_case *cases, size_t count);

#endif
