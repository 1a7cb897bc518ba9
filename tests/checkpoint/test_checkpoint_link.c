/* workflow.checkpoint_link: a checkpoint's second name (save_last). On one file system it
 * is a hard link (same inode); across file systems, where link() fails with EXDEV, a copy
 * with the same bytes. Either replaces an old file of that name. Usage: DIR [OTHER_FS_DIR]
 * (the second case is skipped, exit 77 after the first passes, when no other file system
 * is at hand). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint_link.h"


static void write_file(const char *path, const char *text)
{
    unlink(path); /* a new file, as the trainer's atomic write makes one */
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void read_file(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
}

static void check_pair(const char *src, const char *dst, int same_inode)
{
    fg_error err = {0};
    fg_status st = fg_checkpoint_link(src, dst, &err);
    CHECK(st == FG_OK, "%s", err.message);
    struct stat a, b;
    CHECK(stat(src, &a) == 0 && stat(dst, &b) == 0, "stat");
    CHECK((a.st_ino == b.st_ino && a.st_dev == b.st_dev) == same_inode, "%s and %s: inodes %s",
          src, dst, same_inode ? "differ" : "are the same");
    char text[64];
    read_file(dst, text, sizeof text);
    CHECK(strcmp(text, "new checkpoint bytes") == 0, "%s holds '%s'", dst, text);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.link", dst);
    CHECK(access(tmp, F_OK) != 0, "%s left behind", tmp);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s/epoch=1.safetensors", argv[1]);
    snprintf(dst, sizeof dst, "%s/last.safetensors", argv[1]);
    write_file(src, "new checkpoint bytes");
    write_file(dst, "the previous last");
    check_pair(src, dst, 1);
    check_pair(src, dst, 1); /* dst already is src's second name */
    fg_error err = {0};
    snprintf(dst, sizeof dst, "%s/no/such/folder/last.safetensors", argv[1]);
    CHECK(fg_checkpoint_link(src, dst, &err) != FG_OK && strstr(err.message, "last.safetensors"),
          "a missing folder: %s", err.message);
    int skipped = 1;
    struct stat a, b;
    if (argc > 2 && stat(argv[1], &a) == 0 && stat(argv[2], &b) == 0 && a.st_dev != b.st_dev) {
        snprintf(dst, sizeof dst, "%s/fulgur-link-%d.safetensors", argv[2], (int)getpid());
        write_file(dst, "the previous last");
        check_pair(src, dst, 0);
        unlink(dst);
        skipped = 0;
    }
    if (!fg_test_failures && argc > 2 && skipped) {
        printf("SKIP: %s is not another file system than %s\n", argv[2], argv[1]);
        return 77;
    }
    return fg_test_report("workflow.checkpoint_link");
}
