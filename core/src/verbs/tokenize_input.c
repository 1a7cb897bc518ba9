/* Listing and chunking `fulgur tokenize`'s input (tokenize_input.h). */
#include "tokenize_input.h"
#include "core_util.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int add_path(fg_tok_inputs *in, const char *path)
{
    if (in->count == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 16;
        char **p = realloc(in->paths, cap * sizeof *p);
        if (!p)
            return -1;
        in->paths = p;
        in->cap = cap;
    }
    return (in->paths[in->count] = strdup(path)) ? (int)++in->count * 0 : -1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static fg_status add_folder(fg_tok_inputs *in, const char *dir, fg_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: %s: cannot read the "
                            "folder: %s", dir, strerror(errno));
    size_t first = in->count;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
            rc = -1;
        else if (fg_is_regular_file(path))
            rc = add_path(in, path);
        free(path);
    }
    closedir(d);
    if (rc != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
    if (in->count == first)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: %s: the folder holds "
                            "no file", dir);
    qsort(in->paths + first, in->count - first, sizeof *in->paths, by_name);
    return FG_OK;
}

static fg_status add_glob(fg_tok_inputs *in, const char *pattern, fg_error *err)
{
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    size_t before = in->count;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
        if (fg_is_regular_file(g.gl_pathv[i]) && add_path(in, g.gl_pathv[i]) != 0)
            rc = GLOB_NOSPACE;
    if (rc != GLOB_NOMATCH)
        globfree(&g);
    if (rc == GLOB_NOSPACE)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
    if (rc != 0 || in->count == before)
        return fg_error_set(err, FG_NOT_FOUND, "fulgur tokenize: %s: no such file (nor a "
                            "glob matching a file)", pattern);
    return FG_OK;
}

fg_status fg_tok_inputs_list(const char *const *args, int n, fg_tok_inputs *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    fg_status st = n > 0 ? FG_OK : fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: "
                                                 "no INPUT (files, folders or globs)");
    for (int i = 0; st == FG_OK && i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) == 0 && S_ISDIR(sb.st_mode))
            st = add_folder(out, args[i], err);
        else if (stat(args[i], &sb) == 0 && S_ISREG(sb.st_mode))
            st = add_path(out, args[i]) == 0 ? FG_OK
               : fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
        else if (stat(args[i], &sb) == 0)
            st = fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: %s: not a regular "
                              "file or a folder", args[i]);
        else
            st = add_glob(out, args[i], err);
    }
    if (st != FG_OK)
        fg_tok_inputs_free(out);
    return st;
}

void fg_tok_inputs_free(fg_tok_inputs *in)
{
    for (size_t i = 0; i < in->count; i++)
        free(in->paths[i]);
    free(in->paths);
    memset(in, 0, sizeof *in);
}

void fg_tok_reader_init(fg_tok_reader *r, const fg_tok_inputs *in, size_t chunk_bytes)
{
    memset(r, 0, sizeof *r);
    r->in = in;
    r->chunk_bytes = chunk_bytes;
}

void fg_tok_reader_close(fg_tok_reader *r)
{
    if (r->f)
        fclose(r->f);
    free(r->carry);
    r->f = NULL;
    r->carry = NULL;
}

static int ascii_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* A byte that is surely not white space: printable ASCII (a byte >= 0x80 may start
 * U+00A0 or U+3000). */
static int surely_not_space(unsigned char c)
{
    return c < 0x80 && !ascii_space(c) && c >= 0x20;
}

/* The last split point in s (n bytes): after s[i] == '\n' with s[i-1] and s[i+1] not white
 * space. 0 when there is none. */
static size_t last_split(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = n >= 2 ? n - 2 : 0; i >= 1 && n >= 3; i--)
        if (u[i] == '\n' && surely_not_space(u[i - 1]) && surely_not_space(u[i + 1]))
            return i + 1;
    return 0;
}

/* Opens the next file with bytes to read; 0 when none is left. */
static int open_next(fg_tok_reader *r, fg_error *err)
{
    while (!r->f && r->file < r->in->count) {
        r->f = fopen(r->in->paths[r->file], "rb");
        if (!r->f) {
            fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: %s: cannot open: %s",
                         r->in->paths[r->file], strerror(errno));
            return -1;
        }
        r->offset = 0;
        r->carry_len = 0;
    }
    return r->f ? 1 : 0;
}

/* Makes room for `more` bytes after the carry. */
static int reserve(fg_tok_reader *r, size_t more)
{
    return fg_grow_bytes(&r->carry, &r->carry_cap, r->carry_len + more, r->chunk_bytes);
}

int fg_tok_reader_next(fg_tok_reader *r, fg_tok_chunk *c, fg_error *err)
{
    int rc = open_next(r, err);
    if (rc <= 0)
        return rc;
    size_t cut = 0;
    int eof = 0;
    while (!eof && !cut) { /* read until a split point past chunk_bytes, or the end */
        size_t want = r->chunk_bytes > r->carry_len ? r->chunk_bytes - r->carry_len : r->chunk_bytes;
        if (reserve(r, want) != 0) {
            fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
            return -1;
        }
        size_t got = fread(r->carry + r->carry_len, 1, want, r->f);
        if (got < want && ferror(r->f)) {
            fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur tokenize: %s: read failed at byte "
                         "%lld", r->in->paths[r->file], (long long)(r->offset + (int64_t)r->carry_len));
            return -1;
        }
        r->carry_len += got;
        r->bytes_read += (int64_t)got;
        eof = got < want;
        cut = eof ? r->carry_len : last_split(r->carry, r->carry_len);
    }
    c->text = malloc(cut ? cut : 1);
    if (!c->text) {
        fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur tokenize: out of memory");
        return -1;
    }
    memcpy(c->text, r->carry, cut);
    c->len = cut;
    c->file = r->file;
    c->offset = r->offset;
    c->doc_start = r->offset == 0;
    c->doc_end = eof;
    memmove(r->carry, r->carry + cut, r->carry_len - cut);
    r->carry_len -= cut;
    r->offset += (int64_t)cut;
    if (eof) {
        fclose(r->f);
        r->f = NULL;
        r->file++;
    }
    return 1;
}
