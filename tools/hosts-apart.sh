#!/usr/bin/env bash
# Hosts that are really apart, on one machine (issue 46, item 2): HOSTS network namespaces,
# each joined by a veth pair to a bridge in a namespace of its own (the switch), with
# addresses 10.251.0.1, .2, ... that exist in those namespaces only. COMMAND runs with
# $HOSTS_MPIRUN: an mpirun (itself in the first host's namespace) that starts one process per
# host in turn (--map-by node), each inside its host's namespace (an rsh agent that enters it),
# and moves data over TCP on the veths alone: shared memory (vader) off, the out-of-band
# channel on the veths too. The daemons start one at a time: in about 60 starts with two at
# once, three times one orted never called back and mpirun waited forever (not diagnosed).
# $HOSTS_NAMES lists the namespaces, $HOSTS_DIR is a scratch directory. Everything made is
# removed when this script ends, however COMMAND ended (processes left in the namespaces, such
# as Open MPI's daemons, are killed by id); what a killed run of it left (namespaces named
# after a process that is gone) goes first.
# Usage: tools/hosts-apart.sh [-n HOSTS] [-m] -- COMMAND...
#   -n HOSTS  namespaces (2 to 16, default 2); -m  COMMAND is the arguments of that mpirun
#   ("-m -- -np 2 strata-train ..."), so the script is a launcher prefix.
# Exit: COMMAND's status; 77 when namespaces cannot be made here (not root, no ip, no veth,
# no bridge), with the reason on stderr; 2 on a usage error.
set -uo pipefail
hosts=2 asargs=0
while getopts n:m o; do
        case $o in
        n) hosts=$OPTARG ;;
        m) asargs=1 ;;
        *) echo "usage: $0 [-n HOSTS] [-m] -- COMMAND..." >&2; exit 2 ;;
        esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
if [ $# = 0 ] || ! [[ $hosts =~ ^[0-9]+$ ]] || [ "$hosts" -lt 2 ] || [ "$hosts" -gt 16 ]; then
        echo "usage: $0 [-n HOSTS (2-16)] [-m] -- COMMAND..." >&2
        exit 2
fi
skip() { echo "hosts-apart: cannot make network namespaces here: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v mpirun >/dev/null || skip "no mpirun"

tag=strata-$$
sw=$tag-sw
names=()
for i in $(seq 0 $((hosts - 1))); do names+=("$tag-h$i"); done

# Whether process $1 is a run of this script (not a zombie, not another program on its id).
alive() {
        [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null &&
                tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -q hosts-apart
}

# The processes in namespace $1 killed, by id, and awaited (up to 5 s each) until each is gone
# or a zombie: a SIGKILL is sent, not finished, and whoever looks next (the retry, a test's
# pgrep) must not find a dying rank.
kill_ns() {
        local pid pids

        pids=$(ip netns pids "$1" 2>/dev/null)
        for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
        for pid in $pids; do
                for _ in $(seq 1 50); do
                        tr -d '\0' < "/proc/$pid/cmdline" 2>/dev/null | grep -q . || break
                        sleep 0.1
                done
        done
}

# A namespace is gone only when no process is left in it: those of ours (daemons of Open
# MPI's, a stopped rank) are killed first.
clear_ns() {
        kill_ns "$1"
        ip netns del "$1" 2>/dev/null
}

# Namespaces of runs whose script is gone (killed before its trap ran), then this run's.
pattern='^strata-[0-9]+-(sw|h[0-9]+)$'
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "$pattern"); do
        pid=${ns#strata-}; pid=${pid%%-*}
        alive "$pid" || clear_ns "$ns"
done
# Their folders too (strata-hosts-PID-*: a killed run's trap did not remove its own).
for old in /tmp/strata-hosts-[0-9]*-??????; do
        [ -d "$old" ] || continue
        pid=${old#/tmp/strata-hosts-}; pid=${pid%%-*}
        alive "$pid" || rm -rf "$old"
done
dir=$(mktemp -d "/tmp/strata-hosts-$$-XXXXXX")
cleanup() {
        for ns in "${names[@]}" "$sw"; do clear_ns "$ns"; done
        rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

ip netns add "$sw" 2>/dev/null || skip "ip netns add failed"
ip -n "$sw" link add br0 type bridge 2>/dev/null || skip "no bridge"
ip -n "$sw" link set br0 up
for i in "${!names[@]}"; do
        h=${names[$i]}
        ip netns add "$h" || skip "ip netns add failed"
        ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$h" 2>/dev/null ||
                skip "no veth"
        ip -n "$sw" link set "p$i" master br0 up
        ip -n "$h" addr add "10.251.0.$((i + 1))/24" dev eth0
        ip -n "$h" link set lo up
        ip -n "$h" link set eth0 up
done
# Every link up before COMMAND starts (the bridge forwards at once: no STP).
for i in "${!names[@]}"; do
        for t in $(seq 1 50); do
                ip -n "${names[$i]}" link show eth0 | grep -q 'state UP' &&
                        ip -n "$sw" link show "p$i" | grep -q 'state UP' && break
                sleep 0.1
        done
done

# Open MPI's rsh agent: "agent HOST COMMAND..." runs COMMAND (a shell line, as ssh would)
# inside HOST's namespace.
cat > "$dir/agent" <<'EOF'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
EOF
chmod +x "$dir/agent"
for h in "${names[@]}"; do echo "$h slots=64"; done > "$dir/hostfile"

export HOSTS_DIR=$dir
export HOSTS_NAMES="${names[*]}"
export HOSTS_MPIRUN="ip netns exec ${names[0]} mpirun --allow-run-as-root --oversubscribe \
--bind-to none --map-by node --hostfile $dir/hostfile --mca plm_rsh_agent $dir/agent \
--mca plm_rsh_no_tree_spawn 1 --mca plm_rsh_num_concurrent 1 --mca pml ob1 --mca btl tcp,self \
--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0"
# -m: mpirun ends within HOSTS_LIMIT seconds (default 600) or it is killed with everything it
# left in the namespaces; one that was killed so starts once more, since the start itself can
# hang (above): a second try gives the same bits, as every run does.
if [ $asargs = 1 ]; then
        for try in 1 2; do
                # shellcheck disable=SC2086
                timeout -k 10 "${HOSTS_LIMIT:-600}" $HOSTS_MPIRUN "$@"
                rc=$?
                [ $rc = 124 ] && [ $try = 1 ] || exit $rc
                echo "hosts-apart: mpirun did not end in ${HOSTS_LIMIT:-600} s; its processes" \
                     "are killed and it starts once more" >&2
                for h in "${names[@]}"; do kill_ns "$h"; done
        done
else
        "$@"
fi
