/* Language-model samples: windows of context + 1 consecutive tokens of a token array, the
 * input being the first context tokens and the labels the next token at every position.
 * Shared by the text (bytes) and tokens (uint16) data plugins. */
#ifndef FULGUR_PLUGIN_COMMON_TOKEN_WINDOWS_H
#define FULGUR_PLUGIN_COMMON_TOKEN_WINDOWS_H

#include <stdint.h>

#include "fulgur/data.h"

/* Reads tokens [start, start + n) into out; the failure names the file (a file truncated
 * while in use reads short: an error, where a mapping would end the process with SIGBUS). */
typedef fg_status (*fg_token_fetch)(void *ctx, int64_t start, int64_t n, void *out,
                                    fg_error *err);

typedef struct fg_token_span {
    const void *tokens;  /* uint8_t (text) or uint16_t (tokens); NULL when fetch reads them */
    int elem_bytes;      /* 1 or 2 */
    int64_t count;       /* tokens in the span, >= context + 1 */
    fg_token_fetch fetch; /* when set: a window's tokens are read through it, not tokens */
    void *fetch_ctx;
} fg_token_span;

/* Where window `index` starts, in [0, count - context - 1].
 * random: a function of (seed, epoch, index) alone, so a batch is the same for any number
 * of workers, after a resume, and different for every index (ddp's ranks read different
 * indices). Otherwise (validation, test): `windows` windows evenly spread over the span,
 * the same every epoch, so losses are comparable. */
int64_t fg_token_window_start(const fg_token_span *span, int32_t context, int random,
                              uint64_t seed, int64_t epoch, int64_t index, int64_t windows);

/* inputs[t] = token[start + t], labels[t] = token[start + t + 1], t < context, as int32. */
void fg_token_window_copy(const fg_token_span *span, int64_t start, int32_t context,
                          int32_t *inputs, int32_t *labels);

/* The options every language-model data plugin has: context, train_windows, val_windows. */
typedef struct fg_token_window_options {
    int32_t context;
    int64_t train_windows, val_windows; /* 0: tokens / context of the split */
} fg_token_window_options;

/* Reads and checks the three options; messages start "who:". */
fg_status fg_token_window_options_read(const fg_host *host, const char *who,
                                       fg_token_window_options *o, fg_error *err);
/* Samples of a split of `tokens` tokens: the option, or tokens / context (at least 1). */
int64_t fg_token_window_count(const fg_token_window_options *o, int train, int64_t tokens);

/* One open split of a language-model data plugin: `windows` samples of `context` tokens. */
typedef struct fg_token_dataset {
    const char *split;   /* "train", "val", "test" (messages) */
    fg_token_span span;
    int32_t context;
    int32_t vocab;
    int64_t windows;
    int random;          /* train: seeded offsets; otherwise evenly spread */
} fg_token_dataset;

/* samples: (context) int32 token ids; labels: (context) int32 next tokens; classes: vocab. */
void fg_token_dataset_info(const fg_token_dataset *ds, fg_dataset_info *info);

/* read() of a data plugin over ds. A batch read for another split than the one opened (a
 * validation carved out of train) uses evenly spread windows. */
fg_status fg_token_dataset_read(const char *who, const fg_token_dataset *ds,
                                const fg_data_read_args *args, const int64_t *indices,
                                int count, void *samples, void *labels, fg_error *err);

#endif
