/* Hand-encoded protobuf for the two shapes of tensorflow.Event this plugin writes:
 *
 *   message Event   { double wall_time = 1; int64 step = 2;
 *                     oneof what { string file_version = 3; Summary summary = 5; } }
 *   message Summary { repeated Value value = 1; }
 *   message Value   { string tag = 1; float simple_value = 2; }
 *
 * Wire format: a key is varint((field << 3) | wire_type); wire type 0 is a varint,
 * 1 a little-endian 64-bit value (double), 2 a varint length then bytes (strings and
 * nested messages), 5 a little-endian 32-bit value (float). Lengths of nested messages are
 * computed before writing, so one pass fills a buffer sized exactly. */
#ifndef TB_EVENT_H
#define TB_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include <fulgur/callback.h>

/* A growable byte buffer; data is malloc'ed and owned by the buffer. */
typedef struct tb_bytes {
    uint8_t *data;
    size_t len;
    size_t cap;
} tb_bytes;

void tb_bytes_free(tb_bytes *b);

/* Event{wall_time, file_version}: the first record of every event file (step 0).
 * Returns 0, or -1 when out of memory. */
int tb_encode_file_version(tb_bytes *out, double wall_time, const char *version);

/* Event{wall_time, step, summary{value{tag, simple_value}...}}: one per trainer event.
 * Metrics with a NULL name are skipped. Returns 0, or -1 when out of memory. */
int tb_encode_scalars(tb_bytes *out, double wall_time, int64_t step, const fg_metric *metrics,
                      uint32_t count);

#endif
