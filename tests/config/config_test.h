/* Helpers of the config tests (the checks are tests/common/check.h's): parsing a config
 * from text, expecting a parse to fail with an exact message. */
#ifndef FG_TEST_CONFIG_CONFIG_TEST_H
#define FG_TEST_CONFIG_CONFIG_TEST_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "config.h"

/* Parses `text` as "cfg.ini"; the config must be valid. */
static inline fg_config *parse_ok(const char *text)
{
    fg_config *cfg = NULL;
    fg_error err = { 0 };
    if (fg_config_parse_string(text, "cfg.ini", &cfg, &err) != FG_OK) {
        fprintf(stderr, "unexpected parse error: %s\n", err.message);
        fg_test_failures++;
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

#endif
