/* TFRecord framing, the container of TensorBoard event files. Each record is
 *   uint64 length (little endian) | uint32 masked_crc32c(length bytes) |
 *   data[length]                  | uint32 masked_crc32c(data)
 * with CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and the mask
 * ((crc >> 15) | (crc << 17)) + 0xa282ead8, as TensorFlow's record_writer.cc writes it. */
#ifndef TB_TFRECORD_H
#define TB_TFRECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The byte-at-a-time table lives in the writer's instance: plugins keep no global state. */
typedef struct tfrecord_crc {
    uint32_t table[256];
} tfrecord_crc;

void tfrecord_crc_init(tfrecord_crc *c);

/* CRC-32C of n bytes (init and final xor 0xffffffff): "123456789" gives 0xe3069283. */
uint32_t tfrecord_crc32c(const tfrecord_crc *c, const uint8_t *p, size_t n);

uint32_t tfrecord_mask(uint32_t crc);

/* Writes one framed record. Returns 0, or -1 when the stream reported an error. */
int tfrecord_write(FILE *f, const tfrecord_crc *c, const uint8_t *data, size_t n);

#endif
