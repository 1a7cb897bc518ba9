/* A chat model's conversation format, chosen by name ([generate] chat_template) or
 * recognised in the Jinja chat_template of the tokenizer_config.json beside the tokenizer by
 * its markers: ChatML (<|im_start|>: SmolLM, Qwen), Llama 3 (<|start_header_id|>), Llama 2 /
 * Mistral ([INST]), Zephyr (<|user|>); "plain" is fulgur's own "User: LINE\nAssistant:".
 * Jinja is not run: each family has its built-in form (written in chat_template.c), without
 * any default system prompt a model's template may add. The markers a form spells as special
 * tokens (and tokenizer_config.json's bos_token / eos_token) become their ids; a user's text
 * is always ordinary text, so a typed "<|im_end|>" stays text. */
#ifndef FG_CHAT_TEMPLATE_H
#define FG_CHAT_TEMPLATE_H

#include "tokenizer.h"

typedef enum fg_chat_family {
    FG_CHAT_PLAIN,
    FG_CHAT_CHATML,
    FG_CHAT_LLAMA3,
    FG_CHAT_LLAMA2,
    FG_CHAT_ZEPHYR,
} fg_chat_family;

#define FG_CHAT_TEMPLATE_CHOICES "auto|plain|chatml|llama3|llama2|zephyr"
#define FG_CHAT_TOKEN_MAX 128

typedef struct fg_chat_template {
    fg_chat_family family;
    char bos[FG_CHAT_TOKEN_MAX], eos[FG_CHAT_TOKEN_MAX]; /* tokenizer_config.json's; "" none */
    char config[4096]; /* the tokenizer_config.json read, "" none */
} fg_chat_template;

/* choice: a family's name, or "auto" (or ""): the tokenizer_config.json beside tokenizer
 * (the folder itself, or the file's folder) decides, and without one (or without a
 * chat_template in it) the form is plain. A template of no known family fails naming the
 * file and suggesting --chat-template; bos_token, eos_token and added_tokens_decoder must
 * agree with the tokenizer's ids, else it fails naming the token. */
fg_status fg_chat_template_open(const char *tokenizer, const fg_tokenizer *t,
                                const char *choice, fg_chat_template *out, fg_error *err);

/* The family whose markers the Jinja text holds; -1 when none. */
int fg_chat_family_detect(const char *jinja);
const char *fg_chat_family_name(fg_chat_family f);

/* Appends to out the ids of: the conversation's start (before the first turn), one user
 * turn (with the assistant's header after it), the end of a reply (after the reply's own
 * ids, which end before the stop token). */
fg_status fg_chat_render_start(const fg_chat_template *c, const fg_tokenizer *t,
                               fg_token_buf *out, fg_error *err);
fg_status fg_chat_render_user(const fg_chat_template *c, const fg_tokenizer *t,
                              const char *line, fg_token_buf *out, fg_error *err);
fg_status fg_chat_render_reply_end(const fg_chat_template *c, const fg_tokenizer *t,
                                   fg_token_buf *out, fg_error *err);
/* The id a reply ends with (ChatML <|im_end|>, Llama 3 <|eot_id|>, else eos); -1 for plain
 * (the caller keeps the tokenizer's end-of-text). */
int32_t fg_chat_stop_id(const fg_chat_template *c, const fg_tokenizer *t);

#endif
