/* Loading a plugin's .so in a test the way the host does, without the core. */
#ifndef FG_TEST_PLUGIN_LOAD_H
#define FG_TEST_PLUGIN_LOAD_H

#include <fulgur/plugin.h>

/* dlopens path (RTLD_NOW | RTLD_LOCAL; never closed, as the host never unloads a plugin)
 * and checks its descriptor: magic, ABI major, struct size, kind, name (NULL: any), init
 * and vtable present, options of this build's fg_option. NULL, and a message on stderr
 * naming the file and what is wrong, otherwise. */
const fg_plugin *fg_test_load_plugin(const char *path, uint32_t kind, const char *name);
/* The same, exiting the test (status 1) when the plugin does not load. */
const fg_plugin *fg_test_need_plugin(const char *path, uint32_t kind, const char *name);

#endif
