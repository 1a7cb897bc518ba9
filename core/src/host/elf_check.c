/* A plugin file is checked as an ELF shared object before dlopen maps it: dlopen maps each
 * segment the program headers name, and touching a mapped page past the end of a truncated
 * file raises SIGBUS in the loader, beyond any error path. So every program header must lie
 * inside the file, and every segment's file bytes too. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_check.h"

/* More program headers than this is a corrupt count (real objects have about ten). */
#define FG_ELF_PHNUM_MAX 4096u

static int read_at(int fd, void *buf, size_t size, off_t offset)
{
    unsigned char *p = buf;
    while (size > 0) {
        ssize_t n = pread(fd, p, size, offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        p += n;
        size -= (size_t)n;
        offset += n;
    }
    return 1;
}

static fg_status check_header(const ElfW(Ehdr) *eh, uint64_t file_size, const char *path,
                              fg_error *err)
{
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot be opened: not an ELF file (bad magic)", path);
    if (eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32))
        return fg_error_set(err, FG_INCOMPATIBLE, "%s: cannot be opened: ELF class %u does not match this host",
                            path, (unsigned)eh->e_ident[EI_CLASS]);
    if (eh->e_type != ET_DYN)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: cannot be opened: ELF type %u is not a shared object", path,
                            (unsigned)eh->e_type);
    if (eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0 ||
        eh->e_phnum > FG_ELF_PHNUM_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: cannot be opened: malformed ELF program header table (%u entries of %u bytes)",
                            path, (unsigned)eh->e_phnum, (unsigned)eh->e_phentsize);
    uint64_t table_end = (uint64_t)eh->e_phoff + (uint64_t)eh->e_phnum * eh->e_phentsize;
    if (table_end > file_size)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: cannot be opened: truncated: the ELF program headers end at byte %llu, the file "
                            "has %llu", path, (unsigned long long)table_end,
                            (unsigned long long)file_size);
    return FG_OK;
}

static fg_status check_segments(int fd, const ElfW(Ehdr) *eh, uint64_t file_size,
                                const char *path, fg_error *err)
{
    size_t bytes = (size_t)eh->e_phnum * sizeof(ElfW(Phdr));
    ElfW(Phdr) *ph = malloc(bytes);
    if (ph == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    fg_status st = FG_OK;
    if (!read_at(fd, ph, bytes, (off_t)eh->e_phoff))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot read the ELF program headers",
                          path);
    for (unsigned i = 0; st == FG_OK && i < eh->e_phnum; i++) {
        uint64_t end = (uint64_t)ph[i].p_offset + (uint64_t)ph[i].p_filesz;
        if (ph[i].p_filesz != 0 && (end < ph[i].p_offset || end > file_size))
            st = fg_error_set(err, FG_INVALID_ARGUMENT,
                              "%s: cannot be opened: truncated: ELF segment %u (type %u) ends at byte %llu, the "
                              "file has %llu", path, i, (unsigned)ph[i].p_type,
                              (unsigned long long)end, (unsigned long long)file_size);
    }
    free(ph);
    return st;
}

fg_status fg_elf_check_file(const char *path, fg_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: cannot be opened: %s", path,
                            strerror(errno));
    struct stat st_buf;
    fg_status st = FG_OK;
    ElfW(Ehdr) eh;
    if (fstat(fd, &st_buf) != 0 || !S_ISREG(st_buf.st_mode))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a regular file", path);
    else if (!read_at(fd, &eh, sizeof eh, 0))
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "%s: cannot be opened: truncated: %lld bytes, shorter than an ELF header", path,
                          (long long)st_buf.st_size);
    if (st == FG_OK)
        st = check_header(&eh, (uint64_t)st_buf.st_size, path, err);
    if (st == FG_OK)
        st = check_segments(fd, &eh, (uint64_t)st_buf.st_size, path, err);
    close(fd);
    return st;
}
