#!/usr/bin/env bash
# http.sh BUILD [--quick] — the HTTP webhook sink's figures beside the
# stdout sink's, from the same run: drains of 100,000 events into a local
# receiver (bench/http-receiver.c: libmicrohttpd, 204 for every request,
# TCP_NODELAY) with batch 1 and batch 100 on one relay, and the
# commit-to-2xx latency at 500 events/s (the receiver prints each event as
# it arrives).  Each drain also reports the relay's CPU per event
# (relay_cpu_us_per_event) and the receiver's: on a shared 2-core host they
# say more than the rate.
# PostgreSQL as in bench/run.sh: fsync and synchronous_commit on.
# Targets (issue 15): >= 20,000 events/s with batch 1, >= 100,000 with
# batch 100, p99 <= 5 ms at 500/s.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/http.sh BUILD_DIR [--quick]}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
QUICK=0; [ "${2:-}" = --quick ] && QUICK=1
PGO=$BUILD/pgoutbox
BENCH=$BUILD/bench/pgoutbox-bench
RECV=$BUILD/bench/http-receiver
for exe in "$PGO" "$BENCH" "$RECV"; do
	[ -x "$exe" ] || { echo "http.sh: $exe not built (ninja -C $BUILD; the receiver needs libmicrohttpd)" >&2; exit 2; }
done
TMP=$(mktemp -d /tmp/pgoutbox-hbench.XXXXXX)
chmod 755 "$TMP"
. scripts/pg.sh
. bench/cpu.sh
RECV_PID=
cleanup() { [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null; pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on max_wal_size=4GB checkpoint_timeout=30min
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >/dev/null
# The drains' receiver: its output is not needed.
"$RECV" "$TMP/port" >/dev/null &
RECV_PID=$!
for _ in $(seq 200); do [ -s "$TMP/port" ] && break; sleep 0.05; done
[ -s "$TMP/port" ] || { echo "http.sh: the receiver did not start" >&2; exit 1; }
H="http://127.0.0.1:$(cat "$TMP/port")/hook"

if [ $QUICK = 1 ]; then DRAIN=2000 LAT=2; else DRAIN=100000 LAT=20; fi
STDOUT="$PGO relay --sink stdout --batch 1000 --in-flight 2"
HTTP="$PGO relay --sink http --http-url $H --batch 1000 --in-flight 2"
JSON=$TMP/run.jsonl
: >"$JSON"
run() {
	local label=$1; shift
	echo "== $label"
	psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox" -c "CHECKPOINT" >/dev/null
	"$BENCH" "$@" --db "$URL" --json "$JSON" --label "$label" --relay-log "$TMP/relay.log" ||
		{ echo "   FAILED: $label" >&2; tail -n 5 "$TMP/relay.log" >&2; }
}
# A drain into the receiver, and what the receiver used for it.
run_recv() {
	local c0 c1
	c0=$(cpu_s "$RECV_PID")
	run "$@"
	c1=$(cpu_s "$RECV_PID")
	python3 -c 'import sys; c, n = float(sys.argv[2]) - float(sys.argv[1]), int(sys.argv[3]); print(f"   receiver CPU {c:.2f} s, {c * 1e6 / n:.1f} us/event")' "$c0" "$c1" "$DRAIN"
}
run "stdout: drain $DRAIN, 1 relay" drain --events $DRAIN --relays 1 --warm --timeout 180 --relay-cmd "$STDOUT"
for batch in 1 100; do
	run_recv "http: drain $DRAIN, 1 relay, batch $batch" drain --events $DRAIN --relays 1 --warm --timeout 180 \
		--relay-cmd "$HTTP --http-batch $batch"
done
run "http: relay RSS while draining $DRAIN (batch 100)" drain --events $DRAIN --relays 1 --rss --timeout 180 \
	--relay-cmd "$HTTP --http-batch 100"
run "stdout: latency 500/s" latency --rate 500 --seconds $LAT --warmup 1 --grace 5 --relay-cmd "$PGO relay --sink stdout"
# Latency: a receiver of its own whose lines go to pgoutbox-bench, and the
# relay posting to it.
cat >"$TMP/http-latency.sh" <<SH
#!/usr/bin/env bash
rm -f "$TMP/lport"
"$RECV" "$TMP/lport" &
n=\$!
for _ in \$(seq 200); do [ -s "$TMP/lport" ] && break; sleep 0.05; done
$PGO relay --sink http --http-url "http://127.0.0.1:\$(cat "$TMP/lport")/hook" >/dev/null &
r=\$!
trap 'kill \$r \$n; wait; exit 0' TERM INT
wait
SH
chmod +x "$TMP/http-latency.sh"
run "http: latency 500/s (commit to 2xx at the receiver)" latency --rate 500 --seconds $LAT --warmup 1 --grace 5 \
	--relay-cmd "$TMP/http-latency.sh"
python3 - "$JSON" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| workload | metric | value |")
print("|---|---|---|")
for r in rows:
    print(f"| {r['params'].get('variant', r['workload'])} | {r['metric']} | {r['value']} {r.get('unit', '')} |")
PY
