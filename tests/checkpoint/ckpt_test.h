/* File helpers for the checkpoint tests (the checks are tests/common/check.h's). Every
 * test works in a fresh folder under $TMPDIR (or /tmp) and removes it when it passes. */
#ifndef FG_TEST_CHECKPOINT_CKPT_TEST_H
#define FG_TEST_CHECKPOINT_CKPT_TEST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"

/* A fresh folder for this test; the test chdirs into it so messages name short paths. */
static inline const char *test_dir_enter(char *buf, size_t cap, const char *name)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, cap, "%s/fg-%s-XXXXXX", base && base[0] ? base : "/tmp", name);
    if (!mkdtemp(buf) || chdir(buf) != 0) {
        perror(buf);
        exit(2); /* test harness, not library code */
    }
    return buf;
}

/* Removes every file of the test folder, then the folder (it holds no subfolders). */
static inline void test_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[4096];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    if (chdir("/") != 0 || rmdir(dir) != 0)
        fprintf(stderr, "note: could not remove %s\n", dir);
}

static inline int write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) == 0 && put == n ? 0 : -1;
}

/* The whole file in a malloc'd buffer; NULL on failure. */
static inline unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(size > 0 ? (size_t)size : 1);
    if (p && fread(p, 1, (size_t)size, f) != (size_t)size) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)size;
    return p;
}

/* A safetensors file from raw header text (written as given, unpadded) and data bytes. */
static inline int write_raw_ckpt(const char *path, const char *header, const void *data,
                                 size_t data_len)
{
    size_t hlen = strlen(header);
    size_t n = 8 + hlen + data_len;
    unsigned char *p = calloc(1, n);
    if (!p)
        return -1;
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(p + 8, header, hlen);
    if (data_len)
        memcpy(p + 8 + hlen, data, data_len);
    int rc = write_bytes(path, p, n);
    free(p);
    return rc;
}

#endif
