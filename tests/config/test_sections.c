/* Section names against the known list and the named-family prefixes. */
#include "config_test.h"

static const char *const known[] = { "trainer", "backend", "precision", "strategy", "comm",
                                     "data", "model", "optimizer", "scheduler", "plugins" };
static const char *const prefixes[] = { "layer.", "callback." };
#define KNOWN_COUNT (sizeof known / sizeof known[0])

static fg_status check_sections(const fg_config *cfg, fg_error *err)
{
    return fg_config_check_sections(cfg, known, KNOWN_COUNT, prefixes, 2, err);
}

#define CHECK_SECTIONS_FAIL(text, expected_)                                                 \
    do {                                                                                   \
        fg_config *c_ = parse_ok(text);                                                    \
        fg_error e_ = { 0 };                                                               \
        CHECK(check_sections(c_, &e_) == FG_INVALID_ARGUMENT);                             \
        CHECK_STR(e_.message, (expected_));                                                  \
        fg_config_destroy(c_);                                                             \
    } while (0)

static void test_accepted(void)
{
    fg_config *cfg = parse_ok("[trainer]\n[data]\n[layer.fc1]\n[layer.conv.1]\n"
                              "[callback.early_stopping]\n[plugins]\n");
    fg_error err = { 0 };
    CHECK(check_sections(cfg, &err) == FG_OK);
    fg_config_destroy(cfg);
    cfg = parse_ok("");
    CHECK(check_sections(cfg, &err) == FG_OK);
    CHECK(fg_config_check_sections(cfg, NULL, 0, NULL, 0, &err) == FG_OK);
    fg_config_destroy(cfg);
}

static void test_unknown(void)
{
    CHECK_SECTIONS_FAIL("[trainer]\nseed = 1\n[trainr]\n",
                        "cfg.ini:3: unknown section [trainr]; did you mean [trainer]?");
    CHECK_SECTIONS_FAIL("[optimiser]\n",
                        "cfg.ini:1: unknown section [optimiser]; did you mean [optimizer]?");
    CHECK_SECTIONS_FAIL("[data]\n[layr.fc1]\n",
                        "cfg.ini:2: unknown section [layr.fc1]; did you mean [layer.fc1]?");
    CHECK_SECTIONS_FAIL("[callbacks.progress]\n",
                        "cfg.ini:1: unknown section [callbacks.progress]; did you mean "
                        "[callback.progress]?");
    CHECK_SECTIONS_FAIL("[zebra]\n",
                        "cfg.ini:1: unknown section [zebra]; known sections: [trainer], "
                        "[backend], [precision], [strategy], [comm], [data], [model], "
                        "[optimizer], [scheduler], [plugins], [layer.NAME], [callback.NAME]");
    CHECK_SECTIONS_FAIL("[layer.]\n",
                        "cfg.ini:1: section [layer.] needs a name after 'layer.', as in "
                        "[layer.NAME]");
    /* Case matters: section names are exact. */
    CHECK_SECTIONS_FAIL("[Trainer]\n",
                        "cfg.ini:1: unknown section [Trainer]; did you mean [trainer]?");

    /* A section made by an override names the argument. */
    fg_config *cfg = parse_ok("[trainer]\n");
    fg_error err = { 0 };
    CHECK(fg_config_override(cfg, "stratgy.name=ddp", &err) == FG_OK);
    CHECK(check_sections(cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "command line: stratgy.name=ddp: unknown section [stratgy]; did you "
                           "mean [strategy]?");
    fg_config_destroy(cfg);
}

int main(void)
{
    test_accepted();
    test_unknown();
    return fg_test_report("config.sections");
}
