#!/usr/bin/env bash
# A primary, two replicas and three Sentinels on this machine, on loopback:
#
#   examples/ha/run.sh [dir]
#
# Config files, data and logs go to dir (default: a new temporary directory,
# removed at the end). A dir used before is reused as it was left: the
# servers and Sentinels rewrite their config files as the topology changes,
# so a restart continues where the last run stopped. Ctrl-C stops
# everything, by pid.
#
# Environment:
#   LIMITKV   limitkv binary (default: go build ./cmd/limitkv into dir)
#   SENTINEL  redis-sentinel binary (default: redis-sentinel from PATH,
#             Debian's redis-sentinel package)
#   PORT      the primary's port (default 6380); the replicas take the two
#             next ones, the Sentinels PORT+20000 and the two next ones
set -euo pipefail

port=${PORT:-6380}
sentinel_port=$((port + 20000))
sentinel_bin=${SENTINEL:-redis-sentinel}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

for tool in "$sentinel_bin" redis-cli; do
	if ! command -v "$tool" >/dev/null; then
		echo "run.sh: $tool not found (Debian: apt-get install redis-sentinel redis-tools)" >&2
		exit 1
	fi
done

made_dir=
if [ $# -ge 1 ]; then
	dir=$1
	mkdir -p "$dir"
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/limitkv-ha.XXXXXX")
	made_dir=1
fi
dir=$(cd "$dir" && pwd)

pids=()
names=()
stop() {
	trap - INT TERM EXIT
	echo
	for i in "${!pids[@]}"; do
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			echo "stopping ${names[$i]} (pid ${pids[$i]})"
			kill "${pids[$i]}" 2>/dev/null || true
		fi
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$made_dir" ]; then
		rm -rf "$dir"
	else
		echo "configs, data and logs are in $dir"
	fi
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

# Every child gets a process group of its own: Ctrl-C reaches this script
# only, which stops the children itself (a limitkv that got SIGINT from
# the terminal and then SIGTERM from here would skip its final snapshot).
set -m

lkv=${LIMITKV:-}
if [ -z "$lkv" ]; then
	echo "building limitkv..."
	(cd "$root" && go build -o "$dir/limitkv" ./cmd/limitkv)
	lkv=$dir/limitkv
fi

wait_ping() { # port name
	for _ in $(seq 100); do
		if [ "$(redis-cli -p "$1" PING 2>/dev/null)" = PONG ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "run.sh: $2 on port $1 does not answer; see its log in $dir" >&2
	exit 1
}

start_limitkv() { # name port [replicaof-port]
	local name=$1 p=$2 conf=$dir/$1.conf
	if [ ! -e "$conf" ]; then
		mkdir -p "$dir/$name"
		{
			echo "bind 127.0.0.1"
			echo "port $p"
			echo "dir $dir/$name"
			echo "logfile $dir/$name.log"
			if [ $# -ge 3 ]; then
				echo "replicaof 127.0.0.1 $3"
			fi
		} >"$conf"
	fi
	"$lkv" --config "$conf" &
	pids+=($!)
	names+=("$name")
	wait_ping "$p" "$name"
}

start_sentinel() { # name port
	local name=$1 p=$2 conf=$dir/$1.conf
	if [ ! -e "$conf" ]; then
		mkdir -p "$dir/$name"
		cat >"$conf" <<-EOF
			bind 127.0.0.1
			port $p
			daemonize no
			dir $dir/$name
			logfile $dir/$name.log
			sentinel monitor mymaster 127.0.0.1 $port 2
			sentinel down-after-milliseconds mymaster 5000
			sentinel failover-timeout mymaster 60000
			sentinel parallel-syncs mymaster 1
		EOF
	fi
	"$sentinel_bin" "$conf" &
	pids+=($!)
	names+=("$name")
	wait_ping "$p" "$name"
}

start_limitkv primary "$port"
start_limitkv replica1 $((port + 1)) "$port"
start_limitkv replica2 $((port + 2)) "$port"
start_sentinel sentinel1 "$sentinel_port"
start_sentinel sentinel2 $((sentinel_port + 1))
start_sentinel sentinel3 $((sentinel_port + 2))

# Ready once a Sentinel knows the replicas and the other Sentinels.
for _ in $(seq 300); do
	replicas=$(redis-cli -p "$sentinel_port" SENTINEL REPLICAS mymaster 2>/dev/null | grep -c '^name$' || true)
	others=$(redis-cli -p "$sentinel_port" SENTINEL SENTINELS mymaster 2>/dev/null | grep -c '^name$' || true)
	if [ "$replicas" -ge 2 ] && [ "$others" -ge 2 ]; then
		break
	fi
	sleep 0.1
done
if [ "$replicas" -lt 2 ] || [ "$others" -lt 2 ]; then
	echo "run.sh: after 30 s the first Sentinel knows $replicas replica(s) and $others other Sentinel(s); see the logs in $dir" >&2
fi
master=$(redis-cli -p "$sentinel_port" SENTINEL GET-MASTER-ADDR-BY-NAME mymaster | paste -sd: -)

cat <<EOF

limitkv with Sentinel, on loopback (configs, data and logs in $dir):

  limitkv    127.0.0.1:$port, 127.0.0.1:$((port + 1)), 127.0.0.1:$((port + 2)); the master is now $master
  sentinels  127.0.0.1:$sentinel_port, 127.0.0.1:$((sentinel_port + 1)), 127.0.0.1:$((sentinel_port + 2)), watching "mymaster"

  redis-cli -p $sentinel_port SENTINEL GET-MASTER-ADDR-BY-NAME mymaster
  redis-cli -p $sentinel_port SENTINEL REPLICAS mymaster
  redis-cli -p ${master##*:} RL.FIXED rl:demo 10 1m

A client connects through the Sentinels with master name "mymaster" (see
the README's "High availability"). To see a failover, kill the master
(kill -9 <pid>, pids below) or run
  redis-cli -p $sentinel_port SENTINEL FAILOVER mymaster

EOF
for i in "${!pids[@]}"; do
	printf '  %-10s pid %s\n' "${names[$i]}" "${pids[$i]}"
done
echo
echo "Ctrl-C stops everything."

# Wait until Ctrl-C; a server that exits (killed to try a failover) is
# reported and the others go on.
while true; do
	set +e
	wait -n
	status=$?
	set -e
	for i in "${!pids[@]}"; do
		if [ -n "${pids[$i]}" ] && ! kill -0 "${pids[$i]}" 2>/dev/null; then
			echo "${names[$i]} (pid ${pids[$i]}) exited with status $status"
			unset 'pids[i]' 'names[i]'
		fi
	done
	if [ ${#pids[@]} -eq 0 ]; then
		exit 0
	fi
done
