/* Shared by the data plugin tests: checks that count failures, a fake fg_host that
 * answers option getters from set values or the plugin's own schema defaults, and
 * loading a data plugin from its built .so with dlopen (no plugin source is linked). */
#ifndef FG_DATA_TEST_H
#define FG_DATA_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fulgur/data.h"

/* ctest's SKIP_RETURN_CODE: the data a case needs is not installed. */
#define TEST_SKIPPED 77

extern int test_failures;
/* Args for a read() outside a loader: the test split, seed 0, epoch 0. */
extern const fg_data_read_args test_read_args;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
            test_failures++;                                                               \
        }                                                                                  \
    } while (0)

#define CHECK_EQ_INT(actual, expected)                                                     \
    do {                                                                                   \
        long long a_ = (long long)(actual), e_ = (long long)(expected);                    \
        if (a_ != e_) {                                                                    \
            fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__,       \
                    #actual, a_, e_);                                                      \
            test_failures++;                                                               \
        }                                                                                  \
    } while (0)

/* The status, and on failure the message, of a call that returned st with err. */
#define CHECK_STATUS(st, expected, err)                                                    \
    do {                                                                                   \
        fg_status s_ = (st), x_ = (expected);                                              \
        if (s_ != x_) {                                                                    \
            fprintf(stderr, "%s:%d: status %s (%s), expected %s\n", __FILE__, __LINE__,    \
                    fg_status_name(s_), s_ == FG_OK ? "" : (err).message,                  \
                    fg_status_name(x_));                                                   \
            test_failures++;                                                               \
        }                                                                                  \
    } while (0)

#define CHECK_CONTAINS(text, fragment)                                                     \
    do {                                                                                   \
        const char *t_ = (text), *f_ = (fragment);                                         \
        if (!t_ || !strstr(t_, f_)) {                                                      \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
                    t_ ? t_ : "(null)", f_);                                               \
            test_failures++;                                                               \
        }                                                                                  \
    } while (0)

/* ---- a fake host ------------------------------------------------------------------- */

#define FAKE_HOST_MAX_KEYS 16

typedef struct fake_host {
    fg_host host; /* first: the plugin receives &fake->host */
    const fg_plugin *plugin; /* its schema gives the defaults */
    int count;
    char keys[FAKE_HOST_MAX_KEYS][64];
    char values[FAKE_HOST_MAX_KEYS][512];
} fake_host;

void fake_host_init(fake_host *fh, const fg_plugin *plugin);
/* Sets (or replaces) the value a getter answers for key, as an INI file would write it. */
void fake_host_set(fake_host *fh, const char *key, const char *value);

/* ---- plugins ----------------------------------------------------------------------- */

/* dlopens path, checks the descriptor is a data plugin called name; NULL (and a
 * message on stderr) otherwise. The library stays loaded, as the host does it. */
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
fg_status instance_init(test_instance *in, const fg_plugin *plugin, fake_host *fh,
                        fg_error *err);
void instance_deinit(test_instance *in);

/* Reads all n samples (elems floats each) of an open split in a fixed permuted order,
 * once sequentially and then from 4 threads at once, each starting at a different
 * batch: every thread must get the sequential bytes and labels. */
void check_concurrent_reads(const test_instance *in, void *ds, int64_t n, int64_t elems);

#endif
