/* fulgur export: [export] out (a folder, made when absent) gets model.safetensors and
 * config.json in Hugging Face's Llama layout, in [export] dtype (hf_export.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_config.h"
#include "hf_export.h"
#include "trainer_export.h"

static fg_status make_folder(const char *dir, fg_error *err)
{
    struct stat sb;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT, "[export] out = %s: cannot make the folder: "
                        "%s", dir, errno == EEXIST ? "a file of that name exists"
                                                   : strerror(errno));
}

fg_status fg_trainer_export(const fg_verb_model *vm, fg_error *err)
{
    const char *dir = fg_config_get(vm->cfg, "export", "out");
    const char *dtype = fg_config_get(vm->cfg, "export", "dtype");
    if (!dir || !*dir)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur export needs --out DIR (or "
                            "[export] out): the folder for model.safetensors and config.json");
    fg_status st = make_folder(dir, err);
    if (st != FG_OK)
        return st;
    char base[4096];
    fg_hf_config_path(vm->cfg, base, sizeof base);
    return fg_hf_llama_export(vm->model, vm->init_params, dir,
                              dtype && strcmp(dtype, "bf16") == 0 ? FG_BF16 : FG_F32,
                              base[0] ? base : NULL, fg_model_input_shape(vm->model)->dims[0],
                              vm->out, err);
}
