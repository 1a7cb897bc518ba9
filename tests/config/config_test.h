/* A minimal assertion kit for the config tests: each failed check prints where and what,
 * and the test exits non-zero at the end. */
#ifndef FG_TEST_CONFIG_CHECK_H
#define FG_TEST_CONFIG_CHECK_H

#include <stdio.h>
#include <string.h>

#include "config.h"

static int check_failures;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

#define CHECK_STR(actual, expected)                                                        \
    do {                                                                                   \
        const char *chk_got = (actual), *chk_want = (expected);                                       \
        if (!chk_got || !chk_want || strcmp(chk_got, chk_want) != 0) {                                           \
            fprintf(stderr, "%s:%d: CHECK_STR failed: %s\n  got:      %s%s%s\n  expected: %s\n", \
                    __FILE__, __LINE__, #actual, chk_got ? "'" : "", chk_got ? chk_got : "(null)",          \
                    chk_got ? "'" : "", chk_want ? chk_want : "(null)");                                    \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

#define CHECK_HAS(actual, fragment)                                                        \
    do {                                                                                   \
        const char *chk_got = (actual), *chk_frag = (fragment);                                       \
        if (!chk_got || !strstr(chk_got, chk_frag)) {                                                      \
            fprintf(stderr, "%s:%d: CHECK_HAS failed: %s\n  got:     %s\n  missing: %s\n", \
                    __FILE__, __LINE__, #actual, chk_got ? chk_got : "(null)", chk_frag);                  \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

/* Parses `text` as "cfg.ini"; the config must be valid. */
static inline fg_config *parse_ok(const char *text)
{
    fg_config *cfg = NULL;
    fg_error err = { 0 };
    if (fg_config_parse_string(text, "cfg.ini", &cfg, &err) != FG_OK) {
        fprintf(stderr, "unexpected parse error: %s\n", err.message);
        check_failures++;
    }
    return cfg;
}

/* Parses `text` as "cfg.ini", expects a failure and checks its exact message. */
#define CHECK_PARSE_FAILS(text, expected_)                                                   \
    do {                                                                                   \
        fg_config *c_ = (fg_config *)1;                                                    \
        fg_error err_ = { 0 };                                                             \
        fg_status st_ = fg_config_parse_string((text), "cfg.ini", &c_, &err_);             \
        CHECK(st_ == FG_INVALID_ARGUMENT);                                                 \
        CHECK(err_.status == st_);                                                         \
        CHECK(c_ == NULL);                                                                 \
        CHECK_STR(err_.message, (expected_));                                                \
        if (st_ == FG_OK)                                                                  \
            fg_config_destroy(c_);                                                         \
    } while (0)

static inline int check_report(const char *name)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
