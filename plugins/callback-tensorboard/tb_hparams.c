/* HParams plugin summaries (see tb_hparams.h): messages are built inside out, each nested
 * one in a buffer of its own that its parent copies behind a length. Runs at fit start and
 * end only, so the buffers are simply malloc'ed. */
#include "tb_hparams.h"

#include "grow_array.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2 };
enum { TYPE_STRING = 1, TYPE_BOOL = 2, TYPE_FLOAT64 = 3 };

/* A message being built; `bad` is set when an allocation failed (checked once at the end). */
typedef struct pb {
    tb_bytes b;
    int bad;
} pb;

static void put(pb *m, const void *data, size_t n)
{
    if (m->bad) return;
    if (fg_plugin_grow_array(&m->b.data, &m->b.cap, m->b.len + n, 128, 1) != 0) {
        m->bad = 1;
        return;
    }
    if (n > 0) memcpy(m->b.data + m->b.len, data, n);
    m->b.len += n;
}

static void put_varint(pb *m, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;
    while (v >= 0x80) {
        buf[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    buf[n++] = (uint8_t)v;
    put(m, buf, n);
}

static void put_key(pb *m, uint32_t field, uint32_t wire)
{
    put_varint(m, ((uint64_t)field << 3) | wire);
}

static void put_bytes(pb *m, uint32_t field, const void *data, size_t n)
{
    put_key(m, field, WIRE_BYTES);
    put_varint(m, n);
    put(m, data, n);
}

static void put_string(pb *m, uint32_t field, const char *s)
{
    put_bytes(m, field, s, strlen(s));
}

static void put_double(pb *m, uint32_t field, double v)
{
    uint64_t bits;
    uint8_t le[8];
    memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bits >> (8 * i));
    put_key(m, field, WIRE_FIXED64);
    put(m, le, 8);
}

static void put_enum(pb *m, uint32_t field, uint64_t v)
{
    put_key(m, field, WIRE_VARINT);
    put_varint(m, v);
}

/* Moves child into parent as field `field`, then frees it. */
static void put_message(pb *parent, uint32_t field, pb *child)
{
    if (child->bad) parent->bad = 1;
    put_bytes(parent, field, child->b.data, child->b.len);
    tb_bytes_free(&child->b);
}

static int value_type(const char *v)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) return TYPE_BOOL;
    char *end = NULL;
    double d = strtod(v, &end);
    if (v[0] != '\0' && v[0] != ' ' && end && *end == '\0' && isfinite(d)) return TYPE_FLOAT64;
    return TYPE_STRING;
}

/* "section.key" of config entry i; 0 past the last entry. */
static int entry(const fg_host *host, size_t i, char *name, size_t cap, const char **value)
{
    const char *section, *key;
    if (host->config_entry(host, i, &section, &key, value) != FG_OK) return 0;
    snprintf(name, cap, "%s.%s", section, key);
    if (*value == NULL) *value = "";
    return 1;
}

/* Event{wall_time, summary{value{tag, null tensor, metadata{plugin_data{"hparams",
 * HParamsPluginData{field: data}}}}}} at step 0, from the plugin data's oneof member. */
static int finish_event(tb_bytes *out, double wall_time, const char *tag, uint32_t field,
                        pb *data)
{
    pb content = {{0}, 0}, plugin = {{0}, 0}, meta = {{0}, 0}, tensor = {{0}, 0},
       shape = {{0}, 0}, dim = {{0}, 0}, value = {{0}, 0}, summary = {{0}, 0}, event = {{0}, 0};
    put_message(&content, field, data);
    put_string(&plugin, 1, "hparams");
    put_message(&plugin, 2, &content);
    put_message(&meta, 1, &plugin);
    put_message(&shape, 2, &dim); /* dim {size: 0}: an empty message */
    put_enum(&tensor, 1, 1);      /* DT_FLOAT */
    put_message(&tensor, 2, &shape);
    put_string(&value, 1, tag);
    put_message(&value, 8, &tensor);
    put_message(&value, 9, &meta);
    put_message(&summary, 1, &value);
    put_double(&event, 1, wall_time);
    put_message(&event, 5, &summary);
    if (event.bad) {
        tb_bytes_free(&event.b);
        return -1;
    }
    tb_bytes_free(out);
    *out = event.b;
    return 0;
}

int tb_encode_hparams_experiment(tb_bytes *out, double wall_time, const fg_host *host)
{
    static const char *const metrics[] = {"train/loss", "train/acc", "val/loss",
                                          "val/acc",    "test/loss", "test/acc"};
    pb exp = {{0}, 0};
    put_double(&exp, 3, wall_time);
    char name[512];
    const char *v;
    for (size_t i = 0; entry(host, i, name, sizeof name, &v); i++) {
        pb info = {{0}, 0};
        put_string(&info, 1, name);
        put_enum(&info, 4, (uint64_t)value_type(v));
        put_message(&exp, 4, &info);
    }
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
        pb info = {{0}, 0}, mname = {{0}, 0};
        put_string(&mname, 2, metrics[i]);
        put_message(&info, 1, &mname);
        put_message(&exp, 5, &info);
    }
    return finish_event(out, wall_time, "_hparams_/experiment", 2, &exp);
}

int tb_encode_hparams_session_start(tb_bytes *out, double wall_time, const fg_host *host)
{
    pb ssi = {{0}, 0};
    char name[512];
    const char *v;
    for (size_t i = 0; entry(host, i, name, sizeof name, &v); i++) {
        pb pair = {{0}, 0}, value = {{0}, 0};
        int type = value_type(v);
        if (type == TYPE_FLOAT64)
            put_double(&value, 2, strtod(v, NULL));
        else if (type == TYPE_BOOL)
            put_enum(&value, 4, strcmp(v, "true") == 0);
        else
            put_string(&value, 3, v);
        put_string(&pair, 1, name);
        put_message(&pair, 2, &value);
        put_message(&ssi, 1, &pair);
    }
    put_double(&ssi, 5, wall_time);
    return finish_event(out, wall_time, "_hparams_/session_start_info", 3, &ssi);
}

int tb_encode_hparams_session_end(tb_bytes *out, double wall_time, int status)
{
    pb sei = {{0}, 0};
    put_enum(&sei, 1, (uint64_t)status);
    put_double(&sei, 2, wall_time);
    return finish_event(out, wall_time, "_hparams_/session_end_info", 4, &sei);
}
