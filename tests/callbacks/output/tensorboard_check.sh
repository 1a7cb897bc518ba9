#!/bin/sh
# callback2.tensorboard.decode: the event file the plugin wrote, read back by an
# independent decoder (decode_tfevents.py: its own CRC-32C and protobuf parsing), must hold
# exactly the scalars fed; a flipped byte and a cut file must be caught by the CRCs.
# usage: tensorboard_check.sh DRIVER DECODER PYTHON WORK_DIR
set -eu
driver=$1 decoder=$2 python=$3 work=$4
[ -x "$python" ] || { echo "SKIP: no python3 ($python)"; exit 77; }

"$driver" write "$work"
file=$(ls "$work"/write/run/tb/events.out.tfevents.*)
"$python" "$decoder" "$file" > "$work/write/decoded.txt"
diff -u "$work/write/expected.txt" "$work/write/decoded.txt"
echo "ok: $(wc -l < "$work/write/decoded.txt") scalars decoded as fed"

# One bit flipped near the end (inside the last record's data) must fail the data CRC.
cp "$file" "$work/write/corrupt"
"$python" - "$work/write/corrupt" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[-8] ^= 0x01
open(path, "wb").write(bytes(data))
PY
if "$python" "$decoder" "$work/write/corrupt" > /dev/null 2> "$work/write/corrupt.err"; then
    echo "FAIL: the decoder accepted a corrupted file" >&2; exit 1
fi
grep -q "data crc mismatch" "$work/write/corrupt.err" || { cat "$work/write/corrupt.err" >&2; exit 1; }

head -c -3 "$file" > "$work/write/cut"
if "$python" "$decoder" "$work/write/cut" > /dev/null 2> "$work/write/cut.err"; then
    echo "FAIL: the decoder accepted a truncated file" >&2; exit 1
fi
grep -q "truncated" "$work/write/cut.err" || { cat "$work/write/cut.err" >&2; exit 1; }
echo "ok: corruption and truncation are detected"
