/* GPT-2's byte-level alphabet: every byte is one printable Unicode character (the printable
 * Latin-1 bytes stand for themselves, the others for U+0100 onwards), so a vocabulary file
 * spells byte strings as text. */
#ifndef FG_BYTE_UNICODE_H
#define FG_BYTE_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* The code point that stands for byte b. */
uint32_t fg_byte_to_codepoint(unsigned char b);

/* The bytes a byte-level spelling (UTF-8 text of such characters) stands for, into out
 * (room for n bytes: never more than the text's length). Returns the byte count, or -1
 * when a character is not in the alphabet or the UTF-8 is invalid. */
long fg_byte_level_decode(const char *text, size_t n, unsigned char *out);

#endif
