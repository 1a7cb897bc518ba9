/* Schema validation of a section: unknown keys, typed values, required keys, and schemas
 * whose option stride differs from this build's (plugins built against other minors). */
#include <stddef.h>

#include "config_test.h"

static const fg_option trainer_opts[] = {
    { "max_epochs", FG_OPT_INT, "1000", 0, 1000000, NULL, "epochs" },
    { "max_steps", FG_OPT_INT, "-1", -1, 1e12, NULL, "steps" },
    { "seed", FG_OPT_INT, "0", 1, 0, NULL, "seed" },
    { "deterministic", FG_OPT_BOOL, "false", 0, 0, NULL, "" },
    { "gradient_clip_val", FG_OPT_FLOAT, "0", 0, 1e9, NULL, "" },
};

static const fg_option data_core_opts[] = {
    { "name", FG_OPT_STRING, "idx", 0, 0, NULL, "" },
    { "batch_size", FG_OPT_INT, "32", 1, 1 << 20, NULL, "" },
};

/* A plugin built against an older, shorter fg_option: no choices, no help. */
typedef struct old_option {
    const char *key;
    uint32_t type;
    const char *default_value;
    double min;
    double max;
} old_option;

static const old_option data_plugin_old[] = {
    { "paths", FG_OPT_LIST, FG_OPT_REQUIRED, 0, 0 },
    { "normalize", FG_OPT_BOOL, "true", 0, 0 },
    { "scale", FG_OPT_FLOAT, "1", 0, 10 },
};

/* A plugin built against a newer, longer fg_option: a field appended at the end. */
typedef struct new_option {
    fg_option base;
    const char *unit;
} new_option;

static const new_option data_plugin_new[] = {
    { { "paths", FG_OPT_LIST, FG_OPT_REQUIRED, 0, 0, NULL, "files" }, "path" },
    { { "layout", FG_OPT_ENUM, "nchw", 0, 0, "nchw|nhwc", "" }, "" },
    { { "prefetch", FG_OPT_INT, "2", 0, 64, NULL, "" }, "batches" },
};

static const fg_schema trainer_schema[] = {
    { "core", trainer_opts, sizeof trainer_opts / sizeof trainer_opts[0], sizeof(fg_option) },
};

static fg_status validate(fg_config *cfg, const char *section, const fg_schema *s, size_t n,
                          fg_error *err)
{
    return fg_config_validate_section(cfg, section, s, n, err);
}

#define CHECK_INVALID(cfg, section, schemas, n, expected_)                                   \
    do {                                                                                   \
        fg_error e_ = { 0 };                                                               \
        CHECK(validate((cfg), (section), (schemas), (n), &e_) == FG_INVALID_ARGUMENT);     \
        CHECK_STR(e_.message, (expected_));                                                  \
    } while (0)

static void test_trainer(void)
{
    fg_config *cfg = parse_ok("[trainer]\nmax_epochs = 3\nseed = -4\ndeterministic = yes\n");
    if (!cfg)
        return;
    fg_error err = { 0 };
    CHECK(validate(cfg, "trainer", trainer_schema, 1, &err) == FG_OK);
    /* A section the config does not have, with no required key, is fine. */
    CHECK(validate(cfg, "absent", trainer_schema, 1, &err) == FG_OK);

    CHECK(fg_config_override(cfg, "trainer.max_epoch=3", &err) == FG_OK);
    CHECK_INVALID(cfg, "trainer", trainer_schema, 1,
                  "command line: trainer.max_epoch=3: unknown key 'max_epoch' in [trainer]; "
                  "did you mean 'max_epochs'?");
    fg_config_destroy(cfg);

    cfg = parse_ok("[trainer]\nmax_epochs = 3\n\nmax_epoch = 4\n");
    CHECK_INVALID(cfg, "trainer", trainer_schema, 1,
                  "cfg.ini:4: unknown key 'max_epoch' in [trainer]; did you mean 'max_epochs'?");
    fg_config_destroy(cfg);

    /* Far from every key: no guess, the valid keys instead. */
    cfg = parse_ok("[trainer]\nbananas = 3\n");
    CHECK_INVALID(cfg, "trainer", trainer_schema, 1,
                  "cfg.ini:2: unknown key 'bananas' in [trainer]; valid keys: max_epochs, "
                  "max_steps, seed, deterministic, gradient_clip_val");
    CHECK_INVALID(cfg, "trainer", NULL, 0,
                  "cfg.ini:2: unknown key 'bananas' in [trainer]; [trainer] takes no keys");
    fg_config_destroy(cfg);

    /* Values are checked with the entry's origin. */
    cfg = parse_ok("[trainer]\nseed = 1\nmax_epochs = -1\n");
    CHECK_INVALID(cfg, "trainer", trainer_schema, 1,
                  "cfg.ini:3: [trainer] max_epochs = -1 is out of range [0, 1000000]");
    CHECK(fg_config_override(cfg, "trainer.max_epochs=abc", &err) == FG_OK);
    CHECK_INVALID(cfg, "trainer", trainer_schema, 1,
                  "command line: trainer.max_epochs=abc: [trainer] max_epochs = 'abc' is not "
                  "an integer");
    CHECK(fg_config_override(cfg, "trainer.max_epochs=10", &err) == FG_OK);
    CHECK(validate(cfg, "trainer", trainer_schema, 1, &err) == FG_OK);
    CHECK(fg_config_override(cfg, "trainer.max_steps=1e12", &err) == FG_OK);
    CHECK_INVALID(cfg, "trainer", trainer_schema, 1,
                  "command line: trainer.max_steps=1e12: [trainer] max_steps = '1e12' is not "
                  "an integer");
    fg_config_destroy(cfg);
}

static void test_many_keys_listing(void)
{
    fg_option many[20];
    char names[20][16];
    for (int i = 0; i < 20; i++) {
        snprintf(names[i], sizeof names[i], "key%02d", i);
        many[i] = (fg_option){ names[i], FG_OPT_STRING, "", 0, 0, NULL, "" };
    }
    fg_schema s = { "core", many, 20, sizeof(fg_option) };
    fg_config *cfg = parse_ok("[big]\nsomething_else = 1\n");
    CHECK_INVALID(cfg, "big", &s, 1,
                  "cfg.ini:2: unknown key 'something_else' in [big]; valid keys: key00, key01, "
                  "key02, key03, key04, key05, key06, key07, key08, key09, key10, key11, ...");
    fg_config_destroy(cfg);
}

static void test_plugin_strides(void)
{
    const fg_schema old_schemas[] = {
        { "core", data_core_opts, 2, sizeof(fg_option) },
        { "data.old", (const fg_option *)(const void *)data_plugin_old, 3, sizeof(old_option) },
    };
    const fg_schema new_schemas[] = {
        { "core", data_core_opts, 2, sizeof(fg_option) },
        { "data.new", &data_plugin_new[0].base, 3, sizeof(new_option) },
    };
    fg_error err = { 0 };

    /* Keys from both schemas of a section are known. */
    fg_config *cfg = parse_ok("[data]\nname = x\npaths = a,b\nnormalize = off\nscale = 2.5\n");
    CHECK(validate(cfg, "data", old_schemas, 2, &err) == FG_OK);
    CHECK(fg_config_override(cfg, "data.scale=11", &err) == FG_OK);
    CHECK_INVALID(cfg, "data", old_schemas, 2,
                  "command line: data.scale=11: [data] scale = 11 is out of range [0, 10]");
    fg_config_destroy(cfg);

    cfg = parse_ok("[data]\nbatch_size = 8\npaths = a\nlayout = nhwc\nprefetch = 4\n");
    CHECK(validate(cfg, "data", new_schemas, 2, &err) == FG_OK);
    CHECK(fg_config_override(cfg, "data.layout=nhwx", &err) == FG_OK);
    CHECK_INVALID(cfg, "data", new_schemas, 2,
                  "command line: data.layout=nhwx: [data] layout = 'nhwx' is not one of "
                  "nchw|nhwc; did you mean 'nhwc'?");
    fg_config_destroy(cfg);

    cfg = parse_ok("[data]\nprefetch = 4\nprefetc = 4\n");
    CHECK_INVALID(cfg, "data", new_schemas, 2,
                  "cfg.ini:3: unknown key 'prefetc' in [data]; did you mean 'prefetch'?");
    fg_config_destroy(cfg);

    /* A schema that is not a schema. */
    const fg_schema broken[] = { { "data.broken", NULL, 3, sizeof(fg_option) } };
    cfg = parse_ok("[data]\n");
    CHECK(validate(cfg, "data", broken, 1, &err) == FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "[data]: the option schema of data.broken is malformed");
    fg_config_destroy(cfg);
}

static void test_required(void)
{
    const fg_schema schemas[] = {
        { "core", data_core_opts, 2, sizeof(fg_option) },
        { "data.new", &data_plugin_new[0].base, 3, sizeof(new_option) },
    };
    fg_error err = { 0 };
    fg_config *cfg = parse_ok("[trainer]\nseed = 1\n\n[data]\nname = idx\n");
    CHECK_INVALID(cfg, "data", schemas, 2, "cfg.ini:4: [data] is missing required key 'paths'");
    CHECK(fg_config_override(cfg, "data.paths=x.gz", &err) == FG_OK);
    CHECK(validate(cfg, "data", schemas, 2, &err) == FG_OK);
    fg_config_destroy(cfg);

    /* The section came from the command line: no line to name. */
    cfg = parse_ok("[trainer]\n");
    CHECK(fg_config_override(cfg, "data.name=idx", &err) == FG_OK);
    CHECK_INVALID(cfg, "data", schemas, 2, "cfg.ini: [data] is missing required key 'paths'");
    /* The section is absent altogether. */
    CHECK_INVALID(cfg, "other", schemas, 2, "cfg.ini: [other] is missing required key 'paths'");
    fg_config_destroy(cfg);

    /* An old layout cut before default_value cannot declare a key required. */
    const fg_schema tiny[] = {
        { "tiny", &data_plugin_new[0].base, 1, offsetof(fg_option, default_value) },
    };
    cfg = parse_ok("[data]\n");
    CHECK(validate(cfg, "data", tiny, 1, &err) == FG_OK);
    fg_config_destroy(cfg);
}

int main(void)
{
    test_trainer();
    test_many_keys_listing();
    test_plugin_strides();
    test_required();
    return fg_test_report("config.validate");
}
