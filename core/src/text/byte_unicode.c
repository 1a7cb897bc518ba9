/* GPT-2's bytes_to_unicode table (byte_unicode.h). */
#include "byte_unicode.h"

#include "utf8.h"

static int printable_byte(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t fg_byte_to_codepoint(unsigned char b)
{
    if (printable_byte(b))
        return b;
    uint32_t n = 0; /* the bytes before b that are not printable, in order */
    for (unsigned c = 0; c < b; c++)
        n += !printable_byte(c);
    return 256 + n;
}

/* The byte a code point stands for, or -1. */
static int codepoint_to_byte(uint32_t cp)
{
    if (cp < 256)
        return printable_byte(cp) ? (int)cp : -1;
    uint32_t n = 0;
    for (unsigned c = 0; c < 256; c++)
        if (!printable_byte(c) && 256 + n++ == cp)
            return (int)c;
    return -1;
}

static uint32_t decode_codepoint(const unsigned char *s, size_t len)
{
    static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t cp = s[0] & lead_mask[len];
    for (size_t i = 1; i < len; i++)
        cp = (cp << 6) | (s[i] & 0x3f);
    return cp;
}

long fg_byte_level_decode(const char *text, size_t n, unsigned char *out)
{
    const unsigned char *s = (const unsigned char *)text;
    long count = 0;
    for (size_t i = 0; i < n;) {
        size_t len = fg_utf8_sequence(s + i, n - i);
        int b = len ? codepoint_to_byte(decode_codepoint(s + i, len)) : -1;
        if (b < 0)
            return -1;
        out[count++] = (unsigned char)b;
        i += len;
    }
    return count;
}
