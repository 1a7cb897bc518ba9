/* INI configuration: parsing (inih), command-line overrides, schema validation.
 * Every entry remembers where it came from (file:line or the override argument). */
#ifndef FG_CONFIG_H
#define FG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

typedef struct fg_config fg_config;

/* Parses an INI file. A syntax error, a key outside a section, or a key set twice in one
 * section fails with "FILE:LINE: ...". */
fg_status fg_config_load(const char *path, fg_config **out, fg_error *err);
/* The same from text in memory; `name` stands for the file name in messages. */
fg_status fg_config_parse_string(const char *text, const char *name, fg_config **out,
                                 fg_error *err);
void fg_config_destroy(fg_config *cfg);

/* "section.key=value": the section is everything before the last '.' of the left side.
 * The value is taken as written, blanks included, unless a blank comes just before '='
 * ("section.key = value", a config line's spelling) or it is blanks alone: then its blanks
 * are dropped.
 * Sets or replaces; the entry's origin becomes "command line: ARG". */
fg_status fg_config_override(fg_config *cfg, const char *assignment, fg_error *err);
/* Sets a value from code (defaults filled in by the core); origin "default". */
fg_status fg_config_set(fg_config *cfg, const char *section, const char *key,
                        const char *value, fg_error *err);
/* The same with the entry's origin given ("config.json: hidden_size"); a missing section is
 * appended with that origin. */
fg_status fg_config_set_from(fg_config *cfg, const char *section, const char *key,
                             const char *value, const char *origin, fg_error *err);
/* Moves a section after every other (nothing when there is none of that name). */
void fg_config_move_section_last(fg_config *cfg, const char *section);

const char *fg_config_path(const fg_config *cfg);
size_t fg_config_section_count(const fg_config *cfg);
/* Sections in file order. */
const char *fg_config_section_name(const fg_config *cfg, size_t i);
int fg_config_has_section(const fg_config *cfg, const char *section);
/* The section's line, or 0 when it was created by an override. */
int fg_config_section_line(const fg_config *cfg, const char *section);

size_t fg_config_entry_count(const fg_config *cfg, const char *section);
/* Entries of a section in file order. */
const char *fg_config_entry_key(const fg_config *cfg, const char *section, size_t i);
const char *fg_config_get(const fg_config *cfg, const char *section, const char *key);
/* 1 when the key is set to a true boolean (true, yes, on, 1), else 0. */
int fg_config_is_true(const fg_config *cfg, const char *section, const char *key);
/* "FILE:LINE" or "command line: ARG"; for the section itself when key is NULL. */
const char *fg_config_origin(const fg_config *cfg, const char *section, const char *key);

/* ---- schema validation ------------------------------------------------------------- */

/* A set of options that apply to a section: a section can have several (the core's keys
 * plus a plugin's). option_size is the stride of `options` (sizeof(fg_option) as the
 * plugin was built). `owner` names them in messages ("core", "backend.cpu"). */
typedef struct fg_schema {
    const char *owner;
    const fg_option *options;
    size_t count;
    size_t option_size;
} fg_schema;

/* Checks every key of `section` against the union of `schemas`: an unknown key fails with
 * "ORIGIN: unknown key 'k' in [section]; did you mean 'key'?" (nearest by edit distance,
 * when close enough), a value of the wrong type or out of range fails naming the expected
 * type or range, a missing required key fails naming the section's line. */
fg_status fg_config_validate_section(const fg_config *cfg, const char *section,
                                     const fg_schema *schemas, size_t schema_count,
                                     fg_error *err);

/* Fails for a section name that is not in `known` (exact) and does not start with one of
 * `prefixes` ("layer.", "callback."), suggesting the nearest. */
fg_status fg_config_check_sections(const fg_config *cfg, const char *const *known,
                                   size_t known_count, const char *const *prefixes,
                                   size_t prefix_count, fg_error *err);

/* Parses one value for an option; errors name `origin`. */
fg_status fg_option_parse_bool(const char *value, int *out);
fg_status fg_option_parse_int(const char *value, int64_t *out);
fg_status fg_option_parse_float(const char *value, double *out);
/* Checks `value` against `opt` (type, range, choices); the message starts with origin. */
fg_status fg_option_check(const fg_option *opt, const char *value, const char *origin,
                          const char *section, fg_error *err);

/* Levenshtein distance; the nearest of candidates within max(2, len/3), or NULL. */
size_t fg_edit_distance(const char *a, const char *b);
const char *fg_nearest(const char *word, const char *const *candidates, size_t count);

#endif
