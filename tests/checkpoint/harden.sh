# harden.{rotation_kill,ckpt_meta,init_from_nonfinite}: hostile-user defects of the
# checkpoint module (issue 17, defects 5 and 9; issue 30, defect 8), through the `fulgur`
# command. Sourced by tests/common/harden_test.sh; $HERE is this folder (edit_ckpt.py).

# Defect 5: a kill during a checkpoint write.
# The fault hook of the writer (FULGUR_TEST_CKPT_KILL=TEXT:STAGE) kills the process with
# SIGKILL during the write of the checkpoint whose path holds TEXT, at STAGE: created (the
# temporary file open), written (its data fsynced, not renamed), renamed (before the
# folder is synced). Checkpoints at steps 4, 8, 12, 16; save_top_k = 1 rotates each.
# Whatever the point, the previous checkpoint survives and --ckpt-path last resumes; the
# orphaned temporary file is removed by the next start.
group_rotation_kill() {
    write_ok_config "$TMP/ok.ini"
    cat >>"$TMP/ok.ini" <<'EOC'
[callback.checkpoint]
every_n_train_steps = 4
every_n_epochs = 0
save_top_k = 1
save_last = false
EOC
    for point in step=8:created step=8:written step=12:created step=12:written step=12:renamed; do
        i=$((${i:-0} + 1))
        root=$TMP/runs$i
        CASE="kill_$point"
        FULGUR_TEST_CKPT_KILL=$point "$FULGUR" --plugin-path "$PLUGINS" fit "$TMP/ok.ini" \
            trainer.max_epochs=2 trainer.log_every_n_steps=1 trainer.default_root_dir="$root" \
            >"$OUT" 2>"$ERR"
        RC=$?
        LAST_CMD="FULGUR_TEST_CKPT_KILL=$point fulgur fit ..."
        expect_rc 137
        dir=$root/default/version_0/checkpoints
        kept=$(ls "$dir" | grep -c '\.safetensors$')
        [ "$kept" -ge 1 ] || fail "after a kill at $point: no checkpoint left in $dir ($(ls "$dir" | tr '\n' ' '))"
        if [ "${point##*:}" != renamed ]; then
            ls "$dir" | grep -q '\.tmp\.' || fail "the kill at $point left no temporary file (hook not reached?)"
        fi
        runp "resume_$point" fit "$TMP/ok.ini" trainer.max_epochs=2 trainer.log_every_n_steps=1 \
            trainer.default_root_dir="$root" --ckpt-path last
        expect_rc 0
        expect_out "resum"
        ! ls "$dir" | grep -q '\.tmp\.' || fail "the orphaned temporary file in $dir survived the next start: $(ls "$dir" | tr '\n' ' ')"
    done
}

# Issue 30, defect 8: [model] init_from applies the check --ckpt-path applies: NaN weights
# are refused naming the file and the tensor (exit 2) before anything trains, and
# --allow-nonfinite loads them (the fit then diverges: exit 1).
group_init_from_nonfinite() {
    write_ok_config "$TMP/ok.ini"
    runp base fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" trainer.final_checkpoint="$TMP/ok.safetensors"
    expect_rc 0
    python3 "$HERE/edit_ckpt.py" "$TMP/ok.safetensors" "$TMP/nan.safetensors" nan fc1.weight
    runp init_ok fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" model.init_from="$TMP/ok.safetensors"
    expect_rc 0
    expect_out "init_from $TMP/ok.safetensors: 2 tensors loaded"
    runp init_nan fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" model.init_from="$TMP/nan.safetensors"
    expect_rc 2
    expect_err "nan.safetensors: tensor 'fc1.weight' holds 1 non-finite value(s)"
    grep -q "^epoch" "$OUT" && fail "it trained from NaN weights"
    runp init_nan_allowed fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" \
        model.init_from="$TMP/nan.safetensors" --allow-nonfinite
    expect_rc 1
    expect_out "init_from $TMP/nan.safetensors: 2 tensors loaded"
}

# Defect 9: checkpoint metadata and tensors on resume.
group_ckpt_meta() {
    write_ok_config "$TMP/ok.ini"
    runp base fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" trainer.final_checkpoint="$TMP/ok.safetensors"
    expect_rc 0
    E="python3 $HERE/edit_ckpt.py $TMP/ok.safetensors"
    for edit in global_step=-5 global_step=99999999999999999999 epoch=-1 \
                batches_done=x epoch_sum_n=nan scheduler_scale=0 micro_step=1e3; do
        $E "$TMP/bad.safetensors" meta "$edit"
        runp "meta_$edit" fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" --ckpt-path "$TMP/bad.safetensors"
        expect_rc 2
        expect_err "bad.safetensors: metadata '${edit%%=*}' = '${edit#*=}' is "
    done
    # NaN weights: refused naming the tensor, loaded with --allow-nonfinite.
    $E "$TMP/nan.safetensors" nan fc1.weight
    runp nan_refused test "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" --ckpt-path "$TMP/nan.safetensors"
    expect_rc 2
    expect_err "nan.safetensors: tensor 'fc1.weight' holds 1 non-finite value(s)"
    runp nan_allowed test "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" --ckpt-path "$TMP/nan.safetensors" --allow-nonfinite
    expect_rc 0
}
