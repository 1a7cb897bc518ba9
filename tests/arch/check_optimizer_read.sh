#!/bin/sh
# The [optimizer] section is read in one place (issue 25): model/optimizer.c's
# fg_optimizer_read_config, into one typed struct (fg_optimizer_config) that the trainer
# keeps (fg_trainer.optim, read once by train/trainer_keys.c) and hands to everything
# else: the stage services' optimizers, the ops check, checkpoints, decay groups.
#   check_optimizer_read.sh SRC_DIR
# Fails on a config read of the section (fg_config_* or fg_section_read_* naming
# "optimizer") outside model/optimizer.c, and lists who calls the reader.
set -u
src=${1:?usage: $0 SRC_DIR}
[ -d "$src" ] || { echo "FAIL: $src is not a folder" >&2; exit 1; }
status=0
for f in $(find "$src" -name '*.c' | LC_ALL=C sort); do
    rel=${f#"$src"/}
    n=$(perl -0777 -ne 's{/\*.*?\*/}{ }gs; my $n = () = /\bfg_(?:config|section_read)_\w+\s*\([^;]*?"optimizer"/g; print $n' "$f")
    if [ "$n" -gt 0 ] && [ "$rel" != model/optimizer.c ]; then
        echo "FAIL: $rel reads [optimizer] itself ($n calls): take the trainer's fg_optimizer_config"
        status=1
    fi
done
callers=$(grep -rl 'fg_optimizer_read_config *(' "$src" --include=*.c | sed "s|^$src/||" | LC_ALL=C sort | tr '\n' ' ')
[ $status -eq 0 ] && echo "ok: [optimizer] is read by model/optimizer.c alone; fg_optimizer_read_config in: $callers"
exit $status
