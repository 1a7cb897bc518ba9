/* What a fake fg_host's typed getters do with an option's text, shared by the plugin test
 * harnesses: NULL (no value, no default) is FG_NOT_FOUND, text that is not the type is
 * FG_INVALID_ARGUMENT, as the real host answers. */
#ifndef FG_TEST_OPTION_TEXT_H
#define FG_TEST_OPTION_TEXT_H

#include <fulgur/plugin.h>

fg_status fg_test_option_string(const char *text, const char **out);
fg_status fg_test_option_int(const char *text, int64_t *out);
fg_status fg_test_option_float(const char *text, double *out);
/* true/false, 1/0, yes/no, on/off, any case */
fg_status fg_test_option_bool(const char *text, int *out);

#endif
