#!/usr/bin/env bash
# A language model's logged metrics: perplexity = exp(loss) and, for byte-level models
# (data.text), bits per byte = loss / ln 2, at every point the loss is logged (train steps,
# epochs, validation), in metrics.csv (csv_logger) and in the printed lines; a token model
# (data.tokens, vocab 256 but not bytes) gets ppl and no bpb; a classifier neither (it keeps
# acc). Needs FULGUR.
set -u
: "${FULGUR:?}"
fail() { echo "FAIL [lm.metrics]: $*" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 1 300) >"$WORK/corpus.txt"
python3 -c "import struct; open('$WORK/tok.bin','wb').write(struct.pack('<4000H', *[(i * 7) % 256 for i in range(4000)]))" ||
    fail "could not write the token file"
common="[trainer]
max_epochs = 1
seed = 3
log_every_n_steps = 10
test_after_fit = false
enable_progress_bar = false
default_root_dir = $WORK/runs
[callback.csv_logger]"
model="[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 16
[layer.wpe]
type = position_embedding
max_positions = 16
[layer.h]
type = transformer_block
heads = 2
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
[optimizer]
name = adamw
lr = 0.01"
printf '%s\n[data]\nname = text\ndir = %s\nfiles = corpus.txt\ncontext = 16\nval_fraction = 0.2\ntrain_windows = 480\nval_windows = 64\nbatch_size = 16\nnum_workers = 0\n%s\n' \
    "$common" "$WORK" "$model" >"$WORK/text.ini"
printf '%s\n[data]\nname = tokens\ndir = %s\ntrain_file = tok.bin\nval_file = tok.bin\nvocab_size = 256\ncontext = 16\ntrain_windows = 160\nbatch_size = 16\nnum_workers = 0\n%s\n' \
    "$common" "$WORK" "$model" >"$WORK/tokens.ini"
printf '%s\n[data]\nname = synthetic\ntrain_size = 256\nval_size = 64\nbatch_size = 32\nnum_workers = 0\n[layer.flat]\ntype = flatten\n[layer.fc]\ntype = linear\nout_features = 10\n' \
    "$common" >"$WORK/cls.ini"

# fit NAME: runs it, leaves its log in $WORK/NAME.log and its metrics.csv path in $csv
fit() {
    "$FULGUR" fit "$WORK/$1.ini" trainer.default_root_dir="$WORK/runs_$1" >"$WORK/$1.log" 2>&1 ||
        { cat "$WORK/$1.log" >&2; fail "fulgur fit $1 failed"; }
    csv=$(ls "$WORK"/runs_"$1"/default/version_0/metrics.csv 2>/dev/null) ||
        fail "$1: no metrics.csv"
}

# check_csv CSV BPB(0|1): every row's ppl and bpb against its loss, per prefix; prints counts
check_csv() {
    python3 - "$1" "$2" <<'PY'
import csv, math, sys
path, want_bpb = sys.argv[1], sys.argv[2] == "1"
rows = list(csv.DictReader(open(path)))
cols = rows[0].keys()
checked = {"ppl": 0, "bpb": 0}
for loss_col in ("train/step_loss", "train/loss", "val/loss"):
    base = loss_col[:-len("loss")]
    for kind in ("ppl", "bpb"):
        col = base + kind
        if kind == "bpb" and not want_bpb:
            if col in cols:
                sys.exit(f"{path}: {col} logged for a model whose tokens are not bytes")
            continue
        if col not in cols:
            sys.exit(f"{path}: no {col} column beside {loss_col}")
        for r in rows:
            if not r[loss_col]:
                if r[col]:
                    sys.exit(f"{path}: {col} = {r[col]} without a {loss_col}")
                continue
            loss, got = float(r[loss_col]), float(r[col])
            want = math.exp(loss) if kind == "ppl" else loss / math.log(2)
            if abs(got - want) > 1e-9 * abs(want):
                sys.exit(f"{path}: step {r['step']}: {col} = {got}, {loss_col} = {loss} gives {want}")
            checked[kind] += 1
print(checked["ppl"], checked["bpb"])
PY
}

fit text
n=$(check_csv "$csv" 1) || fail "text: $n"
read -r nppl nbpb <<<"$n"
[ "$nppl" -ge 4 ] && [ "$nbpb" -ge 4 ] || fail "text: only $nppl ppl and $nbpb bpb values checked"
# the printed epoch and val lines: ppl and bpb of the loss on the same line
awk '/ loss [0-9.]+ .* ppl / {
        for (i = 1; i < NF; i++) { if ($i == "loss") l = $(i + 1); if ($i == "ppl") p = $(i + 1); if ($i == "bpb") b = $(i + 1) }
        if (b == "" || (p - exp(l)) ^ 2 > (1e-3 * p) ^ 2 || (b - l / log(2)) ^ 2 > 1e-8) { print "bad line: " $0; bad = 1 }
        n++; b = "" }
     END { exit bad || n < 2 }' "$WORK/text.log" || { cat "$WORK/text.log" >&2; fail "text: printed ppl/bpb do not match the printed loss"; }

fit tokens
n=$(check_csv "$csv" 0) || fail "tokens: $n"
! grep -q " bpb " "$WORK/tokens.log" || fail "tokens: bits per byte printed for a token model"
grep -q " ppl " "$WORK/tokens.log" || fail "tokens: no perplexity printed"

fit cls
if head -n 1 "$csv" | grep -qE 'ppl|bpb'; then fail "a classifier logs ppl or bpb: $(head -n 1 "$csv")"; fi
grep -q " acc " "$WORK/cls.log" || fail "the classifier lost its acc"
! grep -qE " (ppl|bpb) " "$WORK/cls.log" || fail "a classifier prints ppl or bpb"
echo "lm.metrics: text ppl/bpb ($nppl/$nbpb values) = exp(loss), loss/ln 2; tokens ppl only; classifier neither"
