// The C face of libsentencepiece (spm.h): the one C++ file of the core. No exception
// leaves it; every failure is an fg_status with a message naming the model file.
#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

extern "C" {
#include "spm.h"
#include "tokenizer.h"
}

// No std container of the core's own: their out-of-line code would be exported from
// libfulgur (std's templates have default visibility), which exports the embedding API alone.
struct fg_spm {
    sentencepiece::SentencePieceProcessor sp;
    std::string bytes;       // what each id contributes to decoded text, one after another
    size_t *start = nullptr; // id's bytes: [start[id], start[id + 1])
    int32_t count = 0;
    ~fg_spm() { std::free(start); }
};

// U+2581 (the pieces' space), U+2047 (SentencePiece's decoding of the unknown piece).
static const char kSpace[] = "\xe2\x96\x81";
static const char kUnknown[] = " \xe2\x81\x87 ";

static std::string piece_bytes(const sentencepiece::SentencePieceProcessor &sp, int id)
{
    if (sp.IsControl(id) || sp.IsUnused(id))
        return std::string();
    if (sp.IsUnknown(id))
        return kUnknown;
    const std::string &piece = sp.IdToPiece(id);
    if (sp.IsByte(id) && piece.size() == 6) // <0xNN>
        return std::string(1, (char)std::strtol(piece.substr(3, 2).c_str(), nullptr, 16));
    std::string out;
    for (size_t at = 0; at < piece.size();) {
        if (piece.compare(at, 3, kSpace) == 0) {
            out += ' ';
            at += 3;
        } else {
            out += piece[at++];
        }
    }
    return out;
}

extern "C" fg_status fg_spm_load(const char *path, fg_spm **out, fg_error *err)
{
    *out = nullptr;
    fg_spm *s = new (std::nothrow) fg_spm;
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    try {
        sentencepiece::util::Status st = s->sp.Load(path);
        if (!st.ok()) {
            std::string why = st.ToString();
            delete s;
            return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: not a SentencePiece "
                                "model SentencePiece can load: %s", path, why.c_str());
        }
        int n = s->sp.GetPieceSize();
        s->start = (size_t *)std::malloc(((size_t)n + 1) * sizeof *s->start);
        if (!s->start)
            throw std::bad_alloc();
        for (int id = 0; id < n; id++) {
            s->start[id] = s->bytes.size();
            s->bytes += piece_bytes(s->sp, id);
        }
        s->start[n] = s->bytes.size();
        s->count = n;
    } catch (const std::bad_alloc &) {
        delete s;
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: %s: out of memory", path);
    } catch (...) {
        delete s;
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: SentencePiece failed to "
                            "load it", path);
    }
    *out = s;
    return FG_OK;
}

extern "C" void fg_spm_free(fg_spm *s)
{
    delete s;
}

extern "C" int32_t fg_spm_vocab_size(const fg_spm *s)
{
    return s->count;
}

// SentencePiece answers -1 for an id the model disables (e.g. --pad_id=-1).
static int32_t declared(int id, const fg_spm *s)
{
    return id >= 0 && id < fg_spm_vocab_size(s) ? (int32_t)id : -1;
}

extern "C" int32_t fg_spm_bos(const fg_spm *s)
{
    return declared(s->sp.bos_id(), s);
}

extern "C" int32_t fg_spm_eos(const fg_spm *s)
{
    return declared(s->sp.eos_id(), s);
}

extern "C" int32_t fg_spm_piece_id(const fg_spm *s, const char *piece)
{
    try {
        int id = s->sp.PieceToId(piece);
        // PieceToId answers the unknown id for a piece it lacks: only the unknown piece
        // itself is the unknown id.
        if (id < 0 || id >= fg_spm_vocab_size(s) || s->sp.IdToPiece(id) != piece)
            return -1;
        return id;
    } catch (...) {
        return -1;
    }
}

extern "C" const unsigned char *fg_spm_bytes(const fg_spm *s, int32_t id, size_t *n)
{
    *n = 0;
    if (id < 0 || id >= fg_spm_vocab_size(s))
        return nullptr;
    *n = s->start[id + 1] - s->start[id];
    return (const unsigned char *)s->bytes.data() + s->start[id];
}

static int append_ids(fg_token_buf *b, const std::vector<int> &ids)
{
    if (b->len + ids.size() > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + ids.size())
            cap *= 2;
        int32_t *p = (int32_t *)std::realloc(b->ids, cap * sizeof *p);
        if (!p)
            return -1;
        b->ids = p;
        b->cap = cap;
    }
    for (int id : ids)
        b->ids[b->len++] = (int32_t)id;
    return 0;
}

extern "C" fg_status fg_spm_encode(const fg_spm *s, const char *text, size_t len,
                                   fg_token_buf *out, fg_error *err)
{
    try {
        std::vector<int> ids;
        for (size_t at = 0; at < len;) {
            const char *nl = (const char *)std::memchr(text + at, '\n', len - at);
            size_t end = nl ? (size_t)(nl - text) : len;
            sentencepiece::util::Status st =
                s->sp.Encode(absl::string_view(text + at, end - at), &ids);
            if (!st.ok())
                return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: SentencePiece "
                                    "cannot encode the line at byte %zu: %s", at,
                                    st.ToString().c_str());
            if (append_ids(out, ids) != 0)
                return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
            at = end + 1;
        }
        return FG_OK;
    } catch (...) {
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: SentencePiece failed while "
                            "encoding (out of memory)");
    }
}
