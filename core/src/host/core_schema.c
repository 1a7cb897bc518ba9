/* The core's own config keys. Only keys the core implements are declared here: anything
 * else in a config is refused before a run starts. */
#include "core_schema.h"

#include <string.h>

#include "fulgur/plugin.h"

#include "core_util.h"
#define NO_RANGE 1, 0

/* "Fraction or count" keys are strings: a value with a '.' is a fraction of the epoch,
 * a plain integer a number of batches (Lightning's float/int distinction). */
static const fg_option trainer_options[] = {
    {"max_epochs", FG_OPT_INT, "1", 0, 1e9, NULL, "epochs to train (stops earlier at max_steps or max_time)"},
    {"max_steps", FG_OPT_INT, "-1", -1, 1e15, NULL, "optimizer steps to train; -1: no limit"},
    {"max_time", FG_OPT_STRING, "", NO_RANGE, NULL, "wall-clock limit: seconds, HH:MM:SS or DD:HH:MM:SS; empty: none"},
    {"accumulate_grad_batches", FG_OPT_INT, "1", 1, 1e6, NULL, "micro-batches per optimizer step"},
    {"gradient_clip_val", FG_OPT_FLOAT, "0", 0, 1e30, NULL, "clip gradients to this norm (or value); 0: off"},
    {"gradient_clip_algorithm", FG_OPT_ENUM, "norm", NO_RANGE, "norm|value", "clip the global L2 norm or each value"},
    {"val_check_interval", FG_OPT_STRING, "1.0", NO_RANGE, NULL, "validate every fraction of an epoch (0.25) or every N training batches (1000)"},
    {"check_val_every_n_epoch", FG_OPT_INT, "1", 0, 1e9, NULL, "validate after every N epochs; 0: never"},
    {"limit_train_batches", FG_OPT_STRING, "1.0", NO_RANGE, NULL, "training batches per epoch: a fraction (0.5) or a count (100)"},
    {"limit_val_batches", FG_OPT_STRING, "1.0", NO_RANGE, NULL, "validation batches per check: a fraction or a count"},
    {"limit_test_batches", FG_OPT_STRING, "1.0", NO_RANGE, NULL, "test batches: a fraction or a count"},
    {"num_sanity_val_steps", FG_OPT_INT, "2", -1, 1e9, NULL, "validation batches run before training to catch bugs early; -1: all"},
    {"fast_dev_run", FG_OPT_INT, "0", 0, 1e6, NULL, "run N batches of train, val and test once, save no checkpoint; 0: off"},
    {"overfit_batches", FG_OPT_STRING, "0", NO_RANGE, NULL, "train and validate on the same first batches (fraction or count), unshuffled; 0: off"},
    {"log_every_n_steps", FG_OPT_INT, "50", 1, 1e9, NULL, "read the loss from the device and log every N optimizer steps"},
    {"seed", FG_OPT_INT, "0", 0, 9.2e18, NULL, "seeds initialisation, shuffling and dropout"},
    {"test_after_fit", FG_OPT_BOOL, "true", NO_RANGE, NULL, "evaluate on the test split when fit ends"},
    {"default_root_dir", FG_OPT_STRING, "runs", NO_RANGE, NULL, "runs go to DIR/NAME/version_N/ with the resolved config"},
    {"name", FG_OPT_STRING, "default", NO_RANGE, NULL, "the run family under default_root_dir"},
    {"ckpt_path", FG_OPT_STRING, "", NO_RANGE, NULL, "resume fit (or load for test/validate) from last, best or a FILE"},
    {"final_checkpoint", FG_OPT_STRING, "", NO_RANGE, NULL, "also write the model when fit ends to this file (relative to the run folder)"},
    {"allow_nonfinite", FG_OPT_BOOL, "false", NO_RANGE, NULL, "load a checkpoint whose tensors hold NaN or inf (refused otherwise); also --allow-nonfinite"},
    {"save_on_exception", FG_OPT_BOOL, "false", NO_RANGE, NULL, "write checkpoints/on_exception.safetensors when training fails (and checkpoints/interrupted.safetensors on Ctrl-C or SIGTERM)"},
    {"checkpoint_on_interrupt", FG_OPT_BOOL, "false", NO_RANGE, NULL, "on the first Ctrl-C or SIGTERM, stop at the next step boundary and write checkpoints/interrupted.safetensors to resume from (a second Ctrl-C exits at once)"},
    {"enable_progress_bar", FG_OPT_BOOL, "true", NO_RANGE, NULL, "a live progress bar when stdout is a terminal (callback.progress without a section); false: plain lines"},
    {"requeue_signal", FG_OPT_ENUM, "auto", NO_RANGE, "auto|SIGUSR1|SIGUSR2|none", "on this signal, checkpoint at the next step and requeue the SLURM job; auto: SIGUSR1 when SLURM_JOB_ID is set"},
};

static const fg_option data_options[] = {
    {"name", FG_OPT_STRING, FG_OPT_REQUIRED, NO_RANGE, NULL, "data plugin: idx, synthetic, ..."},
    {"batch_size", FG_OPT_INT, "64", 1, 1 << 24, NULL, "samples per training batch (per process)"},
    {"eval_batch_size", FG_OPT_INT, "0", 0, 1 << 24, NULL, "samples per evaluation batch; 0: batch_size"},
    {"num_workers", FG_OPT_INT, "2", 0, 256, NULL, "loader threads reading batches; 0: read in the training thread"},
    {"prefetch", FG_OPT_INT, "2", 1, 64, NULL, "batches read ahead of the one training"},
    {"pin_memory", FG_OPT_BOOL, "true", NO_RANGE, NULL, "stage batches in page-locked memory from the backend"},
    {"shuffle", FG_OPT_BOOL, "true", NO_RANGE, NULL, "reshuffle the training set every epoch"},
    {"drop_last", FG_OPT_BOOL, "false", NO_RANGE, NULL, "drop the last incomplete training batch"},
    {"val_split", FG_OPT_STRING, "0", NO_RANGE, NULL, "validation held out of the train split: a fraction (0.1) or a count (5000), drawn once with trainer.seed; 0: the plugin's val split"},
};

static const fg_option backend_options[] = {
    {"name", FG_OPT_STRING, "cpu", NO_RANGE, NULL, "backend plugin: cpu, cuda, ..."},
    {"cuda_graphs", FG_OPT_BOOL, "false", NO_RANGE, NULL, "CUDA: capture the training step into a CUDA graph after 2 eager steps and replay it (fixed shapes; refused where a step cannot be captured)"},
};
static const fg_option precision_options[] = {
    {"name", FG_OPT_STRING, "fp32", NO_RANGE, NULL, "precision plugin: fp32, ..."},
};
static const fg_option strategy_options[] = {
    {"name", FG_OPT_STRING, "single", NO_RANGE, NULL, "strategy plugin: single, ..."},
};
static const fg_option comm_options[] = {
    {"name", FG_OPT_STRING, FG_OPT_REQUIRED, NO_RANGE, NULL, "collectives plugin: mpi, nccl"},
};
static const fg_option plugins_options[] = {
    {"path", FG_OPT_LIST, "", NO_RANGE, NULL, "extra plugin folders, searched after --plugin-path; relative to the config file"},
};

/* fulgur export's (the command line's --out, --dtype and --max-shard-size set them). */
static const fg_option export_options[] = {
    {"out", FG_OPT_STRING, "", NO_RANGE, NULL, "the folder (made when absent) that gets model.safetensors and config.json in Hugging Face's Llama layout"},
    {"dtype", FG_OPT_ENUM, "f32", 1, 0, "f32|bf16", "the dtype of the exported tensors (bf16: rounded to nearest even)"},
    {"max_shard_size", FG_OPT_STRING, "", NO_RANGE, NULL, "empty: one model.safetensors; a size (bytes, or with KB, MB, GB, KiB, MiB, GiB as transformers' max_shard_size): model-0000K-of-0000N.safetensors shards of at most that many bytes each (a larger tensor alone in one) and model.safetensors.index.json, as save_pretrained writes them"},
};

/* fulgur generate's (the command line's --prompt, --max-new-tokens, ... set them). */
static const fg_option generate_options[] = {
    {"prompt", FG_OPT_STRING, "", NO_RANGE, NULL, "text the continuation follows (bytes as tokens); empty: start from nothing"},
    {"max_new_tokens", FG_OPT_INT, "200", 1, 1e7, NULL, "tokens to generate"},
    {"temperature", FG_OPT_FLOAT, "0.8", 0, 1e3, NULL, "sampling temperature; 0: always the most likely token"},
    {"top_k", FG_OPT_INT, "0", 0, 1e9, NULL, "sample among the k most likely tokens; 0: all"},
    {"seed", FG_OPT_INT, "0", 0, 9.2e18, NULL, "seeds the sampling: the same seed gives the same text"},
    {"tokenizer", FG_OPT_STRING, "", NO_RANGE, NULL, "a tokenizer.json, a SentencePiece .model, or a folder with encoder.json + vocab.bpe: the prompt is encoded (after the model's BOS, SentencePiece) and the text decoded by it, and the text ends at its end-of-text token (a SentencePiece model's EOS); empty: bytes (a model of 256 tokens)"},
    {"kv_cache", FG_OPT_BOOL, "true", NO_RANGE, NULL, "keep each block's keys and values: a new token runs one position, not the whole window (the text is the same; false: a full forward per token)"},
    {"chat", FG_OPT_BOOL, "false", NO_RANGE, NULL, "a chat (fulgur chat): each line of stdin a user's turn in the template \"User: LINE\\nAssistant:\", the reply up to the end-of-text token or max_new_tokens printed on a line; the KV cache kept across turns"},
    {"chat_template", FG_OPT_ENUM, "auto", NO_RANGE, "auto|plain|chatml|llama3|llama2|zephyr", "fulgur chat's form: auto: the family of the chat_template in the tokenizer_config.json beside the tokenizer (ChatML <|im_start|>: SmolLM, Qwen; Llama 3 <|start_header_id|>; Llama 2 / Mistral [INST]; Zephyr <|user|>), plain without one; a name picks the form (--chat-template); plain: \"User: LINE\\nAssistant:\""},
};

/* Every [callback.NAME] section has these beside the plugin's own keys. */
static const fg_option callback_options[] = {
    {"enabled", FG_OPT_BOOL, "true", NO_RANGE, NULL, "false: the plugin is loaded and its keys checked, but it does not run"},
};

typedef struct section_schema {
    const char *section;
    const fg_option *options;
    size_t count;
} section_schema;

static const section_schema core_schemas[] = {
    {"trainer", trainer_options, COUNT(trainer_options)},
    {"data", data_options, COUNT(data_options)},
    {"backend", backend_options, COUNT(backend_options)},
    {"precision", precision_options, COUNT(precision_options)},
    {"strategy", strategy_options, COUNT(strategy_options)},
    {"comm", comm_options, COUNT(comm_options)},
    {"plugins", plugins_options, COUNT(plugins_options)},
    {"generate", generate_options, COUNT(generate_options)},
    {"export", export_options, COUNT(export_options)},
};

const char *const fg_core_sections[] = {"trainer", "backend", "precision", "strategy", "comm",
                                        "data", "model", "optimizer", "scheduler", "plugins",
                                        "generate", "export"};
const size_t fg_core_section_count = COUNT(fg_core_sections);
const char *const fg_core_section_prefixes[] = {"layer.", "callback."};
const size_t fg_core_section_prefix_count = COUNT(fg_core_section_prefixes);

const fg_option *fg_core_schema(const char *section, size_t *count)
{
    if (strncmp(section, "callback.", 9) == 0) {
        *count = COUNT(callback_options);
        return callback_options;
    }
    for (size_t i = 0; i < COUNT(core_schemas); i++) {
        if (strcmp(core_schemas[i].section, section) == 0) {
            *count = core_schemas[i].count;
            return core_schemas[i].options;
        }
    }
    *count = 0;
    return NULL;
}

int fg_section_plugin_kind(const char *section)
{
    if (strcmp(section, "backend") == 0) return FG_KIND_BACKEND;
    if (strcmp(section, "precision") == 0) return FG_KIND_PRECISION;
    if (strcmp(section, "strategy") == 0) return FG_KIND_STRATEGY;
    if (strcmp(section, "comm") == 0) return FG_KIND_COMM;
    if (strcmp(section, "data") == 0) return FG_KIND_DATA;
    if (strncmp(section, "callback.", 9) == 0) return FG_KIND_CALLBACK;
    return 0;
}

const char *fg_section_default_plugin(const char *section)
{
    if (strncmp(section, "callback.", 9) == 0) return section + 9;
    size_t count;
    const fg_option *opts = fg_core_schema(section, &count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(opts[i].key, "name") == 0) return opts[i].default_value;
    return NULL;
}
