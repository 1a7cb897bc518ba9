/* Command-line overrides and values set from code. */
#include "config_test.h"

#define CHECK_OVERRIDE_FAILS(cfg, arg, expected_)                                            \
    do {                                                                                   \
        fg_error err_ = { 0 };                                                             \
        CHECK(fg_config_override((cfg), (arg), &err_) == FG_INVALID_ARGUMENT);             \
        CHECK_STR(err_.message, (expected_));                                                \
    } while (0)

static void test_replace_and_append(void)
{
    fg_config *cfg = parse_ok("[trainer]\nmax_epochs = 3\nseed = 1\n");
    if (!cfg)
        return;
    fg_error err = { 0 };
    CHECK(fg_config_override(cfg, "trainer.max_epochs=5", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "trainer", "max_epochs"), "5");
    CHECK_STR(fg_config_origin(cfg, "trainer", "max_epochs"),
              "command line: trainer.max_epochs=5");
    /* Replacing keeps the entry's place; a new key goes last. */
    CHECK(fg_config_override(cfg, "trainer.deterministic=true", &err) == FG_OK);
    CHECK(fg_config_entry_count(cfg, "trainer") == 3);
    CHECK_STR(fg_config_entry_key(cfg, "trainer", 0), "max_epochs");
    CHECK_STR(fg_config_entry_key(cfg, "trainer", 1), "seed");
    CHECK_STR(fg_config_entry_key(cfg, "trainer", 2), "deterministic");
    CHECK_STR(fg_config_origin(cfg, "trainer", "seed"), "cfg.ini:3");
    /* The section keeps its file origin. */
    CHECK_STR(fg_config_origin(cfg, "trainer", NULL), "cfg.ini:1");
    CHECK(fg_config_section_line(cfg, "trainer") == 1);

    /* A new section: line 0, origin the argument. */
    CHECK(fg_config_override(cfg, "strategy.name=ddp", &err) == FG_OK);
    CHECK(fg_config_section_count(cfg) == 2);
    CHECK_STR(fg_config_section_name(cfg, 1), "strategy");
    CHECK(fg_config_section_line(cfg, "strategy") == 0);
    CHECK_STR(fg_config_origin(cfg, "strategy", NULL), "command line: strategy.name=ddp");
    CHECK_STR(fg_config_get(cfg, "strategy", "name"), "ddp");

    /* Overriding twice: the last one wins, with its own origin. */
    CHECK(fg_config_override(cfg, "strategy.name=single", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "strategy", "name"), "single");
    CHECK_STR(fg_config_origin(cfg, "strategy", "name"), "command line: strategy.name=single");
    CHECK(fg_config_entry_count(cfg, "strategy") == 1);
    fg_config_destroy(cfg);
}

static void test_splitting(void)
{
    fg_config *cfg = parse_ok("");
    if (!cfg)
        return;
    fg_error err = { 0 };
    /* The section is everything before the last '.' of the left side. */
    CHECK(fg_config_override(cfg, "layer.fc1.units=10", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "layer.fc1", "units"), "10");
    CHECK(fg_config_get(cfg, "layer", "fc1.units") == NULL);
    CHECK(fg_config_override(cfg, "callback.early_stopping.patience=3", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "callback.early_stopping", "patience"), "3");
    /* Blanks around the parts are dropped; '=' and '.' in the value are kept. */
    CHECK(fg_config_override(cfg, " data . paths = a.gz,b=c.gz ", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "data", "paths"), "a.gz,b=c.gz");
    CHECK_STR(fg_config_origin(cfg, "data", "paths"), "command line:  data . paths = a.gz,b=c.gz ");
    CHECK(fg_config_override(cfg, "optimizer.lr=1e-3", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "optimizer", "lr"), "1e-3");
    /* Written without a blank before '=' (the CLI's --prompt " the"), the value is kept as
     * written: a prompt's spaces are text. */
    CHECK(fg_config_override(cfg, "generate.prompt= the ", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "generate", "prompt"), " the ");
    CHECK(fg_config_override(cfg, "generate.prompt =  the", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "generate", "prompt"), "the");
    fg_config_destroy(cfg);
}

static void test_malformed(void)
{
    fg_config *cfg = parse_ok("[trainer]\nseed = 1\n");
    if (!cfg)
        return;
    CHECK_OVERRIDE_FAILS(cfg, "trainer.max_epochs",
                         "invalid override 'trainer.max_epochs': missing '='; expected the "
                         "form section.key=value");
    CHECK_OVERRIDE_FAILS(cfg, "max_epochs=3",
                         "invalid override 'max_epochs=3': missing '.' between section and "
                         "key; expected the form section.key=value");
    CHECK_OVERRIDE_FAILS(cfg, "max_epochs=3.5",
                         "invalid override 'max_epochs=3.5': missing '.' between section and "
                         "key; expected the form section.key=value");
    CHECK_OVERRIDE_FAILS(cfg, ".max_epochs=3",
                         "invalid override '.max_epochs=3': empty section; expected the form "
                         "section.key=value");
    CHECK_OVERRIDE_FAILS(cfg, "trainer.=3",
                         "invalid override 'trainer.=3': empty key; expected the form "
                         "section.key=value");
    CHECK_OVERRIDE_FAILS(cfg, "", "invalid override '': missing '='; expected the form "
                                  "section.key=value");
    /* Nothing changed. */
    CHECK(fg_config_section_count(cfg) == 1);
    CHECK(fg_config_entry_count(cfg, "trainer") == 1);
    CHECK_STR(fg_config_get(cfg, "trainer", "seed"), "1");
    /* An empty value is the file's `key =`: it sets the key to "" (the schema judges it). */
    fg_error err = { 0 };
    CHECK(fg_config_override(cfg, "trainer.seed=  ", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "trainer", "seed"), "");
    fg_config_destroy(cfg);
}

static void test_set(void)
{
    fg_config *cfg = parse_ok("[data]\nname = idx\n");
    if (!cfg)
        return;
    fg_error err = { 0 };
    CHECK(fg_config_set(cfg, "data", "batch_size", "32", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "data", "batch_size"), "32");
    CHECK_STR(fg_config_origin(cfg, "data", "batch_size"), "default");
    CHECK(fg_config_set(cfg, "data", "name", "csv", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "data", "name"), "csv");
    CHECK_STR(fg_config_origin(cfg, "data", "name"), "default");
    CHECK_STR(fg_config_entry_key(cfg, "data", 0), "name");
    CHECK(fg_config_set(cfg, "precision", "name", "fp32", &err) == FG_OK);
    CHECK_STR(fg_config_origin(cfg, "precision", NULL), "default");
    CHECK(fg_config_section_line(cfg, "precision") == 0);
    CHECK(fg_config_set(cfg, "precision", "empty", "", &err) == FG_OK);
    CHECK_STR(fg_config_get(cfg, "precision", "empty"), "");
    CHECK(fg_config_set(cfg, "", "k", "v", &err) == FG_INVALID_ARGUMENT);
    CHECK(fg_config_set(cfg, "s", NULL, "v", &err) == FG_INVALID_ARGUMENT);
    CHECK(fg_config_set(cfg, "s", "k", NULL, &err) == FG_INVALID_ARGUMENT);
    CHECK(!fg_config_has_section(cfg, "s"));
    fg_config_destroy(cfg);
}

int main(void)
{
    test_replace_and_append();
    test_splitting();
    test_malformed();
    test_set();
    return fg_test_report("config.override");
}
