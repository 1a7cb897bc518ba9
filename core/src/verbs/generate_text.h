/* What fulgur generate continues: the token ids and the text they spell. Without a
 * tokenizer a token is a byte (a 256-token model); with [generate] tokenizer the prompt is
 * encoded by it (an empty prompt: its end-of-text token alone), each new id decoded to its
 * bytes, and ids the tokenizer does not have (a model's padded vocabulary) are never
 * sampled. */
#ifndef FG_GENERATE_TEXT_H
#define FG_GENERATE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "fulgur/plugin.h"
#include "tokenizer.h"

typedef struct fg_gen_text {
    fg_tokenizer *tok;        /* NULL: bytes */
    int32_t eot;              /* generation stops here; -1: never (bytes) */
    int32_t *ids;
    size_t len, cap;
    unsigned char *bytes;     /* the text: the prompt, then each new token's bytes */
    size_t nbytes, bytes_cap;
    unsigned char *allowed;   /* by model id: whether it may be sampled; NULL: all */
    fg_chat_template chat;    /* fulgur chat's form (plain unless fg_gen_text_chat says) */
} fg_gen_text;

/* tokenizer: a path or "" (bytes). vocab: the model's. Refuses a vocabulary that does not
 * fit (bytes: 256; a tokenizer: at least its ids), naming both counts. */
fg_status fg_gen_text_open(fg_gen_text *g, const char *tokenizer, const char *prompt, int vocab,
                           fg_error *err);
/* fulgur chat's form: [generate] chat_template (choice: a family or auto: the
 * tokenizer_config.json beside the tokenizer decides, chat_template.h). A family other than
 * plain replaces the opening ids by the form's start, ends replies at its stop token, and
 * refuses a prompt (it has no place in the form) or the absence of a tokenizer. */
fg_status fg_gen_text_chat(fg_gen_text *g, const char *tokenizer, const char *choice,
                           const char *prompt, fg_error *err);
/* A chat's user turn: in the plain form "User: " LINE "\nAssistant:", encoded alone (bytes
 * without a tokenizer), else the family's turn; appended to the conversation. */
fg_status fg_gen_text_turn(fg_gen_text *g, const char *line, fg_error *err);
/* Closes a reply: the end-of-text token after it (the model ended its reply so, or was cut
 * at max_new_tokens), or "\n" without one (bytes); a family's end of reply. */
fg_status fg_gen_text_end_reply(fg_gen_text *g, fg_error *err);
/* Appends a sampled id and its bytes. */
fg_status fg_gen_text_push(fg_gen_text *g, int32_t id, fg_error *err);
/* Probabilities of ids that may not be sampled set to 0. */
void fg_gen_text_mask(const fg_gen_text *g, float *p, int vocab);
void fg_gen_text_close(fg_gen_text *g);

#endif
