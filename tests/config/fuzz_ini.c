/* libFuzzer target: the INI reader (core/src/base/config.c) on any text, then every
 * section and key read back, and an override applied. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* a NUL inside ends the text early, as a C string does */
    fg_config *cfg = NULL;
    fg_error err = {FG_OK, ""};
    if (fg_config_parse_string(text, "fuzz.ini", &cfg, &err) == FG_OK) {
        for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
            const char *section = fg_config_section_name(cfg, i);
            for (size_t j = 0; j < fg_config_entry_count(cfg, section); j++) {
                const char *key = fg_config_entry_key(cfg, section, j);
                if (!fg_config_get(cfg, section, key) || !fg_config_origin(cfg, section, key))
                    abort(); /* a key the reader listed must read back */
            }
        }
        fg_config_override(cfg, "trainer.max_epochs=2", &err);
        fg_config_destroy(cfg);
    }
    free(text);
    return 0;
}
