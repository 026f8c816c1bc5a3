#!/bin/bash
# streams-cpu.sh: server CPU per stream request, limitkv beside
# redis-server 7.0.15, under redis-benchmark at depth 16 (50 clients):
# XADD to one stream, XADD with MAXLEN ~ 1000 (the capped queue), and
# XRANGE of 10 entries. CPU is utime+stime from /proc over the requests
# served (total_commands_processed); rounds alternate between servers.
set -e
cd "$(dirname "$0")/.."
go build -o /tmp/limitkv-streams ./cmd/limitkv
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
served() { redis-cli -p $1 info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
one() { # server workload...
	local s=$1; shift
	if [ $s = limitkv ]; then
		/tmp/limitkv-streams --port 7471 --persistence no >/dev/null 2>&1 & pid=$!
	else
		redis-server --port 7471 --save '' --appendonly no >/dev/null 2>&1 & pid=$!
	fi
	for i in $(seq 50); do redis-cli -p 7471 ping >/dev/null 2>&1 && break; sleep 0.1; done
	redis-benchmark -p 7471 -c 50 -n 200000 -P 16 -q XADD s '*' f v >/dev/null 2>&1 # entries to read
	local c0=$(cpu $pid) n0=$(served 7471)
	redis-benchmark -p 7471 -c 50 -n 1000000 -P 16 -q "$@" >/dev/null 2>&1
	local c1=$(cpu $pid) n1=$(served 7471)
	kill $pid; wait $pid 2>/dev/null || true
	awk -v c=$((c1 - c0)) -v n=$((n1 - n0)) -v t=$ticks 'BEGIN { printf "%.3f", c / t * 1e6 / n }'
}
echo "workload round limitkv_us redis_us"
for r in 1 2 3; do
	for w in "XADD s * f v" "XADD q MAXLEN ~ 1000 * f v" "XRANGE s - + COUNT 10"; do
		set -f
		l=$(one limitkv $w)
		k=$(one redis $w)
		set +f
		echo "[$w] $r $l $k"
	done
done
