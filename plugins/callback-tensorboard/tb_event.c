/* Protobuf encoding of tensorflow.Event / Summary / Summary.Value, by hand. */
#include "tb_event.h"

#include "grow_array.h"

#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

enum {
    EVENT_WALL_TIME = 1,
    EVENT_STEP = 2,
    EVENT_FILE_VERSION = 3,
    EVENT_SUMMARY = 5,
    SUMMARY_VALUE = 1,
    VALUE_TAG = 1,
    VALUE_SIMPLE_VALUE = 2
};

void tb_bytes_free(tb_bytes *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Makes room for `need` bytes in total; the buffer is reused across events. */
static int reserve(tb_bytes *b, size_t need)
{
    return fg_plugin_grow_array(&b->data, &b->cap, need, 256, 1);
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writers below assume reserve() made room: sizes are computed up front. */
static void put_varint(tb_bytes *b, uint64_t v)
{
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
}

static void put_key(tb_bytes *b, uint32_t field, uint32_t wire)
{
    put_varint(b, ((uint64_t)field << 3) | wire);
}

static void put_le(tb_bytes *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b->data[b->len++] = (uint8_t)(v >> (8 * i));
}

static void put_double(tb_bytes *b, uint32_t field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_key(b, field, WIRE_FIXED64);
    put_le(b, bits, 8);
}

static void put_float(tb_bytes *b, uint32_t field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_key(b, field, WIRE_FIXED32);
    put_le(b, bits, 4);
}

static void put_string(tb_bytes *b, uint32_t field, const char *s, size_t n)
{
    put_key(b, field, WIRE_BYTES);
    put_varint(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

/* int64 goes on the wire as its two's complement uint64 (negative steps take 10 bytes). */
static size_t header_size(int64_t step)
{
    return 1 + 8 + 1 + varint_size((uint64_t)step);
}

static void put_header(tb_bytes *b, double wall_time, int64_t step)
{
    put_double(b, EVENT_WALL_TIME, wall_time);
    put_key(b, EVENT_STEP, WIRE_VARINT);
    put_varint(b, (uint64_t)step);
}

/* As TensorFlow writes it: step 0 is proto3's default and left out, so the record is
 * 24 bytes and the file starts with the same 12 bytes as any TensorFlow event file. */
int tb_encode_file_version(tb_bytes *out, double wall_time, const char *version)
{
    size_t n = strlen(version);
    out->len = 0;
    if (reserve(out, 1 + 8 + 1 + varint_size(n) + n) != 0)
        return -1;
    put_double(out, EVENT_WALL_TIME, wall_time);
    put_string(out, EVENT_FILE_VERSION, version, n);
    return 0;
}

/* Size of one encoded Value message (without its own key and length). */
static size_t value_size(const char *tag)
{
    size_t n = strlen(tag);
    return 1 + varint_size(n) + n + 1 + 4;
}

int tb_encode_scalars(tb_bytes *out, double wall_time, int64_t step, const fg_metric *metrics,
                      uint32_t count)
{
    size_t summary = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (metrics[i].name == NULL)
            continue;
        size_t v = value_size(metrics[i].name);
        summary += 1 + varint_size(v) + v;
    }
    out->len = 0;
    if (reserve(out, header_size(step) + 1 + varint_size(summary) + summary) != 0)
        return -1;
    put_header(out, wall_time, step);
    put_key(out, EVENT_SUMMARY, WIRE_BYTES);
    put_varint(out, summary);
    for (uint32_t i = 0; i < count; i++) {
        const char *tag = metrics[i].name;
        if (tag == NULL)
            continue;
        put_key(out, SUMMARY_VALUE, WIRE_BYTES);
        put_varint(out, value_size(tag));
        put_string(out, VALUE_TAG, tag, strlen(tag));
        put_float(out, VALUE_SIMPLE_VALUE, (float)metrics[i].value);
    }
    return 0;
}
