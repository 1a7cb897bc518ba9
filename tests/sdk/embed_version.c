/* Embeds libfulgur from an install: prints "fulgur VERSION abi MAJOR.MINOR". Built by
 * sdk.pkg_config (pkg-config flags) and sdk.cmake_embed (Fulgur::fulgur). */
#include <stdio.h>

#include <fulgur/fulgur.h>

int main(void)
{
    const char *version = fg_version();
    if (version == NULL || version[0] == '\0') {
        fprintf(stderr, "fg_version() returned an empty version\n");
        return 1;
    }
    printf("fulgur %s abi %d.%d\n", version, FG_ABI_MAJOR, fg_abi_minor());
    return 0;
}
