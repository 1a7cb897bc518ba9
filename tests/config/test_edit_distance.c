/* Levenshtein distance and the nearest-candidate rule behind every "did you mean". */
#include <stdlib.h>

#include "config_test.h"

static void test_distance(void)
{
    CHECK(fg_edit_distance("", "") == 0);
    CHECK(fg_edit_distance("abc", "") == 3);
    CHECK(fg_edit_distance("", "abc") == 3);
    CHECK(fg_edit_distance("same", "same") == 0);
    CHECK(fg_edit_distance("kitten", "sitting") == 3);
    CHECK(fg_edit_distance("sitting", "kitten") == 3);
    CHECK(fg_edit_distance("max_epoch", "max_epochs") == 1);
    CHECK(fg_edit_distance("flaw", "lawn") == 2);
    CHECK(fg_edit_distance("bf17-mixed", "bf16-mixed") == 1);

    /* Long words take the heap path: same answers. */
    char a[301], b[301];
    for (int i = 0; i < 300; i++) {
        a[i] = (char)('a' + i % 26);
        b[i] = a[i];
    }
    a[300] = b[300] = '\0';
    CHECK(fg_edit_distance(a, b) == 0);
    b[150] = '#';
    b[299] = '#';
    CHECK(fg_edit_distance(a, b) == 2);
    CHECK(fg_edit_distance(a, "") == 300);
    CHECK(fg_edit_distance(a, a + 100) == 100);
}

static void test_nearest(void)
{
    const char *const keys[] = { "max_epochs", "max_steps", "max_time", "seed" };
    CHECK_STR(fg_nearest("max_epoch", keys, 4), "max_epochs");
    CHECK_STR(fg_nearest("max_step", keys, 4), "max_steps");
    CHECK_STR(fg_nearest("sed", keys, 4), "seed");
    CHECK(fg_nearest("learning_rate", keys, 4) == NULL);
    CHECK(fg_nearest("x", keys, 4) == NULL);
    CHECK(fg_nearest("max_epochs", keys, 0) == NULL);
    CHECK(fg_nearest(NULL, keys, 4) == NULL);
    /* The limit is max(2, len/3): a 10-letter word allows 3 edits, a 5-letter one 2. */
    const char *const long_key[] = { "gradient_clip" };
    CHECK_STR(fg_nearest("gradent_clp", long_key, 1), "gradient_clip");  /* 2 edits */
    CHECK_STR(fg_nearest("grdnt_clip", long_key, 1), "gradient_clip");   /* 3 edits, len 10 */
    CHECK(fg_nearest("grdnt_cl", long_key, 1) == NULL);                  /* 5 edits */
    const char *const short_key[] = { "abcde" };
    CHECK_STR(fg_nearest("axcye", short_key, 1), "abcde");
    CHECK(fg_nearest("axyze", short_key, 1) == NULL);
    /* Ties go to the first candidate; NULL candidates are skipped. */
    const char *const tie[] = { NULL, "cat", "cut" };
    CHECK_STR(fg_nearest("cot", tie, 3), "cat");
}

int main(void)
{
    test_distance();
    test_nearest();
    return fg_test_report("config.edit_distance");
}
