/* The model: build from the config, shapes, the flat tensor layout, initialisation and
 * dtypes. Replicas (its memory on a device) are in replica.c, key reading in model_keys.c. */
#include "model_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_groups.h"
#include "init.h"
#include "residual_init.h"
#include "layer_order.h"
#include "utf8.h"


/* ---- shapes ------------------------------------------------------------------------- */

size_t fg_shape_numel(const fg_shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= (size_t)s->dims[i];
    return n;
}

const char *fg_shape_format(const fg_shape *s, char *buf, size_t size)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < s->rank && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "",
                                 s->dims[i]);
    if (used < size)
        snprintf(buf + used, size - used, ")");
    return buf;
}

/* ---- kinds and schemas -------------------------------------------------------------- */

static const fg_layer_ops *const layer_kinds[] = {
    &fg_layer_linear, &fg_layer_conv2d,  &fg_layer_maxpool2d, &fg_layer_avgpool2d,
    &fg_layer_batchnorm, &fg_layer_dropout, &fg_layer_flatten, &fg_layer_relu,
    &fg_layer_gelu,   &fg_layer_tanh,    &fg_layer_sigmoid, &fg_layer_add, &fg_layer_layernorm,
    &fg_layer_rmsnorm, &fg_layer_embedding, &fg_layer_position_embedding,
    &fg_layer_transformer_block,
};

const fg_layer_ops *fg_layer_kind(const char *type)
{
    for (size_t i = 0; type && i < COUNT(layer_kinds); i++)
        if (strcmp(layer_kinds[i]->type, type) == 0)
            return layer_kinds[i];
    return NULL;
}

const char *fg_layer_type_list(void)
{
    return "linear, conv2d, maxpool2d, avgpool2d, batchnorm, dropout, flatten, relu, gelu, "
           "tanh, sigmoid, add, layernorm, rmsnorm, embedding, position_embedding, "
           "transformer_block";
}

const fg_option *fg_layer_schema(const char *type, size_t *count)
{
    const fg_layer_ops *k = fg_layer_kind(type);
    *count = k ? k->option_count : 0;
    return k ? k->options : NULL;
}

static const fg_option model_options[] = {
    {"input", FG_OPT_LIST, "", 1, 0, NULL,
     "sample shape without the batch, e.g. 1,28,28; empty: the data set's sample shape"},
    {"loss", FG_OPT_ENUM, "softmax_cross_entropy", 1, 0, FG_LOSS_CHOICES,
     "softmax_cross_entropy over class scores (i32 labels); mse or bce_with_logits of one "
     "output against an f32 target (regression, 0/1)"},
    {"ignore_index", FG_OPT_STRING, "none", 1, 0, NULL,
     "a label the softmax cross-entropy skips (PyTorch's ignore_index), e.g. a padding "
     "token id: no loss, no gradient, and the mean is over the other positions; none: "
     "every label counts, a negative one is an error"},
    {"init_from", FG_OPT_STRING, "", 1, 0, NULL,
     "weights-only safetensors file to start from (a PyTorch state dict, a fulgur "
     "checkpoint, Hugging Face GPT-2's model.safetensors): tensors matched by name, shapes "
     "checked; no optimizer or trainer state, training starts at step 0"},
    {"init_strict", FG_OPT_BOOL, "true", 1, 0, NULL,
     "every model tensor must be in init_from's file; false: the missing ones keep their "
     "initialisation and the run lists them"},
    {"init_layout", FG_OPT_ENUM, "auto", 1, 0, "auto|fulgur|hf_gpt2|hf_llama",
     "tensor names of init_from's file: fulgur's own, Hugging Face GPT-2's (Conv1D "
     "weights read transposed) or Hugging Face Llama's (q/k/v_proj fused into attn.qkv); "
     "auto: hf_gpt2 when the file names h.0.attn.c_attn.weight, hf_llama when it names "
     "model.embed_tokens.weight or model.layers.N..."},
    {"hf_config", FG_OPT_STRING, "", 1, 0, NULL,
     "a Hugging Face config.json (model_type llama) whose shape becomes the layers "
     "[layer.embed_tokens], [layer.layers], [layer.norm], [layer.lm_head]; empty: "
     "init_from's folder's config.json when the file has no other [layer.*] section"},
    {"recompute", FG_OPT_BOOL, "false", 1, 0, NULL,
     "activation recomputation: every transformer_block keeps only its input and "
     "recomputes its activations in backward (a block's own recompute key wins)"},
    {"pad_vocab_to", FG_OPT_INT, "0", 0, 65536, NULL,
     "the logits' row stride rounded up to a multiple of this (64: GPT-2's 50257 -> 50304, "
     "as llm.c pads): the output layer's gemms get 16-byte-aligned rows for tensor cores; "
     "the weights, checkpoints, loss and metrics keep the vocabulary's columns. Needs the "
     "softmax cross-entropy loss, an output linear without bias and the backend's fused "
     "classifier (not f16); predict and generate run unpadded. 0 or 1: off"},
    {"scaled_residual_init", FG_OPT_BOOL, "false", 1, 0, NULL,
     "GPT-2's (nanoGPT's c_proj) rule: every transformer_block's attn.proj.weight and "
     "mlp.proj.weight drawn with init_std / sqrt(2 * the number of transformer_blocks); "
     "needs init_std > 0 on the blocks"},
    {"sync_batchnorm", FG_OPT_BOOL, "false", 1, 0, NULL,
     "every batchnorm layer normalises with the statistics of the whole batch across the "
     "replicas (dp, ddp, sharded, model-parallel with chunks = 1; Lightning's "
     "sync_batchnorm, PyTorch's SyncBatchNorm): sums reduced in f64 in forward and "
     "backward; false: each replica its own batch's"},
    {"memory_format", FG_OPT_ENUM, "contiguous", 1, 0, FG_MEMORY_FORMAT_CHOICES,
     "the memory order of (c, h, w) activations, PyTorch's name: channels_last keeps "
     "conv2d, pooling, batchnorm and the activations between them NHWC on the device "
     "(the input transposed once, flatten transposes back, so weights mean the same); the "
     "CUDA backend only; contiguous: NCHW"},
    {"label_smoothing", FG_OPT_FLOAT, "0", 0, 1, NULL,
     "eps in [0, 1): the softmax cross-entropy against (1 - eps) * onehot + eps / classes, "
     "as torch.nn.CrossEntropyLoss(label_smoothing=eps), in training and validation; 0: "
     "plain cross-entropy"},
    {"batch_groups", FG_OPT_INT, "1", 1, 64, NULL,
     "G >= 2: a training batch is G groups of batch_size / G samples, drawn as ranks 0 .. "
     "G-1 of a G-rank ddp run draw theirs, and every sum over the batch (weight, bias and "
     "batch-norm gradients, batch-norm statistics) is taken per group, the groups' sums "
     "added in order: with G = 2 one device computes the bits of ddp on 2 ranks and of dp "
     "on 2 devices (more ranks: with comm.mpi's ordered_sums; README: a data-parallel run "
     "reproduced on one device); 1: off"},
};

/* [model] pad_vocab_to: pads the row stride of logits an output linear without bias writes
 * for softmax cross-entropy (the replica applies it where the fused classifier runs). */
static fg_status check_pad_vocab(const fg_model *m, const fg_config *cfg, fg_error *err)
{
    if (m->pad_vocab_to <= 1)
        return FG_OK;
    const fg_layer *last = &m->layers[m->layer_count - 1];
    const char *why = m->loss != FG_LOSS_KIND_XENT ? "the loss is not softmax_cross_entropy"
                      : last->ops != &fg_layer_linear ? "the last layer is not a linear"
                      : last->bias ? "the output linear has a bias (set bias = false)"
                                   : NULL;
    if (!why)
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] pad_vocab_to = %lld pads the "
                        "logits of an output linear: %s",
                        fg_config_origin(cfg, "model", "pad_vocab_to"),
                        (long long)m->pad_vocab_to, why);
}

const fg_option *fg_model_schema(size_t *count)
{
    *count = COUNT(model_options);
    return model_options;
}

/* `recompute` on a kind that keeps its activations: said plainly, not "unknown key". */
static fg_status check_recompute(const fg_config *cfg, const char *section,
                                 const fg_layer_ops *k, fg_error *err)
{
    if (!fg_config_get(cfg, section, "recompute"))
        return FG_OK;
    for (size_t i = 0; i < k->option_count; i++)
        if (strcmp(k->options[i].key, "recompute") == 0)
            return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] recompute: a %s layer cannot "
                        "recompute its activations; only transformer_block can (set it there, "
                        "or [model] recompute = true for every block)",
                        fg_config_origin(cfg, section, "recompute"), section, k->type);
}

fg_status fg_layer_check_type(const fg_config *cfg, const char *section, fg_error *err)
{
    const char *type = fg_config_get(cfg, section, "type");
    if (!type)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] has no 'type'; set type = one of %s",
                            fg_config_origin(cfg, section, NULL), section, fg_layer_type_list());
    if (fg_layer_kind(type))
        return check_recompute(cfg, section, fg_layer_kind(type), err);
    const char *names[COUNT(layer_kinds)];
    for (size_t i = 0; i < COUNT(layer_kinds); i++)
        names[i] = layer_kinds[i]->type;
    const char *near = fg_nearest(type, names, COUNT(names));
    char hint[96] = "";
    if (near)
        snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] unknown layer type '%s'%s (types: %s)",
                        fg_config_origin(cfg, section, "type"), section, type, hint,
                        fg_layer_type_list());
}

/* ---- tensors ------------------------------------------------------------------------ */

fg_status fg_model_add_tensor(fg_model *m, fg_layer *l, const char *suffix, int is_buffer,
                              int rank, const int64_t *shape, fg_init_rule init, double bound,
                              fg_error *err)
{
    int *n = is_buffer ? &l->buffer_count : &l->param_count;
    if (*n >= (is_buffer ? FG_LAYER_MAX_BUFFERS : FG_LAYER_MAX_TENSORS) || rank > 4)
        return fg_error_set(err, FG_INTERNAL, "[%s] declares too many tensors", l->section);
    if (m->tensor_count == m->tensor_cap) {
        size_t cap = m->tensor_cap ? 2 * m->tensor_cap : 16;
        fg_tensor_info *t = realloc(m->tensors, cap * sizeof *t);
        if (!t)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory building the model");
        m->tensors = t;
        m->tensor_cap = cap;
    }
    fg_tensor_info *t = &m->tensors[m->tensor_count];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s.%s", l->name, suffix);
    t->is_buffer = is_buffer;
    t->rank = rank;
    t->numel = 1;
    for (int i = 0; i < rank; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->init = init;
    t->bound = bound;
    t->layer = l->index;
    size_t *region = is_buffer ? &m->buffers_size : &m->params_size;
    t->offset = align_up(*region, FG_TENSOR_ALIGN);
    *region = t->offset + t->numel;
    if (!is_buffer)
        m->param_count += t->numel;
    (is_buffer ? l->buffer_tensor : l->param_tensor)[(*n)++] = m->tensor_count++;
    return FG_OK;
}

/* ---- build -------------------------------------------------------------------------- */

/* Parses "1,28,28" into a shape; every dimension a positive integer. */
static fg_status parse_input(const fg_config *cfg, const char *text, fg_shape *s, fg_error *err)
{
    const char *origin = fg_config_origin(cfg, "model", "input");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    s->rank = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
            tok[--len] = '\0';
        int64_t v;
        if (fg_option_parse_int(tok, &v) != FG_OK || v < 1 || v > INT32_MAX)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: [model] input = %s: '%s' is not a positive integer", origin,
                                text, tok);
        if (s->rank == FG_MAX_DIMS)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: [model] input = %s has more than %d dimensions", origin,
                                text, FG_MAX_DIMS);
        s->dims[s->rank++] = v;
    }
    if (s->rank == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [model] input = '%s' names no dimension", origin, text);
    return FG_OK;
}

/* The model input: [model] input, or the data set's sample shape. */
static fg_status resolve_input(const fg_config *cfg, const int64_t *sample, int rank,
                               fg_shape *in, fg_error *err)
{
    const char *text = fg_config_get(cfg, "model", "input");
    fg_shape data = {0};
    if (sample && rank > 0) {
        if (rank > FG_MAX_DIMS)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "samples have %d dimensions, at most %d",
                                rank, FG_MAX_DIMS);
        data.rank = rank;
        for (int i = 0; i < rank; i++) {
            if (sample[i] < 1)
                return fg_error_set(err, FG_INVALID_ARGUMENT,
                                    "the data set's sample shape has a dimension %" PRId64,
                                    sample[i]);
            data.dims[i] = sample[i];
        }
    }
    if (!text || !*text) {
        if (!data.rank)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: [model] input is not set and no sample shape was given; "
                                "set input = C,H,W (or F)",
                                fg_config_path(cfg) ? fg_config_path(cfg) : "config");
        *in = data;
        return FG_OK;
    }
    fg_status st = parse_input(cfg, text, in, err);
    if (st != FG_OK)
        return st;
    if (data.rank && fg_shape_numel(&data) != fg_shape_numel(in)) {
        char a[FG_SHAPE_TEXT_MAX], b[FG_SHAPE_TEXT_MAX];
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [model] input = %s %s holds %zu values but the data set's "
                            "samples are %s = %zu",
                            fg_config_origin(cfg, "model", "input"), text,
                            fg_shape_format(in, a, sizeof a), fg_shape_numel(in),
                            fg_shape_format(&data, b, sizeof b), fg_shape_numel(&data));
    }
    return FG_OK;
}

static int is_layer_section(const char *s)
{
    return strncmp(s, "layer.", 6) == 0 && s[6] != '\0';
}

static fg_status validate_layer_section(const fg_config *cfg, const char *section,
                                        const fg_layer_ops *k, fg_error *err)
{
    fg_schema schema = {"core", k->options, k->option_count, sizeof(fg_option)};
    return fg_config_validate_section(cfg, section, &schema, 1, err);
}

/* rep >= 0: repetition rep of a section with `repeat`, named NAME.rep (h.0, h.1, ...). */
static fg_status build_layer(fg_model *m, const fg_config *cfg, const char *section, int rep,
                             fg_error *err)
{
    fg_status st = fg_layer_check_type(cfg, section, err);
    if (st != FG_OK)
        return st;
    const fg_layer_ops *k = fg_layer_kind(fg_config_get(cfg, section, "type"));
    if ((st = validate_layer_section(cfg, section, k, err)) != FG_OK)
        return st;
    fg_layer *l = &m->layers[m->layer_count];
    memset(l, 0, sizeof *l);
    l->ops = k;
    l->index = (int)m->layer_count;
    l->recompute = m->recompute;
    if (strlen(section + 6) + 12 >= sizeof l->name)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s]: the layer name is too long",
                            fg_config_origin(cfg, section, NULL), section);
    /* its tensors' names go into checkpoint headers, which are JSON */
    if (!fg_utf8_valid(section))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s]: the layer name is not valid "
                            "UTF-8", fg_config_origin(cfg, section, NULL), section);
    if (rep >= 0)
        snprintf(l->name, sizeof l->name, "%s.%d", section + 6, rep);
    else
        snprintf(l->name, sizeof l->name, "%s", section + 6);
    snprintf(l->section, sizeof l->section, "%s", section);
    const char *origin = fg_config_origin(cfg, section, NULL);
    snprintf(l->origin, sizeof l->origin, "%s", origin ? origin : section);
    char shape[FG_SHAPE_TEXT_MAX];
    if ((st = fg_graph_resolve_inputs(m, cfg, l, err)) != FG_OK)
        return st;
    l->ops = k = fg_layout_kind(m, l, k);
    if (k->configure && (st = k->configure(l, cfg, err)) != FG_OK)
        return st;
    if ((st = k->plan(l, m, err)) != FG_OK)
        return st;
    if ((st = fg_layout_plan(m, l, err)) != FG_OK)
        return st;
    /* backend ops take int sizes per sample */
    if (fg_shape_numel(&l->out) > INT32_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] gives %s = %zu values per sample, more than 2^31 - 1",
                            l->origin, l->section, fg_shape_format(&l->out, shape, sizeof shape),
                            fg_shape_numel(&l->out));
    m->layer_count++;
    return FG_OK;
}

/* The last layer must give num_classes scores per sample, or per position of a sequence. */
static fg_status check_logits(fg_model *m, fg_error *err)
{
    const fg_layer *last = &m->layers[m->layer_count - 1];
    char shape[FG_SHAPE_TEXT_MAX];
    m->positions = 1;
    if (last->out.rank == 2 && last->out.dims[1] == m->num_classes) {
        m->positions = (int)last->out.dims[0];
        return FG_OK;
    }
    if (last->out.rank != 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] is the last layer and gives %s, but the model must end in "
                            "%d class scores per sample; end with a flatten and a linear with "
                            "out_features = %d",
                            last->origin, last->section,
                            fg_shape_format(&last->out, shape, sizeof shape), m->num_classes,
                            m->num_classes);
    if (last->out.dims[0] != m->num_classes)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] is the last layer and gives %" PRId64
                            " outputs but the data set has %d classes; its output features "
                            "must equal num_classes",
                            last->origin, last->section, last->out.dims[0], m->num_classes);
    return FG_OK;
}

/* How many layers a section makes: its `repeat` (a kind that declares the key), else 1. A
 * bad value counts 1 here and is reported by the schema check. */
static size_t section_repeat(const fg_config *cfg, const char *section)
{
    const char *v = fg_config_get(cfg, section, "repeat");
    int64_t n = 0;
    if (!v || fg_option_parse_int(v, &n) != FG_OK || n < 1 || n > FG_MAX_REPEAT)
        return 1;
    return (size_t)n;
}

/* The layers of one section: one, or `repeat` of them. */
static fg_status build_section(fg_model *m, const fg_config *cfg, const char *section,
                               fg_error *err)
{
    int repeated = fg_config_get(cfg, section, "repeat") != NULL;
    if (repeated && fg_config_get(cfg, section, "input"))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] sets both repeat and input: "
                            "each repetition reads the one before it",
                            fg_config_origin(cfg, section, "input"), section);
    for (size_t k = 0; k < section_repeat(cfg, section); k++) {
        fg_status st = build_layer(m, cfg, section, repeated ? (int)k : -1, err);
        if (st != FG_OK)
            return st;
    }
    return FG_OK;
}

static fg_status build_layers(fg_model *m, const fg_config *cfg, fg_error *err)
{
    size_t n = 0, sections = fg_config_section_count(cfg);
    for (size_t i = 0; i < sections; i++)
        if (is_layer_section(fg_config_section_name(cfg, i)))
            n += section_repeat(cfg, fg_config_section_name(cfg, i));
    if (n == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: the model has no layers; add [layer.NAME] sections with type = "
                            "one of %s",
                            fg_config_path(cfg) ? fg_config_path(cfg) : "config",
                            fg_layer_type_list());
    m->layers = calloc(n, sizeof *m->layers);
    size_t *order = calloc(n, sizeof *order); /* n >= the number of layer sections */
    if (!m->layers || !order) {
        free(order);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory building the model");
    }
    size_t layer_sections = 0;
    for (size_t i = 0; i < sections; i++)
        layer_sections += is_layer_section(fg_config_section_name(cfg, i));
    m->relu_after_pool = fg_layer_order(cfg, order, layer_sections);
    fg_status st = FG_OK;
    for (size_t j = 0; j < layer_sections && st == FG_OK; j++)
        st = build_section(m, cfg, fg_config_section_name(cfg, order[j]), err);
    free(order);
    if (st != FG_OK)
        return st;
    st = check_logits(m, err);
    return st == FG_OK ? fg_graph_plan(m, err) : st;
}

fg_status fg_model_build(const fg_config *cfg, const int64_t *sample_shape, int sample_rank,
                         int num_classes, fg_model **out, fg_error *err)
{
    return fg_model_build_fp8(cfg, sample_shape, sample_rank, num_classes, NULL, out, err);
}

const char *fg_model_fp8_note(const fg_model *m)
{
    return m->fp8_note;
}

const fg_fp8_recipe *fg_model_fp8(const fg_model *m)
{
    return m->fp8.format != FG_FP8_NONE ? &m->fp8 : NULL;
}

/* Adds a line to the model's fp8 note (the layers left out of fp8). */
void fg_model_fp8_note_add(fg_model *m, const char *line)
{
    size_t used = strlen(m->fp8_note);
    if (line[0])
        snprintf(m->fp8_note + used, sizeof m->fp8_note - used, "%s%s", used ? "\n" : "", line);
}

fg_status fg_model_build_fp8(const fg_config *cfg, const int64_t *sample_shape,
                             int sample_rank, int num_classes, const fg_fp8_recipe *fp8,
                             fg_model **out, fg_error *err)
{
    *out = NULL;
    fg_loss_kind loss = FG_LOSS_KIND_XENT;
    fg_status lst = fg_loss_read(cfg, &loss, err);
    if (lst != FG_OK)
        return lst;
    num_classes = fg_loss_outputs(loss, num_classes);
    if (num_classes < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "the model needs at least one class, the data set gives %d",
                            num_classes);
    fg_model *m = calloc(1, sizeof *m);
    if (!m)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory building the model");
    m->num_classes = num_classes;
    m->loss = loss;
    if (fp8)
        m->fp8 = *fp8;
    fg_status st = FG_OK;
    if (fg_config_has_section(cfg, "model")) {
        fg_schema schema = {"core", model_options, COUNT(model_options), sizeof(fg_option)};
        st = fg_config_validate_section(cfg, "model", &schema, 1, err);
    }
    if (st == FG_OK)
        st = fg_section_read_bool(cfg, "model", model_options, COUNT(model_options),
                                  "recompute", &m->recompute, err);
    if (st == FG_OK)
        st = fg_section_read_int(cfg, "model", model_options, COUNT(model_options),
                                 "pad_vocab_to", &m->pad_vocab_to, err);
    if (st == FG_OK)
        st = fg_section_read_bool(cfg, "model", model_options, COUNT(model_options),
                                  "sync_batchnorm", &m->sync_batchnorm, err);
    if (st == FG_OK)
        st = fg_section_read_int(cfg, "model", model_options, COUNT(model_options),
                                 "batch_groups", &m->batch_groups, err);
    if (st == FG_OK)
        st = fg_loss_read_smoothing(cfg, loss, &m->label_smoothing, err);
    fg_memory_format format = FG_MEMORY_CONTIGUOUS;
    if (st == FG_OK)
        st = fg_layout_read(cfg, model_options, COUNT(model_options), &format, err);
    m->memory_format = (int)format;
    if (st == FG_OK)
        st = resolve_input(cfg, sample_shape, sample_rank, &m->input, err);
    if (st == FG_OK)
        st = build_layers(m, cfg, err);
    if (st == FG_OK)
        st = check_pad_vocab(m, cfg, err);
    if (st == FG_OK)
        st = fg_batch_groups_check(m, cfg, err);
    int scaled = 0;
    if (st == FG_OK)
        st = fg_section_read_bool(cfg, "model", model_options, COUNT(model_options),
                                  "scaled_residual_init", &scaled, err);
    if (st == FG_OK && scaled)
        st = fg_model_scale_residual_init(m, cfg, err);
    if (st == FG_OK) { /* the layout joins the model's note (printed at setup) */
        char line[512];
        fg_layout_describe(m, line, sizeof line);
        fg_model_fp8_note_add(m, line);
    }
    return FG_CREATED(st, m, out, fg_model_destroy);
}

/* The logits' row stride: num_classes rounded up to pad_vocab_to. */
int fg_model_padded_classes(const fg_model *m)
{
    int64_t p = m->pad_vocab_to > 1 ? m->pad_vocab_to : 1;
    return (int)((m->num_classes + p - 1) / p * p);
}

fg_status fg_model_tie_weight(fg_model *m, fg_layer *l, const char *source, int64_t rows,
                              int64_t cols, fg_error *err)
{
    fg_layer *src = NULL;
    for (int i = 0; i < l->index && !src; i++)
        if (strcmp(m->layers[i].name, source) == 0)
            src = &m->layers[i];
    if (!src || src->ops != &fg_layer_embedding)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] tie = %s: %s", l->origin,
                            l->section, source,
                            src ? "weight tying reuses an embedding's table; that layer is not "
                                  "an embedding"
                                : "no earlier layer has that name");
    const fg_tensor_info *w = &m->tensors[src->param_tensor[0]];
    if (w->shape[0] != rows || w->shape[1] != cols)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] tie = %s: its weight is (%" PRId64
                            ", %" PRId64 "), this layer needs (%" PRId64 ", %" PRId64 ")",
                            l->origin, l->section, source, w->shape[0], w->shape[1], rows, cols);
    l->param_tensor[0] = src->param_tensor[0];
    l->param_count = 1;
    l->tied = 1;
    src->weight_shared = 1;
    return FG_OK;
}

int fg_model_positions(const fg_model *m)
{
    return m->positions > 0 ? m->positions : 1;
}

uint32_t fg_model_input_dtype(const fg_model *m)
{
    return m->layer_count && m->layers[0].ops == &fg_layer_embedding ? FG_I32 : FG_F32;
}

void fg_model_destroy(fg_model *m)
{
    if (!m)
        return;
    free(m->layers);
    free(m->tensors);
    free(m);
}

size_t fg_model_layer_count(const fg_model *m) { return m->layer_count; }
const fg_layer *fg_model_layer(const fg_model *m, size_t i) { return &m->layers[i]; }
const fg_shape *fg_model_input_shape(const fg_model *m) { return &m->input; }
int fg_model_num_classes(const fg_model *m) { return m->num_classes; }
void fg_model_set_keep_probs(fg_model *m, int on) { m->keep_probs = on != 0; }
size_t fg_model_relu_after_pool(const fg_model *m) { return m->relu_after_pool; }
fg_loss_kind fg_model_loss(const fg_model *m) { return m->loss; }
size_t fg_model_param_count(const fg_model *m) { return m->param_count; }
size_t fg_model_params_size(const fg_model *m) { return m->params_size; }
size_t fg_model_buffers_size(const fg_model *m) { return m->buffers_size; }
size_t fg_model_tensor_count(const fg_model *m) { return m->tensor_count; }
const fg_tensor_info *fg_model_tensor(const fg_model *m, size_t i) { return &m->tensors[i]; }

/* ---- initialisation ----------------------------------------------------------------- */

void fg_model_init_params(fg_model *m, uint64_t seed, float *params, float *buffers)
{
    if (m->params_size)
        memset(params, 0, m->params_size * sizeof *params);
    if (m->buffers_size)
        memset(buffers, 0, m->buffers_size * sizeof *buffers);
    for (size_t i = 0; i < m->tensor_count; i++) {
        const fg_tensor_info *t = &m->tensors[i];
        float *x = (t->is_buffer ? buffers : params) + t->offset;
        switch (t->init) {
        case FG_INIT_ZERO: fg_init_constant(x, t->numel, 0.0f); break;
        case FG_INIT_ONE: fg_init_constant(x, t->numel, 1.0f); break;
        case FG_INIT_UNIFORM: fg_init_uniform(x, t->numel, t->bound, seed, i); break;
        case FG_INIT_NORMAL: fg_init_normal(x, t->numel, t->bound, seed, i); break;
        }
    }
    m->seed = seed;
}

/* ---- precision ---------------------------------------------------------------------- */

static int storage_dtype(uint32_t t)
{
    return t == FG_F32 || t == FG_F16 || t == FG_BF16;
}

fg_status fg_model_set_dtypes(fg_model *m, uint32_t act, uint32_t param, uint32_t grad,
                              fg_error *err)
{
    if (!storage_dtype(act) || !storage_dtype(param) || !storage_dtype(grad))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "model dtypes %s/%s/%s: each must be "
                            "f32, f16 or bf16", fg_dtype_name((fg_dtype)act),
                            fg_dtype_name((fg_dtype)param), fg_dtype_name((fg_dtype)grad));
    m->dt = (fg_role_dtypes){act, param, grad};
    m->typed = act != FG_F32 || param != FG_F32 || grad != FG_F32;
    m->master = FG_MASTER_REPLICA;
    return FG_OK;
}

fg_status fg_model_set_master_owner(fg_model *m, fg_master_owner owner, fg_error *err)
{
    if (owner != FG_MASTER_REPLICA && m->dt.param == FG_F32)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "f32 parameters are their own master "
                            "copy: no master weights only means something for half ones");
    m->master = owner;
    return FG_OK;
}

fg_master_owner fg_model_master_owner(const fg_model *m) { return m->master; }

const fg_role_dtypes *fg_model_dtypes(const fg_model *m)
{
    return m->typed ? &m->dt : NULL;
}

void fg_model_storage_dtypes(const fg_model *m, uint32_t *param, uint32_t *grad)
{
    *param = m->typed && m->master != FG_MASTER_REPLICA ? m->dt.param : FG_F32;
    *grad = m->typed ? m->dt.grad : FG_F32;
}

int fg_model_sync_batchnorm(const fg_model *m) { return m->sync_batchnorm; }

void fg_model_count_synced_layer(fg_model *m) { m->synced_layers++; }

int fg_model_synced_layers(const fg_model *m) { return m->synced_layers; }

int fg_model_batch_groups(const fg_model *m)
{
    return m->batch_groups > 1 ? (int)m->batch_groups : 1;
}
