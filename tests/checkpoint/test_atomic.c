/* A crash mid-write never tears PATH. PATH holds a valid old checkpoint; a child process
 * starts replacing it with a 200 MiB one and is SIGKILLed once its temporary exists and has
 * grown past 8 MiB. PATH must then still open as the old checkpoint, and every other file
 * in the folder must be one fg_ckpt_is_temporary recognises.
 *
 * The kill races the child's last write and rename; when the child wins (its temporary is
 * gone after the kill), PATH must be the complete new checkpoint instead, and the attempt
 * is repeated: at least one of three attempts must land mid-write. */
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "ckpt_test.h"

#define PATH "ckpt.safetensors"
#define BIG_TENSORS 4
#define BIG_ELEMS ((size_t)50 << 18) /* F32: 50 MiB per tensor, 200 MiB in all */
#define GROWN_BYTES ((off_t)8 << 20)

static const float old_w[4] = { 1, 2, 3, 4 };

static fg_status write_old(fg_error *err)
{
    fg_ckpt_tensor t = { "w", FG_F32, 1, { 4 }, old_w };
    const char *keys[] = { "version" }, *values[] = { "old" };
    return fg_ckpt_write_atomic(PATH, &t, 1, keys, values, 1, err);
}

/* Runs in the child: never returns. */
static void write_big(void)
{
    float *data = calloc(BIG_ELEMS, sizeof(float)); /* untouched zero pages: free to "fill" */
    if (!data)
        _exit(3);
    char names[BIG_TENSORS][16];
    fg_ckpt_tensor t[BIG_TENSORS];
    for (int i = 0; i < BIG_TENSORS; i++) {
        snprintf(names[i], sizeof names[i], "big.%d", i);
        t[i] = (fg_ckpt_tensor){ names[i], FG_F32, 1, { (int64_t)BIG_ELEMS }, data };
    }
    const char *keys[] = { "version" }, *values[] = { "new" };
    fg_error err = { 0 };
    _exit(fg_ckpt_write_atomic(PATH, t, BIG_TENSORS, keys, values, 1, &err) == FG_OK ? 0 : 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Polls the child's temporary until it has grown, the child exits, or 30 s pass. Returns 1
 * when it grew. */
static int wait_until_grown(pid_t child, const char *tmp)
{
    double deadline = now_s() + 30.0;
    const struct timespec pause = { 0, 100 * 1000 }; /* 0.1 ms between polls */
    while (now_s() < deadline) {
        struct stat st;
        if (stat(tmp, &st) == 0 && st.st_size >= GROWN_BYTES)
            return 1;
        int status;
        if (waitpid(child, &status, WNOHANG) == child) {
            fprintf(stderr, "the child exited (status %d) before its temporary grew\n", status);
            return -1; /* already reaped */
        }
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "%s did not reach %lld bytes within 30 s\n", tmp, (long long)GROWN_BYTES);
    return 0;
}

/* Every file but PATH is a temporary; removes them. Returns how many there were. */
static int check_and_remove_leftovers(void)
{
    int n = 0;
    DIR *d = opendir(".");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, PATH) == 0)
            continue;
        if (!fg_ckpt_is_temporary(e->d_name)) {
            fprintf(stderr, "leftover '%s' is not recognised as a temporary\n", e->d_name);
            fg_test_failures++;
        }
        unlink(e->d_name);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* PATH opens and is the complete old checkpoint (want_old) or the complete new one. */
static void check_path_is(int want_old)
{
    fg_ckpt *c = NULL;
    fg_error err = { 0 };
    fg_status st = fg_ckpt_open(PATH, &c, &err);
    CHECK_STATUS(st, FG_OK);
    if (st != FG_OK) {
        fprintf(stderr, "  %s\n", err.message);
        return;
    }
    CHECK_STR(fg_ckpt_meta(c, "version"), want_old ? "old" : "new");
    if (want_old) {
        float w[4] = { 0 };
        const int64_t shape[1] = { 4 };
        CHECK(fg_ckpt_tensor_count(c) == 1);
        CHECK_STATUS(fg_ckpt_read_tensor(c, "w", FG_F32, 1, shape, w, &err), FG_OK);
        CHECK(memcmp(w, old_w, sizeof w) == 0);
    } else {
        CHECK(fg_ckpt_tensor_count(c) == BIG_TENSORS);
    }
    fg_ckpt_close(c);
}

/* One attempt; returns 1 when the kill landed before the rename. */
static int attempt(void)
{
    fg_error err = { 0 };
    CHECK_STATUS(write_old(&err), FG_OK);
    fflush(NULL); /* nothing buffered twice */
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        fg_test_failures++;
        return 0;
    }
    if (child == 0)
        write_big();

    char tmp[256];
    snprintf(tmp, sizeof tmp, PATH ".tmp.%ld", (long)child);
    int grown = wait_until_grown(child, tmp);
    if (grown >= 0) {
        kill(child, SIGKILL);
        int status = 0;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
        CHECK(WIFSIGNALED(status) || WIFEXITED(status));
    }
    CHECK(grown == 1);

    struct stat st;
    int mid_write = stat(tmp, &st) == 0; /* the temporary is still there: no rename yet */
    if (mid_write)
        printf("killed mid-write: %s held %lld bytes\n", tmp, (long long)st.st_size);
    else
        printf("the child renamed before the kill landed; PATH must be the new checkpoint\n");
    check_path_is(mid_write);
    int leftovers = check_and_remove_leftovers();
    CHECK(leftovers == mid_write);
    return mid_write;
}

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-atomic");
    int landed = 0;
    for (int i = 0; i < 3 && !landed && fg_test_failures == 0; i++)
        landed = attempt();
    CHECK(landed);

    /* After a crash the next write simply replaces PATH. */
    fg_error err = { 0 };
    CHECK_STATUS(write_old(&err), FG_OK);
    check_path_is(1);
    CHECK(check_and_remove_leftovers() == 0);

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.atomic");
}
