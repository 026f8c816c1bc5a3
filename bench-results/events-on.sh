#!/bin/bash
# events-on.sh: what keyspace notifications cost with a subscriber, on
# limitkv and on redis-server side by side: SET at depth 16 (50 clients,
# 100,000 keys) with notify-keyspace-events off, then "KEA" with one
# redis-cli PSUBSCRIBE '__key*__:*' reading every event; the server's CPU
# per request (utime+stime from /proc over total_commands_processed).
set -e
cd "$(dirname "$0")/.."
go build -o /tmp/limitkv-ev ./cmd/limitkv
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
served() { redis-cli -p $1 info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
measure() { # pid port
	redis-benchmark -p $2 -c 50 -r 100000 -n 200000 -P 16 -q SET key:__rand_int__ v >/dev/null 2>&1
	local c0=$(cpu $1) n0=$(served $2)
	redis-benchmark -p $2 -c 50 -r 100000 -n 1000000 -P 16 -q SET key:__rand_int__ v >/dev/null 2>&1
	local c1=$(cpu $1) n1=$(served $2)
	awk -v c=$((c1 - c0)) -v n=$((n1 - n0)) -v t=$ticks 'BEGIN { printf "%.3f", c / t * 1e6 / n }'
}
echo "server round off_us KEA_us"
for r in 1 2 3; do
	for s in limitkv redis; do
		if [ $s = limitkv ]; then
			/tmp/limitkv-ev --port 7461 --persistence no >/dev/null 2>&1 & pid=$!
		else
			redis-server --port 7461 --save '' --appendonly no >/dev/null 2>&1 & pid=$!
		fi
		for i in $(seq 50); do redis-cli -p 7461 ping >/dev/null 2>&1 && break; sleep 0.1; done
		off=$(measure $pid 7461)
		redis-cli -p 7461 config set notify-keyspace-events KEA >/dev/null
		redis-cli -p 7461 psubscribe '__key*__:*' >/dev/null & sub=$!
		sleep 0.3
		on=$(measure $pid 7461)
		kill $sub $pid; wait $pid 2>/dev/null || true
		echo "$s $r $off $on"
	done
done
