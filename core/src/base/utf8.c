/* Strict UTF-8 validation (utf8.h). */
#include "utf8.h"

#include <string.h>

size_t fg_utf8_sequence(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = s[0], min, cp;
    size_t len;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        len = 2, min = 0x80, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
        len = 3, min = 0x800, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
        len = 4, min = 0x10000, cp = c & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    return cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : len;
}

int fg_utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    while (n > 0) {
        size_t len = fg_utf8_sequence(s, n);
        if (len == 0)
            return 0;
        s += len;
        n -= len;
    }
    return 1;
}
