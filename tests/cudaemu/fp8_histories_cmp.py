"""Compares the fp8 amax histories of two fulgur checkpoints (safetensors): a reference run
at the whole batch against a run that split it across replicas (tests/cudaemu/emu_fp8_dp.sh,
emu_fp8_mp.sh).
Each history is newest first; after 3 steps entry [2] is step 1's, [0] and [1] steps 3 and 2.
  fp8_histories_cmp.py REF RUN TOL COUNT LABEL
Exits 0 when both hold the same COUNT histories, step 1's entries are equal in every one
and steps 2-3's differ relatively by at most TOL; else prints what differs and exits 1."""
import json
import struct
import sys


def histories(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if ".fp8_amax_" in name:
            a, b = t["data_offsets"]
            out[name] = struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b])
    return out


def main():
    ref, run = histories(sys.argv[1]), histories(sys.argv[2])
    tol, count, label = float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    if len(ref) != count or set(ref) != set(run):
        print(f"histories: reference {sorted(ref)}, {label} {sorted(run)}; expected {count}")
        return 1
    differ = [k for k in sorted(ref) if run[k][2] != ref[k][2]]
    worst, where = 0.0, ""
    for k in sorted(ref):
        for a, b in zip(ref[k][:2], run[k][:2]):
            r = abs(a - b) / a if a > 0 else (0.0 if a == b else 1.0)
            if r > worst:
                worst, where = r, k
    print(f"{count} histories of the reference against {label}: step 1's amaxes equal in "
          f"{count - len(differ)}; steps 2-3 worst relative difference {worst:.2e} ({where}), "
          f"tolerance {tol}")
    for k in differ:
        print(f"  step 1: {k}: reference {ref[k][2]!r}, {label} {run[k][2]!r}")
    return 0 if not differ and worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
