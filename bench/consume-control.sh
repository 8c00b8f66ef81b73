#!/usr/bin/env bash
# consume-control.sh BUILD [ROUNDS] — what taking the rows out costs the
# producers on this host, whoever takes them: issue 17's control run.
#
# Issue 17 asks send() from 1 and 8 clients, with a relay listening and
# draining meanwhile, for 0.80 of a plain one-row INSERT's rate with
# nobody draining.  The least consumer is bench/control-consumer.sh
# (pgbench deleting what was committed since its last statement, by the
# primary key, with synchronous_commit off; nothing else).  On one
# throwaway PostgreSQL with make bench's settings (fsync and
# synchronous_commit on), for 1 and 8 clients, 10 s each after a 1 s
# warm-up, in turn each round (a shared host weighs on each alike):
#
#   insert          the limit: plain one-row INSERT into bench_plain
#   insert+poll     the same while the least consumer runs every 100 ms
#   insert+busy     the same, every 1 ms: a consumer that keeps up within
#                   a millisecond or two, as a listening relay must
#   send            pgoutbox.send()
#   send+busy       send() while the least consumer empties the outbox
#                   every 1 ms: what any relay would cost at the least
#   send+relay      send() while `pgoutbox relay --sink stdout` listens
#                   (make bench's "relay listening")
#
# The end prints each one's median and its ratio to the median of
# `insert` with as many clients.  CONTROL_JSON=FILE keeps every figure.
#   bench/consume-control.sh build 3      (about 8 minutes)
set -euo pipefail
case ${1:-} in -h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
esac
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/consume-control.sh BUILD_DIR [ROUNDS]}
ROUNDS=${2:-3}
case $ROUNDS in '' | *[!0-9]* | 0)
	echo "consume-control.sh: ROUNDS must be a positive number" >&2
	exit 2
	;;
esac
. bench/control-lib.sh
control_build consume-control.sh "$BUILD"
control_pg control
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >"$TMP/migrate.log" 2>&1 || {
	cat "$TMP/migrate.log" >&2
	exit 1
}
# pgoutbox-bench's own plain table (created if missing; emptied by it).
psql -XAtq "$URL" -c "CREATE TABLE bench_plain (id bigserial PRIMARY KEY, payload jsonb)" >/dev/null
CONSUMER="bash $ROOT/bench/control-consumer.sh"
# "label|clients|arguments of pgoutbox-bench enqueue"
V=()
for clients in 1 8; do
	V+=(
		"insert|$clients|--mode insert"
		"insert+poll|$clients|--mode insert --relay-cmd '$CONSUMER 100'"
		"insert+busy|$clients|--mode insert --relay-cmd '$CONSUMER 1'"
		"send|$clients|--mode send"
		"send+busy|$clients|--mode send --relay-cmd '$CONSUMER 1 pgoutbox.outbox'"
		"send+relay|$clients|--mode send --relay-cmd '$PGO relay --sink stdout'"
	)
done
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$TMP/all.jsonl"
for r in $(seq "$ROUNDS"); do
	for v in "${V[@]}"; do
		IFS='|' read -r label clients args <<<"$v"
		: >"$TMP/consumer.log"
		eval "\"\$BENCH\" enqueue $args --clients $clients --seconds 10 --warmup 1 --db \"\$URL\" --json \"\$TMP/one.jsonl\" --run-id control --relay-log \"\$TMP/consumer.log\" --label \"$label\"" >"$TMP/out" 2>"$TMP/err" || {
			cat "$TMP/out" "$TMP/err" "$TMP/consumer.log" >&2
			exit 1
		}
		# What the consumer left behind: a consumer that kept up left
		# little (the least one skips rows committed out of id order).
		left=$(psql -XAtq "$URL" -c "SELECT (SELECT count(*) FROM pgoutbox.outbox) + (SELECT count(*) FROM bench_plain)")
		python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["metric"] == "events_per_s":
        r["label"] = sys.argv[2]; r["clients"] = int(sys.argv[3])
        print(json.dumps(r))
        print("round %s, %s clients, %-12s %8.0f events/s, %s rows left"
              % (sys.argv[4], sys.argv[3], sys.argv[2], r["value"],
                 sys.argv[5]), file=sys.stderr)
' "$TMP/one.jsonl" "$label" "$clients" "$r" "$left" >>"$TMP/all.jsonl"
		: >"$TMP/one.jsonl"
		# Empty the outbox and the plain table between variants.
		psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox, bench_plain" >/dev/null
	done
done
cp "$TMP/all.jsonl" "${CONTROL_JSON:-/dev/null}"
python3 - "$TMP/all.jsonl" <<'PY'
import json, sys, statistics
v = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    v.setdefault((r["clients"], r["label"]), []).append(r["value"])
print("| clients | producer | events/s (median) | runs | ratio to `insert` |")
print("|---:|---|---:|---|---:|")
for (clients, label), xs in v.items():
    lim = statistics.median(v[(clients, "insert")])
    m = statistics.median(xs)
    runs = ", ".join(f"{x:,.0f}" for x in xs)
    print(f"| {clients} | {label} | {m:,.0f} | {runs} | {m / lim:.2f} |")
PY
