/* Fixture (ctest arch.optimizer_read_fixture): a verb that reads [optimizer] lr itself. */
#include <stdlib.h>

const char *fg_config_get(const void *cfg, const char *section, const char *key);

double tune_fixture_lr(const void *cfg)
{
    const char *lr = fg_config_get(cfg,
                                   "optimizer", "lr");
    return lr ? atof(lr) : 0.1;
}
