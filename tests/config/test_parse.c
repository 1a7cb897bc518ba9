/* Parsing: entry order, values, origins, comments, and every syntax error with its place. */
#include <stdlib.h>

#include "config_test.h"

static void test_order_values_origins(void)
{
    fg_config *cfg = parse_ok("; leading comment\n"
                              "[trainer]\n"
                              "max_epochs = 3\n"
                              "seed=42\n"
                              "\n"
                              "[layer.fc1]\n"
                              "type = linear\n"
                              "units: 10\n"
                              "[empty]\n");
    if (!cfg)
        return;
    CHECK_STR(fg_config_path(cfg), "cfg.ini");
    CHECK(fg_config_section_count(cfg) == 3);
    CHECK_STR(fg_config_section_name(cfg, 0), "trainer");
    CHECK_STR(fg_config_section_name(cfg, 1), "layer.fc1");
    CHECK_STR(fg_config_section_name(cfg, 2), "empty");
    CHECK(fg_config_section_name(cfg, 3) == NULL);
    CHECK(fg_config_has_section(cfg, "empty"));
    CHECK(!fg_config_has_section(cfg, "model"));
    CHECK(fg_config_section_line(cfg, "trainer") == 2);
    CHECK(fg_config_section_line(cfg, "layer.fc1") == 6);
    CHECK(fg_config_section_line(cfg, "nope") == 0);
    CHECK(fg_config_entry_count(cfg, "trainer") == 2);
    CHECK(fg_config_entry_count(cfg, "empty") == 0);
    CHECK(fg_config_entry_count(cfg, "nope") == 0);
    CHECK_STR(fg_config_entry_key(cfg, "trainer", 0), "max_epochs");
    CHECK_STR(fg_config_entry_key(cfg, "trainer", 1), "seed");
    CHECK(fg_config_entry_key(cfg, "trainer", 2) == NULL);
    CHECK_STR(fg_config_entry_key(cfg, "layer.fc1", 1), "units");
    CHECK_STR(fg_config_get(cfg, "trainer", "max_epochs"), "3");
    CHECK_STR(fg_config_get(cfg, "trainer", "seed"), "42");
    CHECK_STR(fg_config_get(cfg, "layer.fc1", "units"), "10");
    CHECK(fg_config_get(cfg, "trainer", "units") == NULL);
    CHECK(fg_config_get(cfg, "nope", "units") == NULL);
    CHECK_STR(fg_config_origin(cfg, "trainer", NULL), "cfg.ini:2");
    CHECK_STR(fg_config_origin(cfg, "trainer", "max_epochs"), "cfg.ini:3");
    CHECK_STR(fg_config_origin(cfg, "trainer", "seed"), "cfg.ini:4");
    CHECK_STR(fg_config_origin(cfg, "layer.fc1", "units"), "cfg.ini:8");
    CHECK_STR(fg_config_origin(cfg, "empty", NULL), "cfg.ini:9");
    CHECK(fg_config_origin(cfg, "trainer", "nope") == NULL);
    CHECK(fg_config_origin(cfg, "nope", NULL) == NULL);
    fg_config_destroy(cfg);
}

static void test_comments_and_whitespace(void)
{
    fg_config *cfg = parse_ok("\xEF\xBB\xBF[a]\r\n"              /* BOM, CRLF */
                              "  k1 =   spaced value   \r\n"     /* indented, trimmed */
                              "  k2 = 5 ; semicolon comment\n"
                              "\tk3 = 6 # hash comment\n"
                              "k4 = a#b;c\n"                     /* no blank: not comments */
                              "# whole-line hash comment\n"
                              "   ; indented comment\n"
                              "k5 =\n"                           /* empty value */
                              "[ spaced ]   ; comment after a header\n"
                              "k = v");                          /* no final newline */
    if (!cfg)
        return;
    CHECK_STR(fg_config_section_name(cfg, 0), "a");
    CHECK_STR(fg_config_get(cfg, "a", "k1"), "spaced value");
    CHECK_STR(fg_config_get(cfg, "a", "k2"), "5");
    CHECK_STR(fg_config_get(cfg, "a", "k3"), "6");
    CHECK_STR(fg_config_get(cfg, "a", "k4"), "a#b;c");
    CHECK_STR(fg_config_get(cfg, "a", "k5"), "");
    CHECK_STR(fg_config_origin(cfg, "a", "k5"), "cfg.ini:8");
    CHECK(fg_config_entry_count(cfg, "a") == 5);
    CHECK_STR(fg_config_section_name(cfg, 1), "spaced");
    CHECK_STR(fg_config_get(cfg, "spaced", "k"), "v");
    CHECK_STR(fg_config_origin(cfg, "spaced", "k"), "cfg.ini:10");
    fg_config_destroy(cfg);

    /* Indented keys are keys, never continuations of the previous value. */
    cfg = parse_ok("[t]\n    a = 1\n    b = 2\n");
    if (cfg) {
        CHECK_STR(fg_config_get(cfg, "t", "a"), "1");
        CHECK_STR(fg_config_get(cfg, "t", "b"), "2");
        fg_config_destroy(cfg);
    }
}

/* inih keeps at most 49 characters of a section name; the config keeps them all. */
static void test_long_names(void)
{
    char section[121], key[121], text[400];
    memset(section, 's', 120);
    memset(key, 'k', 120);
    section[120] = key[120] = '\0';
    section[60] = '.';
    snprintf(text, sizeof text, "[%s]\n%s = 1\n", section, key);
    fg_config *cfg = parse_ok(text);
    if (!cfg)
        return;
    CHECK_STR(fg_config_section_name(cfg, 0), section);
    CHECK_STR(fg_config_entry_key(cfg, section, 0), key);
    CHECK_STR(fg_config_get(cfg, section, key), "1");
    fg_config_destroy(cfg);
}

static void test_empty_inputs(void)
{
    const char *texts[] = { "", "\n\n", "; only a comment\n# and another\n", "   \n\t\n" };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        fg_config *cfg = parse_ok(texts[i]);
        CHECK(cfg != NULL);
        CHECK(fg_config_section_count(cfg) == 0);
        fg_config_destroy(cfg);
    }
    /* The default name in messages when none is given. */
    fg_config *cfg = NULL;
    fg_error err = { 0 };
    CHECK(fg_config_parse_string("x = 1\n", NULL, &cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "<string>:1:");
}

static void test_syntax_errors(void)
{
    CHECK_PARSE_FAILS("max_epochs = 3\n",
                      "cfg.ini:1: key 'max_epochs' is outside any section; put it under a "
                      "[section] header");
    CHECK_PARSE_FAILS("; comment\n\nseed = 3\n[trainer]\n",
                      "cfg.ini:3: key 'seed' is outside any section; put it under a "
                      "[section] header");
    CHECK_PARSE_FAILS("[trainer]\nmax_epochs = 3\nseed = 1\nmax_epochs = 4\n",
                      "cfg.ini:4: duplicate key 'max_epochs' in [trainer] (first set at "
                      "cfg.ini:2)");
    CHECK_PARSE_FAILS("[trainer]\nseed = 1\n[data]\n\n[trainer]\n",
                      "cfg.ini:5: duplicate section [trainer] (first at cfg.ini:1)");
    CHECK_PARSE_FAILS("[a]\n[trainer\nk = 1\n",
                      "cfg.ini:2: section header '[trainer' has no closing ']'");
    CHECK_PARSE_FAILS("[a ; b]\n", "cfg.ini:1: section header '[a ; b]' has no closing ']'");
    CHECK_PARSE_FAILS("[a]\nk = 1\njust words\n",
                      "cfg.ini:3: expected 'key = value', '[section]' or a comment, found "
                      "'just words'");
    CHECK_PARSE_FAILS("[a]\nkey # = 1\n",
                      "cfg.ini:2: expected 'key = value', '[section]' or a comment, found "
                      "'key # = 1'");
    CHECK_PARSE_FAILS("[a] extra\n", "cfg.ini:1: unexpected text 'extra' after the section header");
    CHECK_PARSE_FAILS("[a]\n[  ]\n", "cfg.ini:2: empty section name []");
    CHECK_PARSE_FAILS("[a]\n= 1\n", "cfg.ini:2: missing key before '='");
    /* Only the first error is reported. */
    CHECK_PARSE_FAILS("[a]\nk=1\nk=2\nbroken\n",
                      "cfg.ini:3: duplicate key 'k' in [a] (first set at cfg.ini:2)");

    /* A line longer than inih's buffer reads whole (issue 17: configs fulgur writes). */
    char text[600];
    snprintf(text, sizeof text, "[a]\nok = 1\nlong = %0400d ; note\n", 7);
    fg_config *cfg = NULL;
    fg_error err = { 0 };
    CHECK(fg_config_parse_string(text, "cfg.ini", &cfg, &err) == FG_OK);
    const char *v = cfg ? fg_config_get(cfg, "a", "long") : NULL;
    CHECK(v != NULL && strlen(v) == 400 && v[399] == '7');
    fg_config_destroy(cfg);
}

static void test_files(void)
{
    fg_config *cfg = NULL;
    fg_error err = { 0 };
    CHECK(fg_config_load("good.ini", &cfg, &err) == FG_OK);
    if (cfg) {
        CHECK_STR(fg_config_path(cfg), "good.ini");
        CHECK_STR(fg_config_get(cfg, "trainer", "max_epochs"), "2");
        CHECK_STR(fg_config_origin(cfg, "trainer", "max_epochs"), "good.ini:4");
        CHECK_STR(fg_config_get(cfg, "data", "paths"),
                  "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz");
        CHECK_STR(fg_config_section_name(cfg, 2), "layer.fc1");
        CHECK_STR(fg_config_origin(cfg, "layer.fc1", NULL), "good.ini:13");
        fg_config_destroy(cfg);
    }

    cfg = NULL;
    CHECK(fg_config_load("empty.ini", &cfg, &err) == FG_OK);
    CHECK(cfg && fg_config_section_count(cfg) == 0);
    fg_config_destroy(cfg);

    cfg = (fg_config *)1;
    CHECK(fg_config_load("missing.ini", &cfg, &err) == FG_NOT_FOUND);
    CHECK(cfg == NULL);
    CHECK_STR(err.message, "missing.ini: cannot open: No such file or directory");

    CHECK(fg_config_load("dup_key.ini", &cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message,
              "dup_key.ini:6: duplicate key 'lr' in [optimizer] (first set at dup_key.ini:3)");
    CHECK(fg_config_load("dup_section.ini", &cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "dup_section.ini:7: duplicate section [trainer] (first at "
                           "dup_section.ini:2)");
    CHECK(fg_config_load("no_section.ini", &cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "no_section.ini:2: key 'max_epochs' is outside any section; put it "
                           "under a [section] header");
    CHECK(fg_config_load("syntax.ini", &cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "syntax.ini:3: expected 'key = value', '[section]' or a comment, "
                           "found 'max_epochs 3'");
    CHECK(fg_config_load("nul_byte.ini", &cfg, &err) == FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "nul_byte.ini:2: contains a NUL byte (not a text file?)");
    CHECK(fg_config_load(".", &cfg, &err) != FG_OK); /* a directory is no config */
    CHECK_CONTAINS(err.message, ".: ");
}

int main(void)
{
    test_order_values_origins();
    test_comments_and_whitespace();
    test_long_names();
    test_empty_inputs();
    test_syntax_errors();
    test_files();
    return fg_test_report("config.parse");
}
