/* Starting a model from pretrained weights: a weights-only safetensors file (PyTorch's
 * save_file of a state dict, a fulgur checkpoint, or Hugging Face's GPT-2 or Llama
 * model.safetensors) read into the host parameter and buffer regions after the seeded
 * initialisation, matched by tensor name with shapes checked. Nothing of the trainer's or
 * the optimizer's state is read: training starts at step 0. */
#ifndef FG_INIT_FROM_H
#define FG_INIT_FROM_H

#include <stddef.h>

#include "config.h"
#include "model.h"

/* How the file names its tensors. */
typedef enum fg_weights_layout {
    FG_WEIGHTS_AUTO = 0,     /* hf_gpt2 when a tensor is named like "h.0.attn.c_attn.weight",
                              * hf_llama when one is "model.embed_tokens.weight" or
                              * "model.layers.N..." */
    FG_WEIGHTS_FULGUR = 1,   /* the model's own names */
    FG_WEIGHTS_HF_GPT2 = 2,  /* [transformer.]h.N.attn.c_attn / c_proj, mlp.c_fc / c_proj:
                              * Conv1D weights stored (in, out), read transposed */
    FG_WEIGHTS_HF_LLAMA = 3  /* model.embed_tokens, model.layers.N.self_attn.q_proj, ...
                              * (hf_llama.h): q, k, v fused into attn.qkv; every file tensor
                              * must have a place (rotary_emb.inv_freq aside) */
} fg_weights_layout;

typedef struct fg_init_from_result {
    fg_weights_layout layout; /* the one used */
    size_t loaded;            /* model tensors read from the file */
    size_t kept;              /* model tensors the file lacks (init_strict = false) */
    char kept_names[1024];    /* "a, b, ..." (truncated with "...") */
    size_t unused;            /* file tensors no model tensor took (HF's attn.bias masks) */
} fg_init_from_result;

/* strict: every model tensor must be in the file. A missing tensor (strict), a shape that
 * differs, or a dtype other than F32, F16, BF16, F64 fails naming the file and the tensor;
 * so does a tensor holding NaN or inf unless allow_nonfinite (the check --ckpt-path
 * applies: trainer.allow_nonfinite, --allow-nonfinite).
 * params / buffers: fg_model_params_size / fg_model_buffers_size floats on the host. */
fg_status fg_model_init_from(const fg_model *m, const char *path, fg_weights_layout layout,
                             int strict, int allow_nonfinite, float *params, float *buffers,
                             fg_init_from_result *res, fg_error *err);

/* [model] init_from, init_strict and init_layout of cfg applied (nothing when init_from
 * is empty); note (note_cap bytes) gets the line to print: "init_from FILE: N tensors
 * loaded ...", or "" when nothing was read. */
fg_status fg_model_init_from_config(const fg_model *m, const fg_config *cfg, float *params,
                                    float *buffers, char *note, size_t note_cap,
                                    fg_error *err);

/* ---- shared by init_from.c and init_from_llama.c ---- */
typedef struct fg_ckpt fg_ckpt;
/* File tensor fname (of t's shape, or its transpose) widened to f32 into dst; a shape or
 * dtype that differs fails naming the file and both tensors. */
fg_status fg_init_from_tensor(fg_ckpt *c, const fg_tensor_info *t, const char *fname,
                              int transposed, float *dst, fg_error *err);
void fg_init_from_note_kept(fg_init_from_result *res, const char *name);
/* The Hugging Face Llama layout (hf_llama.h): every model tensor from its file tensors,
 * and every file tensor into the model. */
fg_status fg_init_from_llama(const fg_model *m, fg_ckpt *c, int strict, float *params,
                             float *buffers, fg_init_from_result *res, fg_error *err);

#endif
