#!/bin/bash
# events-overhead.sh: what keyspace notifications and client-side caching
# cost a request while nobody uses them. Builds limitkv at BASE (before
# either existed) and at HEAD, runs redis-benchmark against each in turn
# (GET, SET, INCR at depth 16, 50 clients, 100,000 keys), and prints the
# server's CPU per request: utime+stime from /proc over the requests
# served meanwhile (INFO's total_commands_processed). Rounds alternate
# between the two builds, so that the machine's load falls on both.
set -e
cd "$(dirname "$0")/.."
BASE=${BASE:-3d69600}
ROUNDS=${ROUNDS:-5}
rm -rf /tmp/eo-base && git worktree add -f -q /tmp/eo-base "$BASE"
(cd /tmp/eo-base && go build -o /tmp/limitkv-base ./cmd/limitkv)
git worktree remove --force /tmp/eo-base
go build -o /tmp/limitkv-head ./cmd/limitkv
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
served() { redis-cli -p $1 info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
one() { # binary port workload...
	local bin=$1 port=$2; shift 2
	$bin --port $port --persistence no >/dev/null 2>&1 & local pid=$!
	for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
	redis-benchmark -p $port -c 50 -r 100000 -n 300000 -P 16 -q "$@" >/dev/null 2>&1 # warm up
	local c0=$(cpu $pid) n0=$(served $port)
	redis-benchmark -p $port -c 50 -r 100000 -n 2000000 -P 16 -q "$@" >/dev/null 2>&1
	local c1=$(cpu $pid) n1=$(served $port)
	kill $pid; wait $pid 2>/dev/null || true
	awk -v c=$((c1 - c0)) -v n=$((n1 - n0)) -v t=$ticks 'BEGIN { printf "%.3f", c / t * 1e6 / n }'
}
echo "workload round base_us head_us"
for r in $(seq $ROUNDS); do
	for w in "GET key:__rand_int__" "SET key:__rand_int__ v" "INCR key:__rand_int__"; do
		b=$(one /tmp/limitkv-base 7451 $w)
		h=$(one /tmp/limitkv-head 7452 $w)
		echo "${w%% *} $r $b $h"
	done
done
