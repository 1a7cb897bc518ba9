/* decode(encode(x)) == x on a `fulgur tokenize` output: the ids of the shards (in order,
 * the token before the document dropped: BOS where the tokenizer has one, else
 * end-of-text) decoded by the tokenizer are the input file's bytes (its newlines left out
 * where the tokenizer encodes a line at a time: SentencePiece).
 * usage: tok_roundtrip TOKENIZER INPUT SHARD...
 * Prints "roundtrip: N ids, M bytes equal"; exit 1 at the first difference (its offset). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

/* The input's next byte, its newlines skipped where the tokenizer does not encode them. */
static int next_byte(const fg_tokenizer *t, FILE *in)
{
    int c = fgetc(in);
    while (c == '\n' && fg_tokenizer_by_line(t))
        c = fgetc(in);
    return c;
}

static int compare_shard(const fg_tokenizer *t, FILE *in, const char *shard, int first,
                         long long *ids, long long *bytes)
{
    FILE *f = fopen(shard, "rb");
    int32_t header[256];
    if (!f || fread(header, sizeof header, 1, f) != 1 || header[0] != 20240520) {
        fprintf(stderr, "roundtrip: %s: not an llm.c shard\n", shard);
        return 1;
    }
    for (int32_t i = 0; i < header[2]; i++) {
        uint16_t id;
        if (fread(&id, 2, 1, f) != 1) {
            fprintf(stderr, "roundtrip: %s: short\n", shard);
            return 1;
        }
        ++*ids;
        if (first && i == 0) {
            int32_t start = fg_tokenizer_bos(t) >= 0 ? fg_tokenizer_bos(t) : fg_tokenizer_eot(t);
            if (id != start) {
                fprintf(stderr, "roundtrip: the first id is %u, not %d (BOS or end-of-text)\n",
                        id, start);
                return 1;
            }
            continue;
        }
        size_t n = 0;
        const unsigned char *b = fg_tokenizer_bytes(t, id, &n);
        for (size_t k = 0; b && k < n; k++, ++*bytes)
            if (next_byte(t, in) != b[k]) {
                fprintf(stderr, "roundtrip: byte %lld differs (id %u, id #%lld)\n", *bytes, id, *ids);
                return 1;
            }
        if (!b) {
            fprintf(stderr, "roundtrip: id %u has no token\n", id);
            return 1;
        }
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tok_roundtrip TOKENIZER INPUT SHARD...\n");
        return 2;
    }
    fg_tokenizer *t = NULL;
    fg_error err = {0};
    if (fg_tokenizer_load(argv[1], &t, &err) != FG_OK) {
        fprintf(stderr, "roundtrip: %s\n", err.message);
        return 1;
    }
    FILE *in = fopen(argv[2], "rb");
    long long ids = 0, bytes = 0;
    int rc = in ? 0 : 1;
    for (int i = 3; rc == 0 && i < argc; i++)
        rc = compare_shard(t, in, argv[i], i == 3, &ids, &bytes);
    if (rc == 0 && next_byte(t, in) != EOF) {
        fprintf(stderr, "roundtrip: the decoded text stops at byte %lld, before the input ends\n",
                bytes);
        rc = 1;
    }
    if (rc == 0)
        printf("roundtrip: %lld ids, %lld bytes equal\n", ids, bytes);
    fg_tokenizer_free(t);
    return rc;
}
