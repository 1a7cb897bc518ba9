/* precision.fp8-mixed: bf16-mixed (f32 master weights and gradients, bfloat16 forward and
 * backward from a working copy) with linear layers' gemms in fp8, Transformer Engine's
 * delayed scaling: E4M3 weights and activations and E5M2 gradients (fp8_format = hybrid)
 * or E4M3 for all (e4m3), each tensor's scale fp8_max / amax / 2^margin from the max (or
 * the newest) of its last amax_history_len amaxes. The keys are TE's DelayedScaling names.
 * The model and the backend's gemm_fp8 (ABI 1.9) do the work; this plugin states the
 * recipe. */
#include <stdlib.h>
#include <string.h>

#include "precision_plugin.h"

typedef struct fp8_state {
    uint32_t format;
    int32_t history_len, algo, margin;
} fp8_state;

static const fg_option fp8_options[] = {
    {"fp8_format", FG_OPT_ENUM, "hybrid", 1, 0, "hybrid|e4m3",
     "hybrid: E4M3 weights and activations, E5M2 gradients (Transformer Engine's HYBRID); "
     "e4m3: E4M3 for all three"},
    {"amax_history_len", FG_OPT_INT, "1024", 1, 65536, NULL,
     "amaxes each tensor's history keeps (one per optimizer step; TE's amax_history_len)"},
    {"amax_compute_algo", FG_OPT_ENUM, "max", 1, 0, "max|most_recent",
     "the amax a scale is computed from: the history's largest or its newest"},
    {"margin", FG_OPT_INT, "0", 0, 32, NULL,
     "scale = fp8_max / amax / 2^margin (TE's margin)"},
};

static fg_status fp8_read(const fg_host *host, fp8_state *p, fg_error *err)
{
    const char *format = "hybrid", *algo = "max";
    int64_t len = 1024, margin = 0;
    if (host->get_string(host, "fp8_format", &format) != FG_OK ||
        host->get_string(host, "amax_compute_algo", &algo) != FG_OK ||
        host->get_int(host, "amax_history_len", &len) != FG_OK ||
        host->get_int(host, "margin", &margin) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "precision.fp8-mixed: cannot read its keys");
    p->format = strcmp(format, "e4m3") == 0 ? FG_FP8_E4M3 : FG_FP8_HYBRID;
    p->algo = strcmp(algo, "most_recent") == 0 ? FG_FP8_AMAX_MOST_RECENT : FG_FP8_AMAX_MAX;
    p->history_len = (int32_t)len;
    p->margin = (int32_t)margin;
    return FG_OK;
}

static fg_status fp8_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    fp8_state *p = calloc(1, sizeof *p);
    if (!p)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "precision.fp8-mixed: out of memory");
    fg_status st = fp8_read(host, p, err);
    if (st != FG_OK) {
        free(p);
        return st;
    }
    *state = p;
    return FG_OK;
}

static void fp8_deinit(void *state) { free(state); }

static fg_status fp8_info(void *state, fg_precision_info *out, fg_error *err)
{
    const fp8_state *p = state;
    if (!FG_HAS_FIELD(out, fg_precision_info, fp8_margin))
        return fg_error_set(err, FG_INCOMPATIBLE, "precision.fp8-mixed: the host's "
                            "fg_precision_info has no fp8 fields (ABI 1.9 needed)");
    fg_status st = fg_plugin_precision_info(out, FG_BF16, FG_BF16, FG_F32, 1, 0);
    out->fp8_format = p->format;
    out->fp8_amax_history_len = p->history_len;
    out->fp8_amax_compute_algo = p->algo;
    out->fp8_margin = (float)p->margin;
    return st;
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = fp8_info,
    .loss_scale = fg_plugin_unscaled_loss_scale,
    .update_scale = fg_plugin_unscaled_update_scale,
};

FG_PLUGIN_DEFINE(FG_KIND_PRECISION, 9, "fp8-mixed", "1.0.0",
                 "bf16-mixed with linear layers' gemms in fp8 (delayed scaling); CUDA, sm_89+",
                 FG_PLUGIN_OPTIONS(fp8_options), fp8_init, fp8_deinit, &vtable);
