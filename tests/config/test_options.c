/* Typed values: bool, int, float, enum, list, string, with ranges and messages. */
#include <math.h>
#include <stdint.h>

#include "config_test.h"

static const fg_option opt_epochs = { "max_epochs", FG_OPT_INT, "1000", 0, 1000000, NULL, "" };
static const fg_option opt_seed = { "seed", FG_OPT_INT, "0", 1, 0, NULL, "no range" };
static const fg_option opt_clip = { "gradient_clip_val", FG_OPT_FLOAT, "0", 0, 0.5, NULL, "" };
static const fg_option opt_lr = { "lr", FG_OPT_FLOAT, "0.1", 1, 0, NULL, "no range" };
static const fg_option opt_det = { "deterministic", FG_OPT_BOOL, "false", 0, 0, NULL, "" };
static const fg_option opt_prec = { "name", FG_OPT_ENUM, "fp32", 0, 0,
                                    "fp32|fp16-mixed|bf16-mixed", "" };
static const fg_option opt_paths = { "paths", FG_OPT_LIST, NULL, 0, 0, NULL, "" };
static const fg_option opt_dir = { "default_root_dir", FG_OPT_STRING, ".", 0, 0, NULL, "" };

static fg_status check(const fg_option *opt, const char *value, fg_error *err)
{
    return fg_option_check(opt, value, "cfg.ini:12", "trainer", err);
}

#define CHECK_ACCEPTS(opt, value)                                                          \
    do {                                                                                   \
        fg_error e_ = { 0 };                                                               \
        fg_status s_ = check(&(opt), (value), &e_);                                        \
        if (s_ != FG_OK)                                                                   \
            fprintf(stderr, "  rejected: %s\n", e_.message);                               \
        CHECK(s_ == FG_OK);                                                                \
    } while (0)

#define CHECK_REJECTS(opt, value, expected_)                                                 \
    do {                                                                                   \
        fg_error e_ = { 0 };                                                               \
        CHECK(check(&(opt), (value), &e_) == FG_INVALID_ARGUMENT);                         \
        CHECK(e_.status == FG_INVALID_ARGUMENT);                                           \
        CHECK_STR(e_.message, (expected_));                                                  \
    } while (0)

static void test_bool(void)
{
    const char *yes[] = { "true", "TRUE", "True", "1", "yes", "Yes", "on", "ON" };
    const char *no[] = { "false", "FALSE", "0", "no", "NO", "off", "Off" };
    int v = -1;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        v = -1;
        CHECK(fg_option_parse_bool(yes[i], &v) == FG_OK && v == 1);
        CHECK_ACCEPTS(opt_det, yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        v = -1;
        CHECK(fg_option_parse_bool(no[i], &v) == FG_OK && v == 0);
    }
    const char *bad[] = { "", "2", "truee", "y", "n", "t", "onn", " true", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(fg_option_parse_bool(bad[i], &v) == FG_INVALID_ARGUMENT);
    CHECK_REJECTS(opt_det, "maybe",
                  "cfg.ini:12: [trainer] deterministic = 'maybe' is not a boolean "
                  "(true|false|1|0|yes|no|on|off)");
}

static void test_int(void)
{
    int64_t v = 0;
    CHECK(fg_option_parse_int("42", &v) == FG_OK && v == 42);
    CHECK(fg_option_parse_int("-7", &v) == FG_OK && v == -7);
    CHECK(fg_option_parse_int("+7", &v) == FG_OK && v == 7);
    CHECK(fg_option_parse_int("9223372036854775807", &v) == FG_OK && v == INT64_MAX);
    CHECK(fg_option_parse_int("-9223372036854775808", &v) == FG_OK && v == INT64_MIN);
    const char *bad[] = { "", "abc", "1.5", "1e3", "0x10", "12abc", " 1", "1 ", "9223372036854775808" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(fg_option_parse_int(bad[i], &v) == FG_INVALID_ARGUMENT);

    CHECK_ACCEPTS(opt_epochs, "0");
    CHECK_ACCEPTS(opt_epochs, "1000000");
    CHECK_ACCEPTS(opt_seed, "-5"); /* min > max: no range */
    CHECK_REJECTS(opt_epochs, "abc", "cfg.ini:12: [trainer] max_epochs = 'abc' is not an integer");
    CHECK_REJECTS(opt_epochs, "2.5", "cfg.ini:12: [trainer] max_epochs = '2.5' is not an integer");
    CHECK_REJECTS(opt_epochs, "", "cfg.ini:12: [trainer] max_epochs = '' is not an integer");
    CHECK_REJECTS(opt_epochs, "-1",
                  "cfg.ini:12: [trainer] max_epochs = -1 is out of range [0, 1000000]");
    CHECK_REJECTS(opt_epochs, "1000001",
                  "cfg.ini:12: [trainer] max_epochs = 1000001 is out of range [0, 1000000]");
    CHECK_REJECTS(opt_seed, "99999999999999999999",
                  "cfg.ini:12: [trainer] seed = '99999999999999999999' is too large for a "
                  "64-bit integer");
}

static void test_float(void)
{
    double v = 0;
    CHECK(fg_option_parse_float("0.25", &v) == FG_OK && v == 0.25);
    CHECK(fg_option_parse_float("1e-3", &v) == FG_OK && fabs(v - 1e-3) < 1e-18);
    CHECK(fg_option_parse_float("-2", &v) == FG_OK && v == -2.0);
    const char *bad[] = { "", "abc", "1.5x", "nan", "inf", "-inf", "1e999", " 1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(fg_option_parse_float(bad[i], &v) == FG_INVALID_ARGUMENT);

    CHECK_ACCEPTS(opt_clip, "0");
    CHECK_ACCEPTS(opt_clip, "0.5");
    CHECK_ACCEPTS(opt_lr, "123.5");
    CHECK_REJECTS(opt_clip, "0.6",
                  "cfg.ini:12: [trainer] gradient_clip_val = 0.6 is out of range [0, 0.5]");
    CHECK_REJECTS(opt_clip, "-1e-9",
                  "cfg.ini:12: [trainer] gradient_clip_val = -1e-9 is out of range [0, 0.5]");
    CHECK_REJECTS(opt_lr, "fast", "cfg.ini:12: [trainer] lr = 'fast' is not a number");
    CHECK_REJECTS(opt_lr, "nan", "cfg.ini:12: [trainer] lr = 'nan' is not a finite number");
    CHECK_REJECTS(opt_lr, "1e999", "cfg.ini:12: [trainer] lr = '1e999' is not a finite number");
}

static void test_enum(void)
{
    CHECK_ACCEPTS(opt_prec, "fp32");
    CHECK_ACCEPTS(opt_prec, "fp16-mixed");
    CHECK_ACCEPTS(opt_prec, "bf16-mixed");
    fg_error err = { 0 };
    CHECK(fg_option_check(&opt_prec, "bf17-mixed", "cfg.ini:4", "precision", &err) ==
          FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "cfg.ini:4: [precision] name = 'bf17-mixed' is not one of "
                           "fp32|fp16-mixed|bf16-mixed; did you mean 'bf16-mixed'?");
    CHECK_REJECTS(opt_prec, "FP32",
                  "cfg.ini:12: [trainer] name = 'FP32' is not one of fp32|fp16-mixed|bf16-mixed; "
                  "did you mean 'fp32'?");
    CHECK_REJECTS(opt_prec, "double",
                  "cfg.ini:12: [trainer] name = 'double' is not one of fp32|fp16-mixed|bf16-mixed");
    CHECK_REJECTS(opt_prec, "fp", /* a prefix is not a choice */
                  "cfg.ini:12: [trainer] name = 'fp' is not one of fp32|fp16-mixed|bf16-mixed; "
                  "did you mean 'fp32'?");
    CHECK_REJECTS(opt_prec, "", "cfg.ini:12: [trainer] name = '' is not one of "
                                "fp32|fp16-mixed|bf16-mixed");
}

static void test_list_and_string(void)
{
    CHECK_ACCEPTS(opt_paths, "a.gz");
    CHECK_ACCEPTS(opt_paths, "a.gz, b.gz,c.gz");
    CHECK_ACCEPTS(opt_paths, ""); /* the empty list */
    CHECK_REJECTS(opt_paths, "a.gz,,b.gz",
                  "cfg.ini:12: [trainer] paths = 'a.gz,,b.gz' has an empty item at position 2; "
                  "expected comma-separated values");
    CHECK_REJECTS(opt_paths, "a.gz, ",
                  "cfg.ini:12: [trainer] paths = 'a.gz, ' has an empty item at position 2; "
                  "expected comma-separated values");
    CHECK_REJECTS(opt_paths, ",a", "cfg.ini:12: [trainer] paths = ',a' has an empty item at "
                                   "position 1; expected comma-separated values");
    CHECK_ACCEPTS(opt_dir, "");
    CHECK_ACCEPTS(opt_dir, "any thing, at all = 1");
}

static void test_odd_options(void)
{
    fg_option weird = { "k", 99, "x", 0, 0, NULL, "" };
    fg_error err = { 0 };
    CHECK(fg_option_check(&weird, "1", "cfg.ini:1", "s", &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "cfg.ini:1: [s] k: the schema gives unknown type 99");
    /* Without a section the message names the key alone. */
    CHECK(fg_option_check(&opt_epochs, "x", "cfg.ini:2", NULL, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "cfg.ini:2: max_epochs = 'x' is not an integer");
    /* A NULL error struct is allowed: only the status comes back. */
    CHECK(fg_option_check(&opt_epochs, "x", "cfg.ini:2", "t", NULL) == FG_INVALID_ARGUMENT);
    fg_option no_choices = { "k", FG_OPT_ENUM, "x", 0, 0, NULL, "" };
    CHECK(fg_option_check(&no_choices, "anything", "o", "s", &err) == FG_OK);
}

int main(void)
{
    test_bool();
    test_int();
    test_float();
    test_enum();
    test_list_and_string();
    test_odd_options();
    return fg_test_report("config.options");
}
