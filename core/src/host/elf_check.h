/* The ELF checks run on a plugin file before dlopen (see elf_check.c for why). */
#ifndef FG_ELF_CHECK_H
#define FG_ELF_CHECK_H

#include "fulgur/plugin.h"

/* FG_OK when path is a regular ELF shared object of this host's class whose program
 * headers and segments lie inside the file; else the status and a message naming the
 * file and what is wrong (truncated: where the segment ends and the file's size). */
fg_status fg_elf_check_file(const char *path, fg_error *err);

#endif
