/* Broken and random inputs: ~2000 mutated or random texts through parsing, overrides,
 * section checks and validation. Each must either succeed or fail with a message that
 * names the file; nothing may crash or leak (the _asan build checks the latter). */
#include <stdint.h>
#include <stdlib.h>

#include "config_test.h"

#define FUZZ_CASES 2000
#define FUZZ_MAX_TEXT 2048

typedef struct rng {
    uint64_t s;
} rng;

/* xorshift64*: small, seeded, the same sequence on every run. */
static uint64_t next(rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

static size_t below(rng *r, size_t n)
{
    return n ? (size_t)(next(r) % n) : 0;
}

static const char *const seeds[] = {
    "[trainer]\nmax_epochs = 3\nseed = 1\n[data]\nname = idx\npaths = a.gz, b.gz\n",
    "; comment\n[layer.fc1]\ntype = linear\nunits: 10 ; inline\n[callback.progress]\n",
    "\xEF\xBB\xBF[precision]\r\nname = bf16-mixed # hash\r\n\r\n[optimizer]\r\nlr=1e-3\r\n",
    "[a]\n  k = v\n\t[b]\nk2 = \n[c]   ; x\n",
};

/* Bytes that matter to an INI reader, so mutations hit interesting paths often. */
static const char special[] = "[]=:;#\n\r\t .,|\"\\\xEF\xBB\xBF\x01\x7f\xff";

static size_t mutate(rng *r, char *buf, size_t len)
{
    int edits = 1 + (int)below(r, 8);
    for (int e = 0; e < edits; e++) {
        size_t at = below(r, len + 1);
        char c = below(r, 2) ? special[below(r, sizeof special - 1)] : (char)(1 + below(r, 255));
        switch (below(r, 5)) {
        case 0: /* insert one byte */
            if (len + 1 < FUZZ_MAX_TEXT) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = c;
                len++;
            }
            break;
        case 1: /* delete a run */
            if (at < len) {
                size_t n = 1 + below(r, len - at);
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
            }
            break;
        case 2: /* overwrite one byte */
            if (at < len)
                buf[at] = c;
            break;
        case 3: { /* duplicate a run (duplicate keys and sections) */
            size_t n = at < len ? 1 + below(r, len - at) : 0;
            if (n && len + n < FUZZ_MAX_TEXT) {
                memmove(buf + at + n, buf + at, len - at);
                len += n;
            }
            break;
        }
        default: /* a long run of one byte (over-long lines) */
            for (size_t n = below(r, 300); n > 0 && len + 1 < FUZZ_MAX_TEXT; n--) {
                memmove(buf + at + 1, buf + at, len - at);
                buf[at] = c;
                len++;
            }
        }
    }
    return len;
}

static size_t random_text(rng *r, char *buf)
{
    size_t len = below(r, 400);
    for (size_t i = 0; i < len; i++)
        buf[i] = below(r, 3) ? special[below(r, sizeof special - 1)] : (char)(1 + below(r, 255));
    return len;
}

static const fg_option opts[] = {
    { "name", FG_OPT_ENUM, "idx", 0, 0, "idx|csv|synthetic", "" },
    { "k", FG_OPT_INT, "0", -5, 5, NULL, "" },
    { "k2", FG_OPT_FLOAT, "0", 0, 1, NULL, "" },
    { "lr", FG_OPT_FLOAT, "0.1", 1, 0, NULL, "" },
    { "paths", FG_OPT_LIST, FG_OPT_REQUIRED, 0, 0, NULL, "" },
    { "units", FG_OPT_BOOL, "true", 0, 0, NULL, "" },
};
static const char *const known[] = { "trainer", "data", "a", "b", "c" };
static const char *const prefixes[] = { "layer.", "callback." };

static void exercise(rng *r, fg_config *cfg)
{
    fg_schema schema = { "fuzz", opts, sizeof opts / sizeof opts[0], sizeof(fg_option) };
    fg_error err = { 0 };
    size_t n = fg_config_section_count(cfg);
    for (size_t i = 0; i < n; i++) {
        const char *section = fg_config_section_name(cfg, i);
        CHECK(section != NULL && *section);
        for (size_t j = 0; j < fg_config_entry_count(cfg, section); j++) {
            const char *key = fg_config_entry_key(cfg, section, j);
            CHECK(key && fg_config_get(cfg, section, key) && fg_config_origin(cfg, section, key));
        }
        if (fg_config_validate_section(cfg, section, &schema, 1, &err) != FG_OK)
            CHECK(err.message[0] != '\0');
    }
    if (fg_config_check_sections(cfg, known, 5, prefixes, 2, &err) != FG_OK)
        CHECK(err.message[0] != '\0');

    /* A random override: either applied or refused with the expected form. */
    char arg[64];
    size_t len = below(r, sizeof arg - 1);
    for (size_t i = 0; i < len; i++)
        arg[i] = below(r, 2) ? "a.b=.c=="[below(r, 8)] : (char)(1 + below(r, 255));
    arg[len] = '\0';
    if (fg_config_override(cfg, arg, &err) != FG_OK)
        CHECK_CONTAINS(err.message, "expected the form section.key=value");
    CHECK(fg_config_set(cfg, "data", "paths", "x", &err) == FG_OK);
}

/* argv[1], when given, sets the number of cases and argv[2] the seed (for longer runs by
 * hand); ctest runs the default. */
int main(int argc, char **argv)
{
    int cases = argc > 1 ? atoi(argv[1]) : FUZZ_CASES;
    rng r = { argc > 2 ? strtoull(argv[2], NULL, 0) | 1 : 0x9E3779B97F4A7C15ULL };
    static char text[FUZZ_MAX_TEXT + 1];
    int parsed = 0, refused = 0;
    for (int i = 0; i < cases; i++) {
        size_t len;
        if (i % 4 == 3) {
            len = random_text(&r, text);
        } else {
            const char *seed = seeds[below(&r, sizeof seeds / sizeof seeds[0])];
            len = strlen(seed);
            memcpy(text, seed, len);
            len = mutate(&r, text, len);
        }
        text[len] = '\0'; /* a NUL among the bytes just ends the text early */

        fg_config *cfg = NULL;
        fg_error err = { 0 };
        fg_status st = fg_config_parse_string(text, "fuzz.ini", &cfg, &err);
        if (st == FG_OK) {
            CHECK(cfg != NULL);
            parsed++;
            exercise(&r, cfg);
            fg_config_destroy(cfg);
        } else {
            refused++;
            CHECK(cfg == NULL);
            CHECK(st == FG_INVALID_ARGUMENT);
            CHECK(strncmp(err.message, "fuzz.ini:", 9) == 0);
        }
    }
    printf("config.fuzz: %d parsed, %d refused\n", parsed, refused);
    /* Both outcomes must be exercised, or the mutations are not doing their job. */
    CHECK(parsed > cases / 20);
    CHECK(refused > cases / 20);
    return fg_test_report("config.fuzz");
}
