/* fulgur: the command. A thin client of the embedding API (fulgur/fulgur.h).
 * Exit status: 0 success, 1 runtime failure, 2 usage or config error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fulgur/fulgur.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };
#define MAX_PATHS 32
#define MAX_ARGS 256

static const char usage_text[] =
    "usage: fulgur [--plugin-path DIR]... [-q|-v] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  fit CONFIG [section.key=value]...       train (then test) as the config says\n"
    "  validate CONFIG --ckpt-path X ...       evaluate a checkpoint on the validation split\n"
    "  test CONFIG --ckpt-path X ...           evaluate a checkpoint on the test split\n"
    "  predict CONFIG --ckpt-path X ...        class probabilities of the predict split to\n"
    "                                          RUN_FOLDER/predictions.csv\n"
    "  generate CONFIG --ckpt-path X --prompt TEXT [--max-new-tokens N] [--temperature T]\n"
    "           [--top-k K] [--seed S] [--tokenizer PATH]\n"
    "                                          a language model's continuation (bytes, or the\n"
    "                                          tokens of [generate] tokenizer)\n"
    "  export CONFIG [--ckpt-path X] --out DIR [--dtype f32|bf16]\n"
    "                                          the weights (init_from's, or X's) as Hugging\n"
    "                                          Face Llama model.safetensors + config.json\n"
    "  chat CONFIG --ckpt-path X [--tokenizer PATH] [generate options]\n"
    "                                          a chat: each line of stdin a turn, each reply\n"
    "                                          printed on a line (generate with [generate]\n"
    "                                          chat = true)\n"
    "  check CONFIG [section.key=value]...     validate the config, start the plugins, open the\n"
    "                                          data and build the model; train nothing\n"
    "  plugins                                 list every plugin found, and why any was refused\n"
    "  explain KIND.NAME | SECTION             a plugin's (or a core section's) options\n"
    "  devices                                 the devices each backend sees\n"
    "  tune batch-size CONFIG [overrides]...   the largest batch_size that fits in device\n"
    "                                          memory, and the linearly scaled lr\n"
    "  tune lr CONFIG [overrides]...           a learning-rate range test and a suggested lr\n"
    "  ckpt merge INDEX|DIR -o OUT.safetensors one checkpoint from the per-rank files of\n"
    "                                          [strategy] sharded_checkpoint = true\n"
    "  tokenize --tokenizer PATH -o OUTDIR INPUT... [--val-fraction F] [--threads N]\n"
    "           [--shard-tokens N] [--chunk-bytes N] [--eot TEXT]\n"
    "                                          text files (files, folders, globs) into llm.c\n"
    "                                          token shards for [data.tokens], on all cores\n"
    "  estimate CONFIG [--nodes N] [--devices-per-node G] [--link SPEC | --link-file FILE]\n"
    "           [--profile FILE] [--measure-steps N] [--json] [--no-memory] [overrides]...\n"
    "  estimate CONFIG --measure-link FILE     (on the ranks, under srun or mpirun) all-reduce\n"
    "                                          times over the config's comm, for --link-file\n"
    "                                          predicted step time, tokens/s, memory per rank\n"
    "                                          and scaling of single, ddp and sharded 1-3; the\n"
    "                                          fastest that fits (SPEC: nvlink, ib-ndr, ib-hdr,\n"
    "                                          100gbe, 10gbe, 1gbe or RATE,LATENCY: 1gbit,50us)\n"
    "  runs DIR [RUN...] [--report OUT.html]   the runs under DIR: status, steps, best metric,\n"
    "                                          wall time; --report overlays their curves on one\n"
    "                                          page (RUN: NAME or NAME/version_N, globs allowed)\n"
    "\n"
    "options:\n"
    "  --plugin-path DIR   search DIR for plugins first (repeatable)\n"
    "  --ckpt-path X       fit: resume from X; test/validate: evaluate X. X is last, best\n"
    "                      (by [callback.checkpoint] monitor) or a .safetensors file\n"
    "  --allow-nonfinite   load a checkpoint whose tensors hold NaN or inf\n"
    "  --report FILE       runs: write the comparison page to FILE\n"
    "  -q, --quiet         warnings and errors only\n"
    "  -v, --verbose       debug output\n"
    "  --version           print the version and the plugin ABI\n"
    "  -h, --help          this text\n"
    "\n"
    "Plugin search path: --plugin-path, [plugins] path, FULGUR_PLUGIN_PATH,\n"
    "~/.local/lib/fulgur/plugins, the install folder. Exit status: 0 ok, 1 runtime\n"
    "failure, 2 usage, config or input error, 3 a peer rank failed, 4 I/O error (disk\n"
    "full), 130/143 interrupted.\n";

typedef struct cli {
    const char *paths[MAX_PATHS];
    int path_count;
    int verbosity;
    const char *args[MAX_ARGS];
    int arg_count;
    char ckpt_override[4200]; /* --ckpt-path X becomes the override trainer.ckpt_path=X */
    const char *report;       /* runs --report FILE */
    /* generate's --prompt, --max-new-tokens, ..., export's --out, --dtype: the overrides
     * generate.KEY=VALUE, export.KEY=VALUE */
    char gen_overrides[8][4200];
    int gen_count;
    int allow_nonfinite;      /* --allow-nonfinite: the override trainer.allow_nonfinite=true */
    char **tok_argv;          /* tokenize's (and estimate's) own arguments, parsed by */
                              /* run_tokenize and run_estimate */
    int tok_argc;
} cli;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "fulgur: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nRun 'fulgur --help' for usage.\n");
    return EXIT_USAGE;
}

/* The SECTION.KEY of a verb's own option (generate's --prompt, --max-new-tokens=N, ...;
 * export's --out, --dtype), or NULL; SECTION is the verb. */
static const char *generate_option(const char *a)
{
    static const char *const opts[][2] = {{"--prompt", "generate.prompt"},
                                          {"--max-new-tokens", "generate.max_new_tokens"},
                                          {"--temperature", "generate.temperature"},
                                          {"--top-k", "generate.top_k"},
                                          {"--seed", "generate.seed"},
                                          {"--tokenizer", "generate.tokenizer"},
                                          {"--chat-template", "generate.chat_template"},
                                          {"--out", "export.out"},
                                          {"--dtype", "export.dtype"},
                                          {"--max-shard-size", "export.max_shard_size"}};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        size_t n = strlen(opts[i][0]);
        if (strncmp(a, opts[i][0], n) == 0 && (a[n] == '\0' || a[n] == '='))
            return opts[i][1];
    }
    return NULL;
}

/* Splits global options from the command and its arguments. Returns -1 to go on. */
static int parse_args(int argc, char **argv, cli *c)
{
    c->verbosity = FG_LOG_INFO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--plugin-path") == 0 || strncmp(a, "--plugin-path=", 14) == 0) {
            const char *v = a[13] == '=' ? a + 14 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v) return usage_error("%s needs a folder", "--plugin-path");
            if (c->path_count == MAX_PATHS) return usage_error("too many %s options", "--plugin-path");
            c->paths[c->path_count++] = v;
        } else if (strcmp(a, "--ckpt-path") == 0 || strncmp(a, "--ckpt-path=", 12) == 0) {
            const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v) return usage_error("%s needs last, best or a FILE", "--ckpt-path");
            snprintf(c->ckpt_override, sizeof c->ckpt_override, "trainer.ckpt_path=%s", v);
        } else if (generate_option(a)) {
            const char *key = generate_option(a), *eq = strchr(a, '=');
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) return usage_error("%s needs a value", a);
            if (c->gen_count == 8) return usage_error("%s: too many generate or export options", a);
            snprintf(c->gen_overrides[c->gen_count++], sizeof c->gen_overrides[0],
                     "%s=%s", key, v);
        } else if (strcmp(a, "--allow-nonfinite") == 0) {
            c->allow_nonfinite = 1;
        } else if (strcmp(a, "--report") == 0 || strncmp(a, "--report=", 9) == 0) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v) return usage_error("%s needs a FILE", "--report");
            c->report = v;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            c->verbosity = FG_LOG_WARN;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            c->verbosity = FG_LOG_DEBUG;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            return EXIT_OK;
        } else if (strcmp(a, "--version") == 0) {
            printf("fulgur %s (plugin ABI %d.%d)\n", fg_version(), FG_ABI_MAJOR, fg_abi_minor());
            return EXIT_OK;
        } else if (c->arg_count == 0 && (strcmp(a, "tokenize") == 0 || strcmp(a, "estimate") == 0)) {
            c->args[c->arg_count++] = a; /* the rest is its own (run_tokenize, run_estimate) */
            c->tok_argv = argv + i + 1;
            c->tok_argc = argc - i - 1;
            break;
        } else if (a[0] == '-' && a[1] != '\0' && strcmp(a, "-o") != 0) { /* -o: ckpt merge's */
            return usage_error("unknown option '%s'", a);
        } else {
            if (c->arg_count == MAX_ARGS) return usage_error("too many arguments (%s)", a);
            c->args[c->arg_count++] = a;
        }
    }
    if (c->arg_count == 0) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    return -1;
}

/* Problems with what the user gave (config, files, plugins, devices) are exit 2; failures
 * while running (out of memory, device errors, divergence, bugs) are exit 1. */
static int fail(const fg_error *err, fg_status st, int configuring)
{
    fprintf(stderr, "fulgur: %s\n", err->message[0] ? err->message : "error");
    return fg_status_exit_code(st, configuring);
}

static int run_verb(fg_runtime *rt, const cli *c, const char *cmd)
{
    static const struct { const char *name; int verb; } verbs[] = {
        {"fit", FG_VERB_FIT}, {"validate", FG_VERB_VALIDATE}, {"test", FG_VERB_TEST},
        {"predict", FG_VERB_PREDICT}, {"check", FG_VERB_CHECK}, {"generate", FG_VERB_GENERATE},
        {"export", FG_VERB_EXPORT}};
    int verb = -1, chat = strcmp(cmd, "chat") == 0; /* chat: generate.chat=true */
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(verbs[i].name, chat ? "generate" : cmd) == 0) verb = verbs[i].verb;
    if (verb < 0) return usage_error("unknown command '%s'", cmd);
    if (c->arg_count < 2) return usage_error("'%s' needs a CONFIG file", cmd);
    const char *overrides[MAX_ARGS + 12];
    int n = 0;
    for (int i = 2; i < c->arg_count; i++) overrides[n++] = c->args[i];
    if (c->ckpt_override[0]) overrides[n++] = c->ckpt_override;
    const char *section = chat ? "generate" : cmd; /* chat takes generate's options */
    for (int i = 0; i < c->gen_count; i++) {
        const char *o = c->gen_overrides[i];
        int own = strncmp(o, section, strlen(section)) == 0 && o[strlen(section)] == '.';
        if (!own || (verb != FG_VERB_GENERATE && verb != FG_VERB_EXPORT))
            return usage_error("%s belongs to another command (fulgur generate's and chat's "
                               "--prompt, ..., fulgur export's --out and --dtype)", o);
        overrides[n++] = o;
    }
    if (chat) overrides[n++] = "generate.chat=true";
    if (c->allow_nonfinite) overrides[n++] = "trainer.allow_nonfinite=true";
    fg_error err = {0};
    fg_status st = fg_runtime_configure(rt, c->args[1], overrides, n, &err);
    if (st != FG_OK) return fail(&err, st, 1);
    st = fg_runtime_run(rt, (fg_verb)verb, &err);
    if (st != FG_OK) {
        fail(&err, st, 0);
        return fg_runtime_exit_code(rt, st); /* 3 after a lost peer (what status.json says) */
    }
    if (verb == FG_VERB_CHECK) printf("%s: ok\n", c->args[1]);
    return EXIT_OK;
}

/* ckpt merge INDEX|DIR -o OUT: -o may come before or after the input. */
static int run_ckpt(const cli *c)
{
    const char *usage = "usage: fulgur ckpt merge INDEX_OR_DIR -o OUT.safetensors";
    if (c->arg_count < 2 || strcmp(c->args[1], "merge") != 0) return usage_error("%s", usage);
    const char *in = NULL, *out = NULL;
    for (int i = 2; i < c->arg_count; i++) {
        if (strcmp(c->args[i], "-o") == 0 && i + 1 < c->arg_count && !out) out = c->args[++i];
        else if (!in && strcmp(c->args[i], "-o") != 0) in = c->args[i];
        else return usage_error("%s", usage);
    }
    if (!in || !out) return usage_error("%s", usage);
    fg_error err = {0};
    fg_status st = fg_ckpt_merge(in, out, stdout, &err);
    return st == FG_OK ? EXIT_OK : fail(&err, st, 1);
}

/* runs DIR [RUN...] [--report FILE] */
static int run_runs(fg_runtime *rt, const cli *c)
{
    if (c->arg_count < 2) return usage_error("%s", "usage: fulgur runs DIR [RUN...] [--report OUT.html]");
    fg_runs_options o = {sizeof o, c->args[1], c->args + 2, c->arg_count - 2, c->report};
    fg_error err = {0};
    fg_status st = fg_runtime_runs(rt, &o, stdout, &err);
    return st == FG_OK ? EXIT_OK : fail(&err, st, 0);
}

/* A number option's value: 0, or a usage error's exit code. */
static int number_arg(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    *out = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || !(*out >= lo && *out <= hi)) {
        fprintf(stderr, "fulgur: tokenize %s needs a number in [%g, %g] (got '%s')\n", opt, lo,
                hi, v ? v : "");
        return EXIT_USAGE;
    }
    return 0;
}

/* tokenize --tokenizer PATH -o OUTDIR INPUT... [options] */
static int run_tokenize(const cli *c)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    fg_tokenize_options o = {sizeof o, NULL, NULL, NULL, 0, cores > 0 ? (int)cores : 1, 0.0,
                             100000000, 1 << 20, NULL};
    const char **inputs = calloc((size_t)c->tok_argc + 1, sizeof *inputs);
    if (!inputs) return EXIT_RUNTIME;
    int rc = 0;
    for (int i = 0; rc == 0 && i < c->tok_argc; i++) {
        const char *a = c->tok_argv[i], *v = i + 1 < c->tok_argc ? c->tok_argv[i + 1] : NULL;
        double x = 0;
        if (strcmp(a, "--tokenizer") == 0 && v) o.tokenizer = c->tok_argv[++i];
        else if (strcmp(a, "-o") == 0 && v) o.out_dir = c->tok_argv[++i];
        else if (strcmp(a, "--eot") == 0 && v) o.eot = c->tok_argv[++i];
        else if (strcmp(a, "--val-fraction") == 0) {
            rc = number_arg(a, v, 0, 0.999999, &o.val_fraction);
            i++;
        }
        else if (strcmp(a, "--threads") == 0) {
            rc = number_arg(a, v, 1, 1024, &x);
            o.threads = (int)x;
            i++;
        } else if (strcmp(a, "--shard-tokens") == 0 || strcmp(a, "--chunk-bytes") == 0) {
            rc = number_arg(a, v, 1, 2147483647.0, &x);
            *(a[2] == 's' ? &o.shard_tokens : &o.chunk_bytes) = (int64_t)x;
            i++;
        } else if (a[0] == '-' && a[1]) {
            rc = usage_error("tokenize: unknown option or missing value '%s'", a);
        } else inputs[o.input_count++] = a;
    }
    o.inputs = inputs;
    fg_error err = {0};
    fg_status st = rc == 0 ? fg_tokenize(&o, stderr, &err) : FG_OK;
    free(inputs);
    if (rc) return rc;
    return st == FG_OK ? EXIT_OK : fail(&err, st, 1);
}

/* A whole-number option of estimate: 0, or a usage error's exit code. */
static int estimate_int(const char *opt, const char *v, int *out)
{
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < 1 || x > 1000000) {
        fprintf(stderr, "fulgur: estimate %s needs a whole number >= 1 (got '%s')\n", opt, v ? v : "");
        return EXIT_USAGE;
    }
    *out = (int)x;
    return 0;
}

/* estimate CONFIG [options] [overrides] */
static int run_estimate(const cli *c)
{
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    fg_estimate_options o = {sizeof o, NULL, NULL, 0, 1, 1, NULL, NULL, NULL, 0, 0, 0, self, NULL};
    const char **over = calloc((size_t)c->tok_argc + 1, sizeof *over);
    if (!over) return EXIT_RUNTIME;
    int rc = 0;
    for (int i = 0; rc == 0 && i < c->tok_argc; i++) {
        const char *a = c->tok_argv[i], *v = i + 1 < c->tok_argc ? c->tok_argv[i + 1] : NULL;
        int *num = strcmp(a, "--nodes") == 0 ? &o.nodes : strcmp(a, "--devices-per-node") == 0
                   ? &o.devices_per_node : strcmp(a, "--measure-steps") == 0 ? &o.measure_steps : NULL;
        const char **str = strcmp(a, "--link") == 0 ? &o.link : strcmp(a, "--link-file") == 0
                           ? &o.link_file : strcmp(a, "--profile") == 0 ? &o.profile
                           : strcmp(a, "--measure-link") == 0 ? &o.measure_link : NULL;
        if (num) rc = estimate_int(a, v, num), i++;
        else if (str && v && *v) *str = c->tok_argv[++i];
        else if (str) rc = usage_error("estimate: %s needs a value", a);
        else if (strcmp(a, "--json") == 0) o.json = 1;
        else if (strcmp(a, "--no-memory") == 0) o.no_memory = 1;
        else if (a[0] == '-' && a[1]) rc = usage_error("estimate: unknown option '%s'", a);
        else if (!o.config) o.config = a;
        else over[o.override_count++] = a;
    }
    o.overrides = over;
    if (rc == 0 && !o.config) rc = usage_error("%s", "'estimate' needs a CONFIG file");
    fg_runtime_options ro = {sizeof ro, c->paths, c->path_count, stdout, c->verbosity};
    fg_error err = {0};
    fg_status st = rc == 0 ? fg_estimate(&ro, &o, stdout, &err) : FG_OK;
    free(over);
    if (rc) return rc;
    return st == FG_OK ? EXIT_OK : fail(&err, st, 1);
}

static int run_command(fg_runtime *rt, const cli *c)
{
    const char *cmd = c->args[0];
    fg_error err = {0};
    fg_status st;
    if (c->report && strcmp(cmd, "runs") != 0) return usage_error("%s", "--report belongs to 'fulgur runs'");
    if (strcmp(cmd, "runs") == 0) return run_runs(rt, c);
    if (strcmp(cmd, "tokenize") == 0) return run_tokenize(c);
    if (strcmp(cmd, "estimate") == 0) return run_estimate(c);
    if (strcmp(cmd, "plugins") == 0) {
        if (c->arg_count > 1) return usage_error("'plugins' takes no argument (got '%s')", c->args[1]);
        st = fg_runtime_list_plugins(rt, stdout, &err);
    } else if (strcmp(cmd, "explain") == 0) {
        if (c->arg_count != 2) return usage_error("%s", "'explain' needs one KIND.NAME, e.g. backend.cpu");
        st = fg_runtime_explain(rt, c->args[1], stdout, &err);
        if (st != FG_OK) return fail(&err, st, 1);
    } else if (strcmp(cmd, "tune") == 0) {
        int lr = c->arg_count >= 3 && strcmp(c->args[1], "lr") == 0;
        if (c->arg_count < 3 || (!lr && strcmp(c->args[1], "batch-size") != 0))
            return usage_error("%s", "usage: fulgur tune batch-size|lr CONFIG [section.key=value]...");
        fg_runtime_options opts = {sizeof opts, c->paths, c->path_count, stdout, c->verbosity};
        int64_t best;
        double suggestion;
        st = lr ? fg_tune_lr(&opts, c->args[2], c->args + 3, c->arg_count - 3, 100, stdout, &suggestion, &err)
                : fg_tune_batch_size(&opts, c->args[2], c->args + 3, c->arg_count - 3, stdout, &best, &err);
        if (st != FG_OK) return fail(&err, st, 0);
    } else if (strcmp(cmd, "ckpt") == 0) {
        return run_ckpt(c);
    } else if (strcmp(cmd, "devices") == 0) {
        if (c->arg_count > 1) return usage_error("'devices' takes no argument (got '%s')", c->args[1]);
        st = fg_runtime_list_devices(rt, stdout, &err);
    } else {
        return run_verb(rt, c, cmd);
    }
    return st == FG_OK ? EXIT_OK : fail(&err, st, 0);
}

int main(int argc, char **argv)
{
    /* Progress lines appear as they happen, also when piped to a file or tee. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    cli c;
    memset(&c, 0, sizeof c);
    int rc = parse_args(argc, argv, &c);
    if (rc >= 0) return rc;
    fg_runtime_options opts = {sizeof opts, c.paths, c.path_count, stdout, c.verbosity};
    fg_runtime *rt = NULL;
    fg_error err = {0};
    fg_status st = fg_runtime_create(&opts, &rt, &err);
    if (st != FG_OK) return fail(&err, st, 1);
    rc = run_command(rt, &c);
    /* What a command printed must have reached its reader: `> /dev/full` is a failure. */
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == EXIT_OK) {
        fprintf(stderr, "fulgur: cannot write to the standard output: %s\n", strerror(errno));
        rc = fg_status_exit_code(FG_IO_ERROR, 0);
    }
    fg_runtime_destroy(rt);
    return rc;
}
