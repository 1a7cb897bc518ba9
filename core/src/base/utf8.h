/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF: what jansson, and
 * so every safetensors reader, accepts), for names that end up in checkpoint headers and
 * for text fulgur prints. */
#ifndef FG_UTF8_H
#define FG_UTF8_H

#include <stddef.h>

/* Bytes of the valid sequence starting at s (1 to 4), or 0 when it is invalid or runs past
 * the n bytes available. */
size_t fg_utf8_sequence(const unsigned char *s, size_t n);
/* Whether the NUL-terminated str is valid UTF-8. */
int fg_utf8_valid(const char *str);

#endif
