/* plugin_common.*: the helpers of plugins/common on their own, with values a plugin's
 * callers depend on. One ctest per case. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "callback_plugin.h"
#include "check.h"
#include "comm_topology.h"
#include "config_value.h"
#include "data_path.h"
#include "data_plugin.h"
#include "fake_host.h"
#include "number_text.h"
#include "output_file.h"
#include "precision_plugin.h"
#include "worker_gang.h"

/* An older caller's shorter struct gets its own size's worth, and keeps that size. */
static void case_dataset_info(void)
{
    fg_dataset_info full = {.struct_size = sizeof full, .length = 60000, .rank = 3,
                            .shape = {1, 28, 28}, .sample_dtype = FG_F32, .num_classes = 10};
    fg_dataset_info out;
    memset(&out, 0xAB, sizeof out);
    out.struct_size = (uint32_t)offsetof(fg_dataset_info, shape);
    fg_plugin_copy_dataset_info(&out, &full);
    CHECK_EQ(out.struct_size, offsetof(fg_dataset_info, shape));
    CHECK_EQ(out.length, 60000);
    CHECK_EQ(out.rank, 3);
    CHECK_EQ(out.num_classes, (int32_t)0xABABABAB); /* beyond the caller's struct: untouched */
    out.struct_size = 0; /* a caller that does not say: all of it */
    fg_plugin_copy_dataset_info(&out, &full);
    CHECK_EQ(out.struct_size, sizeof full);
    CHECK_EQ(out.shape[2], 28);
    CHECK_EQ(out.num_classes, 10);
}

static void case_check_read(void)
{
    int64_t ok[] = {0, 4, 9}, bad[] = {0, 10, 3};
    float samples[3] = {0};
    fg_error err = {0};
    CHECK_STATUS(fg_plugin_check_read("idx", "train", 10, ok, 3, samples, &err), FG_OK, err);
    CHECK_STATUS(fg_plugin_check_read("idx", "train", 10, NULL, 0, NULL, &err), FG_OK, err);
    CHECK_STATUS(fg_plugin_check_read("idx", "val", 10, bad, 3, samples, &err),
                 FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "idx: index 10 (position 1 of 3) is out of range for the val split "
                           "of length 10");
    CHECK_STATUS(fg_plugin_check_read("syn", "test", 10, ok, -1, samples, &err),
                 FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "syn: read of the test split: count -1 with indices");
    CHECK_STATUS(fg_plugin_check_read("syn", "test", 10, ok, 2, NULL, &err), FG_INVALID_ARGUMENT);
}

static void case_number_text(void)
{
    char buf[32];
    fg_plugin_format_double(buf, sizeof buf, 0.1);
    CHECK_STR(buf, "0.1");
    fg_plugin_format_double(buf, sizeof buf, 1.0 / 3.0);
    CHECK_STR(buf, "0.33333333333333331");
    CHECK(strtod(buf, NULL) == 1.0 / 3.0, "%s does not read back", buf);
    fg_plugin_format_double(buf, sizeof buf, -3e-7);
    CHECK_STR(buf, "-3e-07");
}

static void case_precision(void)
{
    fg_precision_info info = {.struct_size = 7};
    CHECK_OK(fg_plugin_precision_info(&info, FG_BF16, FG_BF16, FG_F32, 1, 0));
    CHECK_EQ(info.struct_size, 7); /* the caller's */
    CHECK_EQ(info.param_dtype, FG_BF16);
    CHECK_EQ(info.grad_dtype, FG_F32);
    CHECK_EQ(info.master_weights, 1);
    CHECK_EQ(info.loss_scaling, 0);
    int skip = -1;
    CHECK_NEAR(fg_plugin_unscaled_loss_scale(NULL), 1.0, 0.0);
    CHECK_OK(fg_plugin_unscaled_update_scale(NULL, 1, &skip, &fg_test_err));
    CHECK_EQ(skip, 1);
    CHECK_OK(fg_plugin_unscaled_update_scale(NULL, 0, &skip, &fg_test_err));
    CHECK_EQ(skip, 0);

    static const fg_option grad[] = {{"grad_dtype", FG_OPT_ENUM, "fp32", 1, 0, "fp32|half", ""}};
    const fg_plugin p = {FG_PLUGIN_HEADER(FG_KIND_PRECISION, 0), .name = "t",
                         FG_PLUGIN_OPTIONS(grad)};
    fg_fake_host h;
    fg_fake_host_init(&h, &p, NULL);
    uint32_t dtype = 0;
    CHECK_OK(fg_plugin_read_grad_dtype(&h.host, FG_F16, "t", &dtype, &fg_test_err));
    CHECK_EQ(dtype, FG_F32);
    fg_fake_host_set(&h, "grad_dtype", "half");
    CHECK_OK(fg_plugin_read_grad_dtype(&h.host, FG_F16, "t", &dtype, &fg_test_err));
    CHECK_EQ(dtype, FG_F16);
}

static void case_callback(void)
{
    static const fg_option opts[] = {{"hparams", FG_OPT_BOOL, "true", 1, 0, NULL, ""}};
    const fg_plugin p = {FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0), .name = "t",
                         FG_PLUGIN_OPTIONS(opts)};
    fg_fake_host h;
    fg_fake_host_init(&h, &p, NULL);
    int hparams = 0;
    fg_error err = {0};
    CHECK_STATUS(fg_plugin_read_hparams(&h.host, "callback.t", &hparams, &err), FG_OK, err);
    CHECK_EQ(hparams, 1);
    h.host.config_entry = NULL; /* an ABI 1.0 host without the config */
    CHECK_STATUS(fg_plugin_read_hparams(&h.host, "callback.t", &hparams, &err), FG_INCOMPATIBLE);
    CHECK_CONTAINS(err.message, "[callback.t] hparams = true needs a host with config_entry");
    fg_fake_host_set(&h, "hparams", "maybe");
    CHECK_STATUS(fg_plugin_read_hparams(&h.host, "callback.t", &hparams, &err),
                 FG_INVALID_ARGUMENT);

    fg_event ev = {.struct_size = (uint32_t)offsetof(fg_event, run_dir)};
    CHECK_STATUS(FG_PLUGIN_EVENT_NEEDS(&ev, run_dir, "callback.t", &err), FG_INCOMPATIBLE);
    char want[128];
    snprintf(want, sizeof want, "[callback.t] event struct of %u bytes is too old",
             (unsigned)offsetof(fg_event, run_dir));
    CHECK_STR(err.message, want);
    CHECK_STATUS(FG_PLUGIN_EVENT_NEEDS(&ev, is_rank_zero, "callback.t", &err), FG_OK);
}

/* The first value of [section] key, NULL when absent, and "cannot say" without config_entry. */
static void case_config_value(void)
{
    static const char *const config[] = {"backend", "name", "cuda", "strategy", "name", "ddp",
                                         "backend", "name", "cpu", NULL};
    const fg_plugin p = {FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0), .name = "t"};
    fg_fake_host h;
    fg_fake_host_init(&h, &p, NULL);
    h.config = config;
    const char *v = "unset";
    CHECK_EQ(fg_plugin_config_value(&h.host, "backend", "name", &v), 1);
    CHECK_STR(v, "cuda");
    CHECK_EQ(fg_plugin_config_value(&h.host, "strategy", "name", &v), 1);
    CHECK_STR(v, "ddp");
    CHECK_EQ(fg_plugin_config_value(&h.host, "strategy", "device", &v), 1);
    CHECK(v == NULL);
    h.host.config_entry = NULL; /* an ABI 1.0 host */
    v = "unset";
    CHECK_EQ(fg_plugin_config_value(&h.host, "backend", "name", &v), 0);
    CHECK(v == NULL);
}

/* train/val/test resolved against dir (absolute and empty names kept), and the option that
 * cannot be read named. */
static void case_split_paths(void)
{
    static const fg_option opts[] = {
        {"dir", FG_OPT_STRING, "data/", 1, 0, NULL, ""},
        {"train_file", FG_OPT_STRING, "a.csv", 1, 0, NULL, ""},
        {"val_file", FG_OPT_STRING, "/abs/b.csv", 1, 0, NULL, ""},
        {"test_file", FG_OPT_STRING, "", 1, 0, NULL, ""},
    };
    static const char *const keys[] = {NULL, "train_file", "val_file", "test_file"};
    const fg_plugin p = {FG_PLUGIN_HEADER(FG_KIND_DATA, 0), .name = "t",
                         FG_PLUGIN_OPTIONS(opts)};
    fg_fake_host h;
    fg_fake_host_init(&h, &p, NULL);
    char *paths[FG_SPLIT_TEST + 1] = {0};
    const char *dir = NULL;
    CHECK_OK(fg_plugin_split_paths(&h.host, "t", keys, paths, &dir, &fg_test_err));
    CHECK_STR(dir, "data/");
    CHECK_STR(paths[FG_SPLIT_TRAIN], "data/a.csv");
    CHECK_STR(paths[FG_SPLIT_VAL], "/abs/b.csv");
    CHECK_STR(paths[FG_SPLIT_TEST], "");
    for (int i = 0; i <= FG_SPLIT_TEST; i++) {
        free(paths[i]);
        paths[i] = NULL;
    }
    static const char *const unknown[] = {NULL, "train_file", "no_such_key", "test_file"};
    fg_error err = {0};
    CHECK(fg_plugin_split_paths(&h.host, "t", unknown, paths, &dir, &err) != FG_OK);
    CHECK_CONTAINS(err.message, "t: cannot read option no_such_key");
    CHECK_STR(paths[FG_SPLIT_TRAIN], "data/a.csv"); /* set before the failure: the caller's */
    free(paths[FG_SPLIT_TRAIN]);
}

typedef struct gang_seen {
    int parts[4][3]; /* worker, job: times run */
} gang_seen;

static void gang_part(void *ctx, int worker, int job)
{
    ((gang_seen *)ctx)->parts[worker][job]++; /* each worker its own row: no race */
}

/* Every worker thread runs its part of each published job once, and stop ends them. */
static void case_worker_gang(void)
{
    fg_plugin_gang g = {0};
    gang_seen seen = {{{0}}};
    CHECK_EQ(fg_plugin_gang_init(&g), 0);
    CHECK_OK(fg_plugin_gang_start(&g, 4, gang_part, &seen, 0, "t", &fg_test_err));
    for (int round = 0; round < 3; round++)
        for (int job = 1; job <= 2; job++) {
            pthread_mutex_lock(&g.lock);
            fg_plugin_gang_publish_locked(&g, job);
            pthread_mutex_unlock(&g.lock);
            fg_plugin_gang_wait(&g);
            CHECK_EQ(g.running, 0);
        }
    fg_plugin_gang_stop(&g);
    CHECK_EQ(g.ready, 0);
    for (int w = 0; w < 4; w++) {
        CHECK_EQ(seen.parts[w][0], 0); /* the stop job is no part */
        CHECK_EQ(seen.parts[w][1], w == 0 ? 0 : 3); /* worker 0 is the caller's */
        CHECK_EQ(seen.parts[w][2], w == 0 ? 0 : 3);
    }
    fg_plugin_gang_stop(&g); /* a second stop does nothing */
}

static void case_topology(void)
{
    const fg_comm_topology t = {sizeof t, 3, 8, 1, 4, 0, 2};
    fg_comm_topology out = {sizeof out, 0, 0, 0, 0, 0, 0};
    CHECK_OK(fg_plugin_topology_copy(&t, &out, "comm.t", &fg_test_err));
    CHECK(out.rank == 3 && out.world_size == 8 && out.local_rank == 1 && out.local_size == 4 &&
              out.node == 0 && out.node_count == 2,
          "topology %d/%d local %d/%d node %d/%d", out.rank, out.world_size, out.local_rank,
          out.local_size, out.node, out.node_count);
    fg_error err = {0};
    CHECK_STATUS(fg_plugin_topology_copy(&t, NULL, "comm.t", &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "comm.t: topology: out is NULL");
}

/* ---- output_file.h ----------------------------------------------------------------- */

static int write_hello(FILE *out, void *user)
{
    return fputs(user ? (const char *)user : "hello\n", out) < 0 ? -1 : 0;
}

static int write_big(FILE *out, void *user)
{
    (void)user;
    static char block[4096];
    for (int i = 0; i < 64; i++)
        if (fwrite(block, 1, sizeof block, out) != sizeof block)
            return -1;
    return 0;
}

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* No PATH.tmp.* left in dir. */
static int temporaries_in(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* path is a node of `kind`; every writer refuses it with the kind named, and leaves it. */
static void check_node_refused(const char *dir, const char *path, const char *kind,
                               int (*still)(const char *))
{
    char want[600];
    snprintf(want, sizeof want, "%s: is %s, not a regular file: refusing to replace it", path,
             kind);
    fg_error err = {0};
    CHECK_STATUS(fg_output_check_target(path, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, want);
    memset(&err, 0, sizeof err);
    CHECK_STATUS(fg_output_write_atomic(path, write_hello, NULL, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, want);
    FILE *f = (FILE *)1;
    memset(&err, 0, sizeof err);
    CHECK_STATUS(fg_output_open(path, "w", &f, &err), FG_INVALID_ARGUMENT);
    CHECK(f == NULL);
    CHECK_STR(err.message, want);
    memset(&err, 0, sizeof err);
    CHECK_STATUS(fg_output_open(path, "a", &f, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, want);
    CHECK(still(path), "%s is no longer %s", path, kind);
    CHECK_EQ(temporaries_in(dir), 0);
}

static int is_fifo(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISFIFO(sb.st_mode); }
static int is_dir(const char *p) { struct stat sb; return lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode); }
static int is_null_link(const char *p)
{
    char to[64] = "";
    struct stat sb;
    return readlink(p, to, sizeof to - 1) > 0 && strcmp(to, "/dev/null") == 0 &&
           stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode);
}

static void case_output_file(void)
{
    char dir[] = "/tmp/fulgur-output-file.XXXXXX", path[300], buf[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK_EQ(mkfifo(path, 0644), 0);
    check_node_refused(dir, path, "a FIFO", is_fifo);
    snprintf(path, sizeof path, "%s/folder", dir);
    CHECK_EQ(mkdir(path, 0755), 0);
    check_node_refused(dir, path, "a folder", is_dir);
    snprintf(path, sizeof path, "%s/null", dir);
    CHECK_EQ(symlink("/dev/null", path), 0);
    check_node_refused(dir, path, "a character device", is_null_link);

    /* a regular file: replaced whole, truncated by "w", appended to by "a" */
    snprintf(path, sizeof path, "%s/file", dir);
    CHECK_OK(fg_output_write_atomic(path, write_hello, "one\n", &fg_test_err));
    CHECK_OK(fg_output_write_atomic(path, write_hello, "two\n", &fg_test_err));
    slurp(path, buf, sizeof buf);
    CHECK_STR(buf, "two\n");
    FILE *f = NULL;
    CHECK_OK(fg_output_open(path, "a", &f, &fg_test_err));
    if (f) fputs("three\n", f), fclose(f);
    slurp(path, buf, sizeof buf);
    CHECK_STR(buf, "two\nthree\n");
    CHECK_OK(fg_output_open(path, "w", &f, &fg_test_err));
    if (f) fputs("four\n", f), fclose(f);
    slurp(path, buf, sizeof buf);
    CHECK_STR(buf, "four\n");
    CHECK_EQ(temporaries_in(dir), 0);

    /* a dangling link is no node: the rename replaces the link alone */
    snprintf(path, sizeof path, "%s/dangling", dir);
    CHECK_EQ(symlink("/nonexistent/x", path), 0);
    CHECK_OK(fg_output_check_target(path, &fg_test_err));

    /* a write that runs out of room (EFBIG under a file size limit, as ENOSPC on a full
     * disk) is FG_IO_ERROR, the old file kept, no temporary left */
    snprintf(path, sizeof path, "%s/file", dir);
    struct rlimit old, small = {64 * 1024, 64 * 1024};
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    small.rlim_max = old.rlim_max;
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    fg_error err = {0};
    CHECK_STATUS(fg_output_write_atomic(path, write_big, NULL, &err), FG_IO_ERROR);
    CHECK_CONTAINS(err.message, "File too large");
    CHECK_CONTAINS(err.message, "/file.tmp.");
    setrlimit(RLIMIT_FSIZE, &old);
    slurp(path, buf, sizeof buf);
    CHECK_STR(buf, "four\n");
    CHECK_EQ(temporaries_in(dir), 0);
    CHECK_EQ(fg_output_errno_status(ENOSPC), FG_IO_ERROR);
    CHECK_EQ(fg_output_errno_status(EDQUOT), FG_IO_ERROR);
    CHECK_EQ(fg_output_errno_status(EIO), FG_IO_ERROR);
    CHECK_EQ(fg_output_errno_status(EROFS), FG_IO_ERROR);
    CHECK_EQ(fg_output_errno_status(EACCES), FG_INVALID_ARGUMENT);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ(system(cmd), 0);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"dataset_info", .run = case_dataset_info},
        {"check_read", .run = case_check_read},
        {"number_text", .run = case_number_text},
        {"precision", .run = case_precision},
        {"callback", .run = case_callback},
        {"topology", .run = case_topology},
        {"output_file", .run = case_output_file},
        {"config_value", .run = case_config_value},
        {"split_paths", .run = case_split_paths},
        {"worker_gang", .run = case_worker_gang},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
