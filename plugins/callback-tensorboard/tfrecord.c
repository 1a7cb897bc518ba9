/* TFRecord framing and CRC-32C for TensorBoard event files. */
#include "tfrecord.h"

void tfrecord_crc_init(tfrecord_crc *c)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t r = i;
        for (int k = 0; k < 8; k++)
            r = (r & 1u) ? (r >> 1) ^ 0x82F63B78u : r >> 1;
        c->table[i] = r;
    }
}

uint32_t tfrecord_crc32c(const tfrecord_crc *c, const uint8_t *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        crc = c->table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

uint32_t tfrecord_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

int tfrecord_write(FILE *f, const tfrecord_crc *c, const uint8_t *data, size_t n)
{
    uint8_t head[12]; /* length (8) + masked crc of the length (4) */
    uint8_t tail[4];
    put_le(head, (uint64_t)n, 8);
    put_le(head + 8, tfrecord_mask(tfrecord_crc32c(c, head, 8)), 4);
    put_le(tail, tfrecord_mask(tfrecord_crc32c(c, data, n)), 4);
    if (fwrite(head, 1, sizeof head, f) != sizeof head || fwrite(data, 1, n, f) != n ||
        fwrite(tail, 1, sizeof tail, f) != sizeof tail)
        return -1;
    return 0;
}
