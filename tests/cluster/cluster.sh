#!/usr/bin/env bash
# A two-node Slurm cluster on one machine: network namespaces joined by veth pairs on a
# bridge, one munged, slurmctld and one slurmd per node (tests/cluster/README.md).
#
#   cluster.sh up        build the network, write slurm.conf, start the daemons, wait for idle
#   cluster.sh down      stop everything and remove the namespaces, veths and bridge
#   cluster.sh run CMD   run CMD as a client of the cluster (in node n1's namespace, SLURM_CONF set)
#   cluster.sh node N CMD   run CMD in node N's namespace (n1, n2): tc, ip link
#   cluster.sh shape on|off   1 Gbit/s (tbf) and 1 ms each way (netem, where the kernel has
#                        sch_netem) on every node's eth0, or no shaping
#   cluster.sh status    sinfo of the running cluster
#
# Root only; installs nothing (tests/install-deps.sh installs slurmctld, slurmd, slurm-client,
# munge). Exit 77 with a message naming what is missing or forbidden (ctest skips).
# FULGUR_CLUSTER_DIR: the cluster's state folder (default /var/tmp/fulgur-cluster: short,
# because munged's socket path must fit a sockaddr_un, and not under /tmp, which each node
# replaces with its own).
set -u

DIR=${FULGUR_CLUSTER_DIR:-/var/tmp/fulgur-cluster}
NODES=(n1 n2)
SUBNET=10.77.0
BRIDGE=fgsl-br0
NS_PREFIX=fgsl-
CONF=$DIR/slurm.conf
UP_TIMEOUT_S=${FULGUR_CLUSTER_UP_TIMEOUT_S:-60}

die() {
    echo "cluster: $*" >&2
    exit 1
}
skip() {
    echo "SKIP cluster: $*"
    exit 77
}
node_ip() { echo "$SUBNET.${1#n}"; } # n1 -> 10.77.0.1
ns() { echo "$NS_PREFIX$1"; }

preflight() {
    [ "$(id -u)" = 0 ] || skip "not root (network namespaces and slurmd need root)"
    local b
    for b in ip tc munged slurmctld slurmd sinfo sbatch srun scontrol; do
        command -v "$b" >/dev/null || skip "$b not found (tests/install-deps.sh installs slurmctld slurmd slurm-client munge)"
    done
    ip netns add "${NS_PREFIX}probe" 2>"$DIR.probe.err" ||
        skip "this machine forbids network namespaces: ip netns add: $(cat "$DIR.probe.err")"
    ip netns del "${NS_PREFIX}probe"
    rm -f "$DIR.probe.err"
}

make_network() {
    ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
    ip link set "$BRIDGE" up
    local n
    for n in "${NODES[@]}"; do
        ip netns add "$(ns "$n")" || die "ip netns add $(ns "$n") failed"
        # host side fgsl-h<n> on the bridge, node side eth0 with the node's address
        ip link add "fgsl-h$n" type veth peer name "fgsl-e$n" || die "cannot create veth fgsl-h$n"
        ip link set "fgsl-e$n" netns "$(ns "$n")"
        ip link set "fgsl-h$n" master "$BRIDGE" up
        ip -n "$(ns "$n")" link set "fgsl-e$n" name eth0
        ip -n "$(ns "$n")" addr add "$(node_ip "$n")/24" dev eth0
        ip -n "$(ns "$n")" link set eth0 up
        ip -n "$(ns "$n")" link set lo up
    done
}

write_conf() {
    local cpus n
    cpus=$(nproc)
    cat >"$CONF" <<EOF
# written by tests/cluster/cluster.sh
ClusterName=fulgur
SlurmctldHost=n1($(node_ip n1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$DIR/munge/munge.sock,cred_expire=10
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
# no systemd and no cgroup delegation here: processes tracked through /proc
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
# a requeued job is started within seconds of becoming eligible (defaults: 60 s, 30 s)
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
SlurmdTimeout=30
KillWait=5
MinJobAge=600
NodeName=DEFAULT CPUs=$cpus RealMemory=1000 State=UNKNOWN
EOF
    for n in "${NODES[@]}"; do
        echo "NodeName=$n NodeHostname=$n NodeAddr=$(node_ip "$n")" >>"$CONF"
    done
    echo "PartitionName=debug Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" >>"$CONF"
}

# in_net N CMD...: CMD in node N's network namespace. nsenter, not `ip netns exec`: the
# latter also remounts /sys, which hides /sys/fs/cgroup, and slurmd refuses to start then.
in_net() {
    local n=$1
    shift
    nsenter --net="/run/netns/$(ns "$n")" "$@"
}
# The folders under /tmp a job needs on every node (FULGUR_CLUSTER_KEEP: the source and
# build trees, where a clone lives under /tmp): their top folders, /tmp/X, one per line.
keep_under_tmp() {
    local p
    for p in ${FULGUR_CLUSTER_KEEP:-}; do
        case $p/ in /tmp/?*/) p=${p#/tmp/}; echo "/tmp/${p%%/*}" ;; esac
    done | sort -u
}
# in_node N CMD...: the same with a hostname (UTS namespace) and a /tmp of its own (mount
# namespace, private propagation), as on a real node: srun's PMIx server keeps per-step
# folders in /tmp whose names would collide between the nodes otherwise. The kept folders
# are bound again at their own paths inside that /tmp, so every node sees the same trees.
in_node() {
    local n=$1
    shift
    mkdir -p "$DIR/tmp/$n" "$DIR/held/$n"
    chmod 1777 "$DIR/tmp/$n"
    in_net "$n" unshare --uts --mount --propagation private sh -c '
        hostname "$0" || exit 1
        tmp=$1 held=$2 keep=$3
        shift 3
        i=0
        for k in $keep; do
            mkdir -p "$held/$i" && mount --bind "$k" "$held/$i" || exit 1
            i=$((i + 1))
        done
        mount --bind "$tmp" /tmp || exit 1
        i=0
        for k in $keep; do
            mkdir -p "$k" && mount --bind "$held/$i" "$k" || exit 1
            i=$((i + 1))
        done
        exec "$@"' "$n" "$DIR/tmp/$n" "$DIR/held/$n" "$(keep_under_tmp)" "$@"
}

start_daemons() {
    mkdir -p "$DIR"/{munge,ctld,run,log} "${NODES[@]/#/$DIR/spool/}"
    chmod 711 "$DIR/munge"
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.sock" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/seed" || die "munged did not start ($DIR/log/munged.log)"
    in_node n1 slurmctld -D -i -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 &
    echo $! >"$DIR/run/slurmctld.bg"
    local n
    for n in "${NODES[@]}"; do
        in_node "$n" slurmd -D -N "$n" -f "$CONF" >>"$DIR/log/slurmd-$n.out" 2>&1 &
        echo $! >"$DIR/run/slurmd-$n.bg"
    done
}

# Polls sinfo until every node is idle, at most UP_TIMEOUT_S seconds.
wait_idle() {
    local deadline=$(($(date +%s) + UP_TIMEOUT_S)) states f dead=
    while :; do
        states=$(client sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
        [ "$(printf '%s\n' "$states" | grep -c ' idle$')" = "${#NODES[@]}" ] && return 0
        for f in "$DIR"/run/*.bg; do
            kill -0 "$(cat "$f")" 2>/dev/null || { dead=$(basename "$f" .bg); break; }
        done
        if [ -n "$dead" ] || [ "$(date +%s)" -ge "$deadline" ]; then
            echo "cluster: nodes not idle (${dead:+$dead exited; }${states:-no answer from slurmctld}) after $(($(date +%s) + UP_TIMEOUT_S - deadline)) s" >&2
            tail -n 20 "$DIR"/log/*.log >&2
            return 1
        fi
        sleep 0.5 # polling sinfo, bounded by the deadline above
    done
}

client() { SLURM_CONF=$CONF in_net n1 "$@"; }

kill_pidfile() {
    local f=$1 p
    [ -f "$f" ] || return 0
    p=$(cat "$f")
    [ -n "$p" ] && kill "$p" 2>/dev/null
    rm -f "$f"
}

down() {
    [ -f "$CONF" ] && client scancel --full --quiet --user=root 2>/dev/null
    local n f p
    for f in "$DIR"/run/slurmd-*.bg "$DIR/run/slurmctld.bg" "$DIR/run/munged.pid"; do
        kill_pidfile "$f"
    done
    # what is left in the namespaces (slurmstepd, job tasks) was started by this cluster
    for n in "${NODES[@]}" probe; do
        for p in $(ip netns pids "$(ns "$n")" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$(ns "$n")" 2>/dev/null
        ip link del "fgsl-h$n" 2>/dev/null
    done
    ip link del "$BRIDGE" 2>/dev/null
    return 0
}

up() {
    mkdir -p "$(dirname "$DIR")"
    preflight
    down
    rm -rf "$DIR"
    mkdir -p "$DIR"
    trap 'echo "cluster: bring-up failed, tearing down" >&2; down' EXIT
    make_network
    write_conf
    start_daemons
    wait_idle || exit 1
    trap - EXIT
    echo "cluster: up: ${NODES[*]} idle ($(for n in "${NODES[@]}"; do printf '%s=%s ' "$n" "$(node_ip "$n")"; done)); SLURM_CONF=$CONF"
}

# shape on|off: egress of every node's eth0 at RATE (tbf), delayed by DELAY (netem) when the
# kernel has sch_netem; prints what it set. Exit 1 when tbf is refused.
RATE=${FULGUR_CLUSTER_RATE:-1gbit}
DELAY=${FULGUR_CLUSTER_DELAY:-1ms}
shape() {
    local n netem=yes
    for n in "${NODES[@]}"; do
        in_net "$n" tc qdisc del dev eth0 root 2>/dev/null
    done
    [ "$1" = on ] || return 0
    for n in "${NODES[@]}"; do
        if [ "$netem" = yes ] && in_net "$n" tc qdisc add dev eth0 root handle 1: netem delay "$DELAY" 2>/dev/null; then
            in_net "$n" tc qdisc add dev eth0 parent 1: handle 2: tbf rate "$RATE" burst 256kb latency 50ms || return 1
        else
            netem=no
            in_net "$n" tc qdisc add dev eth0 root tbf rate "$RATE" burst 256kb latency 50ms || return 1
        fi
    done
    if [ "$netem" = yes ]; then
        echo "cluster: eth0 of ${NODES[*]}: $RATE (tbf), $DELAY each way (netem)"
    else
        echo "cluster: eth0 of ${NODES[*]}: $RATE (tbf); no delay: this kernel has no sch_netem (tc: 'Specified qdisc kind is unknown')"
    fi
}

cmd=${1:-}
shift || true
case $cmd in
up) up ;;
down) down ;;
run) client "$@" ;;
node)
    n=${1:?usage: cluster.sh node N CMD...}
    shift
    in_net "$n" "$@"
    ;;
shape) shape "${1:?usage: cluster.sh shape on|off}" ;;
status) client sinfo -N ;;
*) die "usage: cluster.sh up|down|run CMD...|node N CMD...|shape on|off|status" ;;
esac
