#!/usr/bin/env python3
"""Writes an iris-like table: 4 numeric features of 3 classes drawn around Fisher's iris
class means, with an id column to ignore and the class (0, 1, 2) in `species`.

    iris_like.py OUT_DIR      -> OUT_DIR/train.csv (150 rows), OUT_DIR/test.csv (60 rows)
"""
import os
import random
import sys

MEANS = [(5.01, 3.43, 1.46, 0.25), (5.94, 2.77, 4.26, 1.33), (6.59, 2.97, 5.55, 2.03)]
STDS = [(0.35, 0.38, 0.17, 0.11), (0.52, 0.31, 0.47, 0.20), (0.64, 0.32, 0.55, 0.27)]
HEADER = "id,sepal_length,sepal_width,petal_length,petal_width,species\n"


def write(path, per_class, rnd, first_id):
    rows = []
    for cls, (mean, std) in enumerate(zip(MEANS, STDS)):
        for _ in range(per_class):
            rows.append([round(rnd.gauss(m, s), 2) for m, s in zip(mean, std)] + [cls])
    rnd.shuffle(rows)
    with open(path, "w") as f:
        f.write(HEADER)
        for i, r in enumerate(rows):
            f.write(",".join(str(v) for v in [first_id + i] + r) + "\n")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(1936)
    write(os.path.join(out, "train.csv"), 50, rnd, 0)
    write(os.path.join(out, "test.csv"), 20, rnd, 1000)


if __name__ == "__main__":
    main()
