#!/usr/bin/env bash
# steady-control.sh BUILD [ROUNDS] — what the steady and held-xmin
# workloads' stalls are: issue 21's control run.
#
# Issue 21 asks, in `make bench`'s steady and held-xmin workloads (2
# producers committing 100 events per INSERT at 80 % of a lone relay's
# drain rate, 60 s; held xmin with a snapshot held for those 60 s, then 20
# s more), for every 5-second window's p99 from commit to delivery under
# 50 ms, with the producers' throughput no worse.  On one throwaway
# PostgreSQL with make bench's settings, this measures the drain rate as
# make bench does (1 relay, ordered, 100,000 events, 3 times, the last),
# offers 80 % of it (STEADY_RATE=N offers N instead), and runs each
# workload with two relays in turn each round, each run on a fresh copy
# of a migrated database (a shared host weighs on each alike):
#
#   relay        `pgoutbox relay --sink stdout --batch 1000 --in-flight 2`:
#                make bench's workload as it is
#   relay-first  the same relay under bench/relay-first.sh: its process
#                and its PostgreSQL sessions served first by the CPU
#                scheduler (SCHED_FIFO; needs root), so that it never
#                waits in the run queue behind the producers
#
# The end prints, per workload and relay, the worst 5-s window p99 of each
# round, the producers' achieved rate, and the medians.
# STEADY_SECONDS=S runs S seconds instead of 60.  CONTROL_JSON=FILE keeps
# every figure (JSON lines).
#   bench/steady-control.sh build 3      (about 18 minutes)
set -euo pipefail
case ${1:-} in -h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
esac
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/steady-control.sh BUILD_DIR [ROUNDS]}
ROUNDS=${2:-3}
SECS=${STEADY_SECONDS:-60}
for n in "$ROUNDS" "$SECS" ${STEADY_RATE:+"$STEADY_RATE"}; do
	case $n in '' | *[!0-9]* | 0)
		echo "steady-control.sh: ROUNDS, STEADY_SECONDS and STEADY_RATE are positive whole numbers" >&2
		exit 2
		;;
	esac
done
. bench/control-lib.sh
control_build steady-control.sh "$BUILD"
if ! chrt -f 10 true 2>/dev/null; then
	echo "steady-control.sh: relay-first needs SCHED_FIFO (chrt -f: root or CAP_SYS_NICE)" >&2
	exit 2
fi
control_pg steady
ADMIN=$(pg_url postgres)
psql -XAtq "$ADMIN" -c "CREATE DATABASE tmpl" >/dev/null
"$PGO" migrate --db "$(pg_url tmpl)" >"$TMP/migrate.log" 2>&1 || {
	cat "$TMP/migrate.log" >&2
	exit 1
}
RELAY="$PGO relay --sink stdout --batch 1000 --in-flight 2"
fresh() {
	psql -XAtq "$ADMIN" -c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS run" \
		-c "CREATE DATABASE run TEMPLATE tmpl" >/dev/null
}
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
RATE=${STEADY_RATE:-}
if [ -z "$RATE" ]; then
	fresh
	"$BENCH" drain --events 100000 --relays 1 --repeat 3 --timeout 60 \
		--relay-cmd "$RELAY" --db "$(pg_url run)" --json "$TMP/drain.jsonl" \
		--run-id control >"$TMP/out" 2>&1 || {
		cat "$TMP/out" >&2
		exit 1
	}
	RATE=$(python3 -c '
import json, sys
v = [json.loads(l)["value"] for l in open(sys.argv[1])
     if json.loads(l)["metric"] == "events_per_s"]
print(int(round(0.8 * v[-1], -2)))' "$TMP/drain.jsonl")
	echo "drain of a lone relay: $(grep -o '[0-9]* events/s' "$TMP/out" | tail -1); offering 80 %: $RATE/s"
fi
# "label|relay command"
V=(
	"relay|$RELAY"
	"relay-first|bash $ROOT/bench/relay-first.sh $RELAY"
)
: >"$TMP/all.jsonl"
for r in $(seq "$ROUNDS"); do
	for w in steady held; do
		for v in "${V[@]}"; do
			IFS='|' read -r label cmd <<<"$v"
			hold=()
			[ $w = held ] && hold=(--hold-xmin --after 20)
			fresh
			: >"$TMP/one.jsonl"
			"$BENCH" latency --rate "$RATE" --seconds "$SECS" "${hold[@]}" \
				--producers 2 --per-tx 100 --insert --window 5 \
				--warmup 1 --grace 60 --relay-cmd "$cmd" \
				--db "$(pg_url run)" --json "$TMP/one.jsonl" \
				--run-id control --label "$label" \
				--relay-log "$TMP/relay.log" >"$TMP/out" 2>"$TMP/err" || {
				cat "$TMP/out" "$TMP/err" "$TMP/relay.log" >&2
				exit 1
			}
			python3 "$ROOT/bench/control-row.py" "$TMP/one.jsonl" "$w" \
				"$label" "$r" "$RATE" >>"$TMP/all.jsonl"
		done
	done
done
cp "$TMP/all.jsonl" "${CONTROL_JSON:-/dev/null}"
python3 "$ROOT/bench/control-row.py" --summary "$TMP/all.jsonl"
