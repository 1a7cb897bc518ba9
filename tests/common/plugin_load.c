/* Loading a plugin in a test; see plugin_load.h. */
#include "plugin_load.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const fg_plugin *fg_test_load_plugin(const char *path, uint32_t kind, const char *name)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot dlopen %s: %s\n", path, dlerror());
        return NULL;
    }
    const fg_plugin *p = dlsym(lib, FG_PLUGIN_ENTRY_NAME);
    const char *wrong = NULL;
    if (!p)
        wrong = "no " FG_PLUGIN_ENTRY_NAME;
    else if (p->magic != FG_PLUGIN_MAGIC || p->abi_major != FG_ABI_MAJOR ||
             p->struct_size < sizeof *p)
        wrong = "not a descriptor of this ABI";
    else if (p->kind != kind || (name && strcmp(p->name, name) != 0))
        wrong = "another kind or name than the test was built for";
    else if (!p->init || !p->vtable || (p->options && p->option_size != sizeof(fg_option)))
        wrong = "no init, no vtable or an fg_option of another size";
    if (wrong) {
        fprintf(stderr, "%s: %s (wanted kind %u, name %s)\n", path, wrong, kind,
                name ? name : "any");
        return NULL;
    }
    return p;
}

const fg_plugin *fg_test_need_plugin(const char *path, uint32_t kind, const char *name)
{
    const fg_plugin *p = fg_test_load_plugin(path, kind, name);
    if (!p)
        exit(1);
    return p;
}
