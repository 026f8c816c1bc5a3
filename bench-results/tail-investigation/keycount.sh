#!/bin/bash
# keycount.sh BIN: server CPU per request (utime+stime from /proc over the
# requests) of INCR and RL.FIXED on limitkv and INCR on redis-server, at
# depth 16, with the keys drawn from 1,000 (every record in cache) and from
# 100,000 (as the tail benchmark draws them), interleaved, 3 rounds.
# RL.FIXED's limit is high enough that nothing is denied.
set -e
BIN=${1:?limitkv binary}
"$BIN" --port 7431 --persistence no >/dev/null 2>&1 & LK=$!
redis-server --port 7432 --save '' --appendonly no >/dev/null 2>&1 & RS=$!
trap 'kill $LK $RS' EXIT
sleep 1
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
run() { # port pid keys command...
	local port=$1 pid=$2 keys=$3; shift 3
	local a b
	a=$(cpu $pid)
	redis-benchmark -p $port -c 50 -r $keys -n 1000000 -P 16 -q "$@" >/dev/null
	b=$(cpu $pid)
	echo "($b - $a) * 10000 / 1000000" | bc -l | cut -c1-5
}
echo "round,keys,server,command,cpu_us_per_req"
for r in 1 2 3; do
	for keys in 1000 100000; do
		echo "$r,$keys,limitkv,INCR,$(run 7431 $LK $keys INCR counter:__rand_int__)"
		echo "$r,$keys,redis,INCR,$(run 7432 $RS $keys INCR counter:__rand_int__)"
		echo "$r,$keys,limitkv,RL.FIXED,$(run 7431 $LK $keys RL.FIXED fixed:__rand_int__ 1000000 60s)"
	done
done
