#!/bin/sh
# Prints examples/fashion_mnist_resnet.ini read from Debian's fashion-mnist idx files
# (dataset-fashion-mnist: no augmentation, no callbacks, 5000 samples held out) with ACT in
# place of its relus, POOL of its max pool and OPT's optimizer (sgd: lr 0.05, momentum 0.9;
# adamw: the example's); with EVERY, a checkpoint every EVERY training steps named step={step}.
#   tests/ddp/resnet_ini.sh EXAMPLE ACT POOL OPT [EVERY]
set -eu
awk -v act="$2" -v pool="$3" -v opt="$4" '
/^\[data\]/ { print "[data]\nname = idx\ndir = /usr/share/datasets/fashion-mnist\nbatch_size = 64\nnum_workers = 0\nnormalize = true\nval_split = 5000\nshuffle = true\n"; skip = 1; next }
/^\[callback\./ { skip = 1; next }
/^\[optimizer\]/ { if (opt == "sgd") print "[optimizer]\nname = sgd\nlr = 0.05\nmomentum = 0.9\n"; else print "[optimizer]\nname = adamw\nlr = 0.003\nweight_decay = 0.01\n"; skip = 1; next }
/^\[/ { skip = 0 }
skip { next }
/^type = relu/ { print "type = " act; next }
/^type = maxpool2d/ { print "type = " pool; next }
{ print }' "$1"
[ -z "${5:-}" ] || printf '[callback.checkpoint]\nmonitor =\nsave_top_k = -1\nevery_n_train_steps = %s\nevery_n_epochs = 0\nfilename = step={step}\n' "$5"
