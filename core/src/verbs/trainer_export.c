/* fulgur export: [export] out (a folder, made when absent) gets model.safetensors (or, with
 * [export] max_shard_size, its shards and index) and config.json in Hugging Face's Llama
 * layout, in [export] dtype (hf_export.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_config.h"
#include "hf_export.h"
#include "hf_index.h"
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
    const char *shard = fg_config_get(vm->cfg, "export", "max_shard_size");
    uint64_t shard_bytes = shard && *shard ? fg_hf_shard_size_parse(shard) : 0;
    if (shard && *shard && shard_bytes == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [export] max_shard_size = %s is "
                            "not a size (bytes, or a number with KB, MB, GB, KiB, MiB, GiB)",
                            fg_config_origin(vm->cfg, "export", "max_shard_size"), shard);
    char base[4096];
    fg_hf_config_path(vm->cfg, base, sizeof base);
    return fg_hf_llama_export(vm->model, vm->init_params, dir,
                              dtype && strcmp(dtype, "bf16") == 0 ? FG_BF16 : FG_F32,
                              base[0] ? base : NULL, fg_model_input_shape(vm->model)->dims[0],
                              shard_bytes, vm->out, err);
}
