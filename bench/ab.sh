#!/usr/bin/env bash
# ab.sh BUILD_A BUILD_B [ROUNDS] — the same drain and latency workloads of
# `make bench` for two builds, interleaved A B A B ... on one PostgreSQL,
# (a database each) so that whatever else the host is doing weighs on
# both alike.  For
# "no regression" claims between two commits on a busy host: each round
# prints one line per build; the end prints the median of each metric.
#   bench/ab.sh /path/to/old/build build 3
# AB_ONLY=WORD runs the workloads whose label holds it; AB_WARM=1 drains
# with relays connected before the fill (--warm: their start is not timed);
# AB_BENCH=PATH runs that pgoutbox-bench for both (an old one lacks --warm
# and the work workload: a plain work queue, no controls, no groups);
# AB_STEADY_RATE=N offers N events/s in the steady workload (40,000).
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "${1:?usage: bench/ab.sh BUILD_A BUILD_B [ROUNDS]}")
B=$(realpath "${2:?usage: bench/ab.sh BUILD_A BUILD_B [ROUNDS]}")
ROUNDS=${3:-3}
. scripts/pg.sh
TMP=$(mktemp -d /tmp/pgoutbox-ab.XXXXXX)
chmod 755 "$TMP"
cleanup() { pg_stop; [ -n "${AB_KEEP:-}" ] || rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on \
	max_wal_size=4GB checkpoint_timeout=30min >/dev/null
# One database per build: each build migrates its own (an older build
# refuses a schema a newer one migrated).
for side in A B; do
	build=$A; [ $side = B ] && build=$B
	psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench_${side,,}" >/dev/null
	"$build/pgoutbox" migrate --db "$(pg_url "bench_${side,,}")" >/dev/null 2>&1
done
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
ONLY=${AB_ONLY:-}
W=(
	"drain-ordered|drain --events 100000 --relays 1 --repeat 1 --timeout 60 ${AB_WARM:+--warm} --relay-cmd '@PGO@ relay --sink stdout --batch 1000 --in-flight 2'"
	"drain-concurrent|drain --events 100000 --relays 1 --repeat 1 --timeout 60 ${AB_WARM:+--warm} --relay-cmd '@PGO@ relay --sink stdout --batch 1000 --in-flight 2 --mode concurrent'"
	"latency-500|latency --rate 500 --seconds 10 --warmup 1 --grace 5 --relay-cmd '@PGO@ relay --sink stdout'"
	"send-listening|enqueue --mode send --clients 1 --seconds 5 --warmup 1 --relay-cmd '@PGO@ relay --sink stdout'"
	"send8-listening|enqueue --mode send --clients 8 --seconds 5 --warmup 1 --relay-cmd '@PGO@ relay --sink stdout'"
	"latency-8p|latency --rate 40000 --producers 8 --seconds 10 --warmup 1 --grace 5 --relay-cmd '@PGO@ relay --sink stdout'"
	"work-plain|work --queue benchjobs --events 100000 --relays 1 --repeat 1 --timeout 60 --relay-cmd '@PGO@ worker --sql pgoutbox_bench_job --concurrency 2 --batch 100 --queue benchjobs'"
	"steady|latency --rate ${AB_STEADY_RATE:-40000} --producers 2 --per-tx 100 --insert --window 5 --seconds 30 --warmup 1 --grace 30 --relay-cmd '@PGO@ relay --sink stdout --batch 1000 --in-flight 2'"
)
: >"$TMP/all.jsonl"
for r in $(seq "$ROUNDS"); do
	for w in "${W[@]}"; do
		label=${w%%|*}
		[ -z "$ONLY" ] || [[ $label == *$ONLY* ]] || continue
		for side in A B; do
			build=$A; [ $side = B ] && build=$B
			args=${w#*|}; args=${args//@PGO@/$build/pgoutbox}
			json=$TMP/$side.jsonl
			URL=$(pg_url "bench_${side,,}")
			eval "\"${AB_BENCH:-$build/bench/pgoutbox-bench}\" $args --db \"\$URL\" --json \"\$TMP/one.jsonl\" --run-id ab --relay-log "$TMP/relay.log" --label \"$label\"" >/dev/null 2>"$TMP/err" ||
				{ cat "$TMP/err" >&2; exit 1; }
			python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); r["side"] = sys.argv[2]; r["label"] = sys.argv[3]; print(json.dumps(r))
' "$TMP/one.jsonl" "$side" "$label" >>"$TMP/all.jsonl"
			: >"$TMP/one.jsonl"
		done
		echo "round $r: $label done"
	done
done
cp "$TMP/all.jsonl" "${AB_JSON:-/dev/null}"
python3 - "$TMP/all.jsonl" <<'PY'
import json, sys, statistics
v = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["metric"] in ("events_per_s", "jobs_per_s", "rate_achieved", "p50_ms", "p99_ms", "p99_ms_worst_window"):
        v.setdefault((r["label"], r["metric"]), {}).setdefault(r["side"], []).append(r["value"])
print("| workload | metric | A (median) | B (median) | B/A |")
print("|---|---|---:|---:|---:|")
for (label, metric), s in v.items():
    a, b = statistics.median(s.get("A", [0])), statistics.median(s.get("B", [0]))
    print(f"| {label} | {metric} | {a:,.3f} | {b:,.3f} | {b / a if a else 0:.2f} |")
PY
