# harden.every_n_steps: the checkpoint callback's step checkpoints (issue 17, defect 2),
# through the `fulgur` command. Sourced by tests/common/harden_test.sh.

# every_n_train_steps = 10 with log_every_n_steps = 50: files at steps 10, 20, ... whatever
# the logging interval (8 steps an epoch, 3 epochs: 24 steps).
group_every_n_steps() {
    write_ok_config "$TMP/ok.ini"
    cat >>"$TMP/ok.ini" <<'EOC'
[callback.checkpoint]
every_n_train_steps = 5
every_n_epochs = 0
save_top_k = -1
EOC
    runp steps fit "$TMP/ok.ini" trainer.max_epochs=3 trainer.log_every_n_steps=50 \
        trainer.default_root_dir="$TMP/runs"
    expect_rc 0
    got=$(ls "$TMP"/runs/default/version_0/checkpoints/ 2>/dev/null | sed -n 's/.*step=\([0-9]*\)\.safetensors/\1/p' | sort -n | tr '\n' ' ')
    [ "$got" = "5 10 15 20 " ] || fail "checkpoints at steps '$got', expected '5 10 15 20 '"
}
