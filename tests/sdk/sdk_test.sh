#!/bin/sh
# sdk.* tests (see CMakeLists.txt): one step per run, named by $1. The environment comes
# from ctest: FULGUR_SRC, FULGUR_BUILD, FULGUR_VERSION, FULGUR_PLUGIN_SUBDIR, FULGUR_LIBDIR,
# SDK_TESTS, SDK_WORK, SDK_CMAKE, SDK_CC, SDK_PKG_CONFIG.
#
# install        cmake --install into a staging prefix, moved to $SDK_WORK/prefix (so every
#                later step proves the tree relocatable); checks what is and is not there
# oot_plugin     builds examples/oot-plugin against the prefix; exports; fulgur plugins/explain
# template       the same for sdk/template
# template_backend  sdk/template/backend against the prefix: exports, listing; `fulgur check`
#                accepts an MLP config and refuses a conv2d one (exit 2, naming conv2d_forward);
#                a short fit on it
# oot_fit        the installed `fulgur` checks a config against the example's schema, then
#                a short fit on synthetic data writes its JSON lines
# metrics_json   drives the built example plugin through its ABI (metrics_json_driver.c)
# pkg_config     embeds libfulgur with `pkg-config --cflags --libs fulgur`
# cmake_embed    embeds libfulgur with find_package(Fulgur) + Fulgur::fulgur
set -eu

step=${1:?usage: sdk_test.sh STEP}
fail() {
    echo "FAIL [sdk.$step]: $*" >&2
    exit 1
}
command -v "$SDK_CMAKE" >/dev/null 2>&1 || {
    echo "SKIP [sdk.$step]: cmake not found ($SDK_CMAKE)"
    exit 77
}

PREFIX=$SDK_WORK/prefix
STAGE=$SDK_WORK/stage
LIBDIR=$FULGUR_LIBDIR
PLUGIN_DIR=$PREFIX/$FULGUR_PLUGIN_SUBDIR
FULGUR=$PREFIX/bin/fulgur
PKG_CONFIG=${SDK_PKG_CONFIG:-pkg-config}

# The installed fulgur must find plugins only where the test says: no user folders, no
# FULGUR_PLUGIN_PATH from the caller's shell.
export HOME="$SDK_WORK/home"
unset FULGUR_PLUGIN_PATH || true
mkdir -p "$SDK_WORK" "$HOME"

# Newline-separated words on one line, for messages.
words() {
    printf '%s\n' "$1" | tr '\n' ' '
}

# Runs a command, its output to $1.log; on failure prints the log and fails.
logged() {
    log=$1
    shift
    rc=0
    "$@" >"$log.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$log.log" >&2
        fail "exit $rc from: $*"
    fi
}

check_installed_layout() {
    for f in bin/fulgur "$LIBDIR/libfulgur.so" include/fulgur/fulgur.h \
        "$LIBDIR/cmake/Fulgur/FulgurConfig.cmake" "$LIBDIR/cmake/Fulgur/FulgurConfigVersion.cmake" \
        "$LIBDIR/cmake/Fulgur/FulgurTargets.cmake" "$LIBDIR/cmake/Fulgur/FulgurPlugin.cmake" \
        "$LIBDIR/pkgconfig/fulgur.pc"; do
        [ -e "$PREFIX/$f" ] || fail "not installed: $f"
    done
    [ -x "$FULGUR" ] || fail "bin/fulgur is not executable"
    # include/fulgur holds exactly the SDK headers and the embedding header: no core/src.
    want=$( (cd "$FULGUR_SRC/sdk/include/fulgur" && ls -- *.h; echo fulgur.h) | sort)
    have=$(cd "$PREFIX/include/fulgur" && ls | sort)
    [ "$want" = "$have" ] || fail "include/fulgur holds [$(words "$have")], want [$(words "$want")]"
    for h in "$FULGUR_SRC"/sdk/include/fulgur/*.h; do
        cmp -s "$h" "$PREFIX/include/fulgur/${h##*/}" || fail "installed ${h##*/} differs from the SDK's"
    done
}

check_no_test_artifacts() {
    # Plugins: only those of plugins/<kind>-<name>/ (tests/ fixtures never install).
    if [ -d "$PLUGIN_DIR" ]; then
        for so in "$PLUGIN_DIR"/*; do
            [ -e "$so" ] || continue
            base=${so##*/}
            kn=${base#fulgur-}
            kn=${kn%.so}
            [ -d "$FULGUR_SRC/plugins/$kn" ] || fail "installed plugin $base has no plugins/$kn folder (a test fixture?)"
        done
    fi
    fixture=$FULGUR_BUILD/tests/sdk/fixtures/fulgur-callback-my_callback.so
    [ -f "$fixture" ] || fail "the in-tree fixture $fixture was not built"
    [ ! -e "$PLUGIN_DIR/${fixture##*/}" ] || fail "the test fixture ${fixture##*/} was installed"
    bad=$(cd "$PREFIX" && find . \( -iname '*test*' -o -iname '*fixture*' -o -name '*.a' -o -name 'fulgur_static*' \) -print)
    [ -z "$bad" ] || fail "test or build-only files installed: $bad"
    for b in "$PREFIX"/bin/*; do
        case ${b##*/} in fulgur*) ;; *) fail "unexpected program installed: bin/${b##*/}" ;; esac
    done
}

check_relocatable() {
    # Text files of the package name no build, source or staging path; binaries carry no
    # build RUNPATH (an $ORIGIN one is what makes the moved tree work).
    for p in "$FULGUR_BUILD" "$FULGUR_SRC" "$STAGE"; do
        hits=$(grep -rIlF -- "$p" "$PREFIX/$LIBDIR/cmake" "$PREFIX/$LIBDIR/pkgconfig" "$PREFIX/include" || true)
        [ -z "$hits" ] || fail "absolute path $p in: $hits"
    done
    for bin in "$FULGUR" "$PREFIX/$LIBDIR"/libfulgur.so "$PLUGIN_DIR"/*.so; do
        [ -e "$bin" ] || continue
        rp=$(readelf -d "$bin" | grep -E 'R(UN)?PATH' || true)
        case $rp in *"$FULGUR_BUILD"* | *"$STAGE"*) fail "$bin has a build rpath: $rp" ;; esac
    done
}

step_install() {
    rm -rf "$STAGE" "$PREFIX"
    logged "$SDK_WORK/install" "$SDK_CMAKE" --install "$FULGUR_BUILD" --prefix "$STAGE"
    mv "$STAGE" "$PREFIX"
    check_installed_layout
    check_no_test_artifacts
    check_relocatable
}

# Configures and builds an out-of-tree project ($1) in a fresh folder ($2) against the
# installed prefix alone.
build_against_prefix() {
    src=$1
    bdir=$2
    rm -rf "$bdir"
    logged "$bdir-configure" "$SDK_CMAKE" -S "$src" -B "$bdir" \
        -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCMAKE_C_COMPILER="$SDK_CC" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-Werror \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
    logged "$bdir-build" "$SDK_CMAKE" --build "$bdir"
    found=$(sed -n 's/^Fulgur_DIR:PATH=//p' "$bdir/CMakeCache.txt")
    [ "$found" = "$PREFIX/$LIBDIR/cmake/Fulgur" ] || fail "found Fulgur in '$found', want $PREFIX/$LIBDIR/cmake/Fulgur"
    cc_json=$bdir/compile_commands.json
    [ -s "$cc_json" ] || fail "no $cc_json"
    for p in "$FULGUR_SRC/core/" "$FULGUR_SRC/sdk/include"; do
        ! grep -qF -- "$p" "$cc_json" || fail "compile commands of $src use the source tree ($p): $(cat "$cc_json")"
    done
    # Every include folder, normalized (a/../../core is core), is the prefix's or outside
    # the fulgur tree: the project sees installed headers only.
    src_real=$(realpath -m "$FULGUR_SRC")
    prefix_real=$(realpath -m "$PREFIX")
    grep -oE -- '(-I ?|-isystem )[^ "]+' "$cc_json" | sed -E 's/^(-I ?|-isystem )//' | sort -u >"$bdir/include-dirs.txt"
    while read -r inc; do
        r=$(realpath -m "$inc")
        case $r/ in
        "$prefix_real"/*) ;;
        "$src_real"/*) fail "$src compiles with -I $inc, inside the fulgur source tree" ;;
        esac
    done <"$bdir/include-dirs.txt"
    grep -qF -- "$PREFIX/include" "$cc_json" || fail "compile commands do not use $PREFIX/include: $(cat "$cc_json")"
}

check_exports() {
    so=$1
    [ -f "$so" ] || fail "not built: $so"
    syms=$(nm -D --defined-only "$so" | awk '{print $NF}')
    [ "$syms" = fulgur_plugin_v1 ] || fail "${so##*/} exports [$(words "$syms")], want only fulgur_plugin_v1"
}

# `fulgur plugins` format: "KIND NAME VERSION abi MAJOR.MINOR PATH" / "refused PATH: REASON",
# columns separated by one or more spaces (the command aligns them); "#" lines are comments.
check_listed() {
    dir=$1
    kind=$2
    name=$3
    version=$4
    out=$("$FULGUR" plugins --plugin-path "$dir" 2>&1) || fail "fulgur plugins --plugin-path $dir: exit $?: $out"
    echo "$out" | grep -qE "^$kind +$name +$version +abi +1\.[0-9]+ +$dir/fulgur-$kind-$name\.so\$" ||
        fail "fulgur plugins does not list '$kind $name $version abi 1.N $dir/fulgur-$kind-$name.so':
$out"
    ! echo "$out" | grep -qE "^refused .*fulgur-$kind-$name\.so" || fail "the plugin was refused:
$out"
    # The moved install still finds its own plugin folder (next to libfulgur).
    for so in "$PLUGIN_DIR"/*.so; do
        [ -e "$so" ] || continue
        echo "$out" | grep -qF "/${so##*/}" || fail "fulgur plugins misses the installed ${so##*/}:
$out"
    done
}

# `fulgur explain` format: the description, then per option "  KEY  TYPE  default=VALUE ...
# HELP" (a required key may say "required" in place of default=VALUE).
check_explained() {
    dir=$1
    what=$2
    description=$3
    shift 3
    out=$("$FULGUR" explain "$what" --plugin-path "$dir" 2>&1) || fail "fulgur explain $what: exit $?: $out"
    echo "$out" | grep -qF -- "$description" || fail "fulgur explain $what lacks the description '$description':
$out"
    for re in "$@"; do
        echo "$out" | grep -qiE -- "^ +$re" || fail "fulgur explain $what lacks an option line /^ +$re/:
$out"
    done
}

step_oot_plugin() {
    bdir=$SDK_WORK/oot-build
    build_against_prefix "$FULGUR_SRC/examples/oot-plugin" "$bdir"
    check_exports "$bdir/fulgur-callback-metrics_json.so"
    check_listed "$bdir" callback metrics_json 1.0.0
    check_explained "$bdir" callback.metrics_json "writes each event's metrics as one JSON line" \
        "path +string +(default=|required).* file to write, one JSON object per event" \
        "every_n_events +int +default=1 .*write every n-th event"
}

step_template() {
    bdir=$SDK_WORK/template-build
    build_against_prefix "$FULGUR_SRC/sdk/template" "$bdir"
    check_exports "$bdir/fulgur-callback-my_callback.so"
    check_listed "$bdir" callback my_callback 0.1.0
    check_explained "$bdir" callback.my_callback "logs training metrics every n steps" \
        "every_n_steps +int +default=1 .*log every n-th training step event" \
        "stop_below_loss +float +default=0 .*stop training once train/loss is below this"
}

# The backend template: built against the prefix alone, then used by the installed fulgur.
step_template_backend() {
    bdir=$SDK_WORK/template-backend-build
    build_against_prefix "$FULGUR_SRC/sdk/template/backend" "$bdir"
    check_exports "$bdir/fulgur-backend-my_backend.so"
    check_listed "$bdir" backend my_backend 0.1.0
    dir=$SDK_WORK/template-backend
    rm -rf "$dir"
    mkdir -p "$dir"
    write_backend_config() { # $1: file, $2: the layers
        cat >"$1" <<INI
[backend]
name = my_backend
[trainer]
max_epochs = 1
limit_train_batches = 4
limit_val_batches = 2
default_root_dir = $dir/runs
[data]
name = synthetic
train_size = 256
test_size = 64
batch_size = 32
num_workers = 0
$2
INI
    }
    write_backend_config "$dir/mlp.ini" "[layer.flat]
type = flatten
[layer.hidden]
type = linear
out_features = 32
[layer.act]
type = relu
[layer.out]
type = linear
out_features = 10"
    write_backend_config "$dir/conv.ini" "[layer.conv1]
type = conv2d
out_channels = 4
kernel_size = 3
[layer.flat]
type = flatten
[layer.out]
type = linear
out_features = 10"
    out=$("$FULGUR" --plugin-path "$bdir" check "$dir/mlp.ini" 2>&1) || fail "fulgur check mlp.ini with backend.my_backend: exit $?: $out"
    out=$("$FULGUR" --plugin-path "$bdir" fit "$dir/mlp.ini" 2>&1) || fail "fulgur fit mlp.ini with backend.my_backend: exit $?: $out"
    case $out in *"weights:"*) ;; *) fail "fulgur fit with backend.my_backend printed no weights line: $out" ;; esac
    rc=0
    out=$("$FULGUR" --plugin-path "$bdir" check "$dir/conv.ini" 2>&1) || rc=$?
    [ "$rc" -eq 2 ] || fail "fulgur check conv.ini with backend.my_backend: exit $rc, want 2: $out"
    for frag in "backend.my_backend lacks:" "conv2d_forward(f32) for [layer.conv1]" \
        "conv2d_backward(f32) for [layer.conv1]"; do
        case $out in *"$frag"*) ;; *) fail "fulgur check conv.ini: no '$frag' in: $out" ;; esac
    done
}

step_metrics_json() {
    so=$SDK_WORK/oot-build/fulgur-callback-metrics_json.so
    [ -f "$so" ] || fail "not built: $so (sdk.oot_plugin builds it)"
    export PKG_CONFIG_PATH="$PREFIX/$LIBDIR/pkgconfig"
    cflags=$("$PKG_CONFIG" --cflags fulgur) || fail "pkg-config --cflags fulgur failed"
    driver=$SDK_WORK/metrics_json_driver
    # shellcheck disable=SC2086 # cflags is a list of flags
    common=$SDK_TESTS/../common # the fake host and checks: SDK headers only
    logged "$driver-build" "$SDK_CC" -std=c11 -Wall -Wextra -Werror $cflags -I"$common" \
        "$SDK_TESTS/metrics_json_driver.c" "$common/check.c" "$common/fake_host.c" \
        "$common/option_text.c" "$common/plugin_load.c" "$common/test_event.c" -o "$driver" -ldl
    scratch=$SDK_WORK/metrics_json
    rm -rf "$scratch"
    mkdir -p "$scratch"
    "$driver" "$so" "$scratch" || fail "metrics_json_driver failed"
}

# The installed `fulgur` validates the example's section against the plugin's own schema,
# then a short real run writes the JSON lines.
step_oot_fit() {
    oot=$SDK_WORK/oot-build
    [ -f "$oot/fulgur-callback-metrics_json.so" ] || fail "not built: $oot (sdk.oot_plugin builds it)"
    dir=$SDK_WORK/oot-fit
    rm -rf "$dir"
    mkdir -p "$dir"
    write_fit_config() { # $1: file, $2: the [callback.metrics_json] body
        cat >"$1" <<INI
[trainer]
max_epochs = 2
limit_train_batches = 3
log_every_n_steps = 1
[data]
name = synthetic
[layer.flat]
type = flatten
[layer.fc]
type = linear
out_features = 10
[callback.metrics_json]
$2
INI
    }
    write_fit_config "$dir/typo.ini" "path = $dir/m.jsonl
every_n_event = 2"
    write_fit_config "$dir/range.ini" "path = $dir/m.jsonl
every_n_events = 0"
    write_fit_config "$dir/nopath.ini" "every_n_events = 2"
    expect_check_error "$dir/typo.ini" "unknown key 'every_n_event' in [callback.metrics_json]" "did you mean 'every_n_events'"
    expect_check_error "$dir/range.ini" "[callback.metrics_json] every_n_events = 0"
    expect_check_error "$dir/nopath.ini" "[callback.metrics_json]" "'path'"

    write_fit_config "$dir/fit.ini" "path = $dir/m.jsonl"
    out=$("$FULGUR" --plugin-path "$oot" fit "$dir/fit.ini" 2>&1) || fail "fulgur fit: exit $?: $out"
    [ -f "$dir/m.jsonl" ] || fail "fulgur fit wrote no $dir/m.jsonl: $out"
    head -n 1 "$dir/m.jsonl" | grep -q '^{"event":"fit_start","epoch":0,"global_step":0,' ||
        fail "first line is not fit_start: $(head -n 1 "$dir/m.jsonl")"
    grep -qE '^\{"event":"epoch_end","epoch":1,.*"metrics":\{.*"train/loss":[0-9.e+-]+' "$dir/m.jsonl" ||
        fail "no epoch_end line with train/loss for epoch 1: $(cat "$dir/m.jsonl")"
    grep -q '^{"event":"fit_end",' "$dir/m.jsonl" || fail "no fit_end line: $(cat "$dir/m.jsonl")"
    bad=$(grep -vE '^\{"event":"[a-z_]+","epoch":[0-9]+,.*\}$' "$dir/m.jsonl" || true)
    [ -z "$bad" ] || fail "malformed lines: $bad"
}

# `fulgur check CONFIG` fails with exit 2 and every given fragment in its message.
expect_check_error() {
    cfg=$1
    shift
    rc=0
    out=$("$FULGUR" --plugin-path "$SDK_WORK/oot-build" check "$cfg" 2>&1) || rc=$?
    [ "$rc" -eq 2 ] || fail "fulgur check ${cfg##*/}: exit $rc, want 2: $out"
    for frag in "$@"; do
        case $out in *"$frag"*) ;; *) fail "fulgur check ${cfg##*/}: no '$frag' in: $out" ;; esac
    done
}

step_pkg_config() {
    export PKG_CONFIG_PATH="$PREFIX/$LIBDIR/pkgconfig"
    v=$("$PKG_CONFIG" --modversion fulgur) || fail "pkg-config does not find fulgur in $PKG_CONFIG_PATH"
    [ "$v" = "$FULGUR_VERSION" ] || fail "pkg-config says version $v, want $FULGUR_VERSION"
    pdir=$("$PKG_CONFIG" --variable=plugindir fulgur)
    [ "$(realpath -m "$pdir")" = "$(realpath -m "$PLUGIN_DIR")" ] ||
        fail "plugindir = '$pdir', want $PLUGIN_DIR"
    abi=$("$PKG_CONFIG" --variable=abi_major fulgur)
    want_abi=$(sed -n 's/^#define FG_ABI_MAJOR \([0-9]*\).*/\1/p' "$PREFIX/include/fulgur/plugin.h")
    [ -n "$abi" ] && [ "$abi" = "$want_abi" ] || fail "abi_major = '$abi', plugin.h says '$want_abi'"
    libdir=$("$PKG_CONFIG" --variable=libdir fulgur)
    cflags=$("$PKG_CONFIG" --cflags fulgur)
    libs=$("$PKG_CONFIG" --libs fulgur)
    case " $libs " in *" -lfulgur "*) ;; *) fail "pkg-config --libs: '$libs' lacks -lfulgur" ;; esac
    prog=$SDK_WORK/embed_pkg_config
    # shellcheck disable=SC2086
    logged "$prog-build" "$SDK_CC" -std=c11 -Wall -Wextra -Werror $cflags \
        "$SDK_TESTS/embed_version.c" -o "$prog" $libs "-Wl,-rpath,$libdir"
    out=$("$prog") || fail "$prog: exit $?: $out"
    case $out in "fulgur $FULGUR_VERSION abi 1."*) ;; *) fail "embedded fg_version: '$out', want 'fulgur $FULGUR_VERSION abi 1.N'" ;; esac
    lib=$(ldd "$prog" | sed -n 's/.*libfulgur\.so[^ ]* => \([^ ]*\).*/\1/p')
    [ "$(cd "${lib%/*}" && pwd -P)" = "$(cd "$PREFIX/$LIBDIR" && pwd -P)" ] ||
        fail "$prog loads libfulgur from '$lib', want $PREFIX/$LIBDIR"
}

step_cmake_embed() {
    bdir=$SDK_WORK/embed-build
    build_against_prefix "$SDK_TESTS/embed" "$bdir"
    out=$("$bdir/embed_version") || fail "embed_version: exit $?: $out"
    case $out in "fulgur $FULGUR_VERSION abi 1."*) ;; *) fail "embedded fg_version: '$out'" ;; esac
    grep -qx "FULGUR_VERSION=$FULGUR_VERSION" "$bdir/fulgur_vars.txt" || fail "FULGUR_VERSION: $(cat "$bdir/fulgur_vars.txt")"
    grep -qx "FULGUR_PLUGIN_DIR=$PLUGIN_DIR" "$bdir/fulgur_vars.txt" ||
        fail "FULGUR_PLUGIN_DIR is not $PLUGIN_DIR: $(cat "$bdir/fulgur_vars.txt")"
    grep -qx "FULGUR_INCLUDE_DIR=$PREFIX/include" "$bdir/fulgur_vars.txt" ||
        fail "FULGUR_INCLUDE_DIR is not $PREFIX/include: $(cat "$bdir/fulgur_vars.txt")"
}

case $step in
install | oot_plugin | oot_fit | template | template_backend | metrics_json | pkg_config | cmake_embed) "step_$step" ;;
*) fail "unknown step '$step'" ;;
esac
echo "ok [sdk.$step]"
