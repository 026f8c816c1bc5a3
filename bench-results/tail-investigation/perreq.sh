#!/bin/bash
# perreq.sh: where a request's CPU goes on the server, INCR against RL.FIXED
# and RL.SLIDE at depth 16 over 100,000 keys. It builds limitkv with the
# pprof endpoint, takes a 4 s CPU profile of each workload under
# redis-benchmark and divides each function's time (with what it calls)
# by the requests served meanwhile (INFO's total_commands_processed).
set -e
cd "$(dirname "$0")/../.."
go build -tags pprof -o /tmp/limitkv-pprof ./cmd/limitkv
LIMITKV_PPROF=127.0.0.1:7439 /tmp/limitkv-pprof --port 7438 --persistence no >/dev/null 2>&1 & LK=$!
trap 'kill $LK; pkill -f "redis-benchmark -p 7438" || true' EXIT
sleep 1
served() { redis-cli -p 7438 info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
fns='loop\).run$|parser\).next$|sendAll$|Server\).request$|runLocked$|cmdIncr$|rlFixedCmd$|rlSlideCmd$|\(\*Shard\).(IncrBy|Fixed|Slide)$|findLive$|\(\*Ctx\).decided$'
for w in "INCR counter:__rand_int__" "RL.FIXED fixed:__rand_int__ 100 60s" "RL.SLIDE slide:__rand_int__ 100 60s"; do
	redis-benchmark -p 7438 -c 50 -r 100000 -n 50000000 -P 16 -q $w >/dev/null 2>&1 &
	sleep 2
	a=$(served)
	curl -s -o /tmp/perreq.prof "http://127.0.0.1:7439/debug/pprof/profile?seconds=4"
	b=$(served)
	pkill -f "redis-benchmark -p 7438" || true
	echo "## ${w%% *}: $((b - a)) requests in the profile"
	go tool pprof -top -cum -nodecount 400 /tmp/limitkv-pprof /tmp/perreq.prof 2>/dev/null |
		awk -v n=$((b - a)) 'NR > 6 { v = $4; u = 1e9; if (v ~ /ms$/) u = 1e6; else if (v ~ /us$/) u = 1e3; gsub(/[a-z]+$/, "", v); printf "%6.0f ns  %s\n", v * u / n, $6 }' |
		grep -E "$fns"
	sleep 1
done
