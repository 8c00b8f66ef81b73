#!/usr/bin/env bash
# kafka.sh BUILD [--quick] — the Kafka sink's figures beside the stdout
# sink's, from the same run: drains of 100,000 events into librdkafka's
# mock cluster (tests/kafka_mock.c, three brokers on 127.0.0.1) with 1 and
# 2 relays, ordered and concurrent, the relay's RSS while draining, and the
# commit-to-consumer latency at 500 events/s (the consumer is kcat; its
# lines are turned into the {"id":N, lines pgoutbox-bench reads).
# PostgreSQL as in bench/run.sh: fsync and synchronous_commit on.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/kafka.sh BUILD_DIR [--quick]}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
QUICK=0; [ "${2:-}" = --quick ] && QUICK=1
PGO=$BUILD/pgoutbox
BENCH=$BUILD/bench/pgoutbox-bench
MOCK=$BUILD/tests/kafka_mock
for exe in "$PGO" "$BENCH" "$MOCK"; do
	[ -x "$exe" ] || { echo "kafka.sh: $exe not built (ninja -C $BUILD)" >&2; exit 2; }
done
command -v kcat >/dev/null || { echo "kafka.sh: kcat is missing (apt-get install kcat)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/pgoutbox-kbench.XXXXXX)
chmod 755 "$TMP"
. scripts/pg.sh
MOCK_PID=
cleanup() { [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on max_wal_size=4GB checkpoint_timeout=30min
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >/dev/null
mkfifo "$TMP/ctl"
"$MOCK" 3 <"$TMP/ctl" >"$TMP/mock.out" 2>"$TMP/mock.log" &
MOCK_PID=$!
exec 9>"$TMP/ctl"
for _ in $(seq 100); do B=$(head -n 1 "$TMP/mock.out" 2>/dev/null || true); [ -n "$B" ] && break; sleep 0.05; done
[ -n "$B" ] || { echo "kafka.sh: the mock cluster did not start" >&2; exit 1; }
echo "topic bench 6" >&9

if [ $QUICK = 1 ]; then DRAIN=2000 REPEAT=1 LAT=2; else DRAIN=100000 REPEAT=1 LAT=20; fi
STDOUT="$PGO relay --sink stdout --batch 1000 --in-flight 2"
KAFKA="$PGO relay --sink kafka --kafka-brokers $B --kafka-topic bench --batch 1000 --in-flight 2"
JSON=$TMP/run.jsonl
: >"$JSON"
run() {
	local label=$1; shift
	echo "== $label"
	psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox" -c "CHECKPOINT" >/dev/null
	"$BENCH" "$@" --db "$URL" --json "$JSON" --label "$label" --relay-log "$TMP/relay.log" ||
		{ echo "   FAILED: $label" >&2; tail -n 5 "$TMP/relay.log" >&2; }
}
# LAT_ONLY=1: the latencies alone.
for sink in $([ -z "${LAT_ONLY:-}" ] && echo stdout kafka); do
	cmd=$STDOUT; [ $sink = kafka ] && cmd=$KAFKA
	for mode in ordered concurrent; do
		for relays in 1 2; do
			run "$sink: drain $DRAIN, $relays relay(s), $mode" drain --events $DRAIN --relays $relays --warm \
				--repeat $REPEAT --timeout 120 --relay-cmd "$cmd --mode $mode"
		done
	done
	run "$sink: relay RSS while draining $DRAIN" drain --events $DRAIN --relays 1 --rss --timeout 120 --relay-cmd "$cmd"
done
run "stdout: latency 500/s" latency --rate 500 --seconds $LAT --warmup 1 --grace 5 --relay-cmd "$PGO relay --sink stdout"
# Kafka: the relay publishes, kcat consumes; each message becomes a line
# {"id":N, as the stdout sink's lines start (its headers begin id=N).
cat >"$TMP/kafka-latency.sh" <<SH
#!/usr/bin/env bash
exec > >(sed -u 's/^id=\\([0-9]*\\).*/{"id":\\1,}/')
$PGO relay --sink kafka --kafka-brokers $B --kafka-topic lat >/dev/null &
r=\$!
kcat -C -b $B -t lat -o end -u -q -X fetch.wait.max.ms=1 -f '%h\\n' 2>/dev/null &
k=\$!
trap 'kill \$r \$k; exec >&-; exit 0' TERM INT
wait
SH
chmod +x "$TMP/kafka-latency.sh"
echo "topic lat 6" >&9
run "kafka: latency 500/s (commit to kcat)" latency --rate 500 --seconds $LAT --warmup 2 --grace 5 --relay-cmd "$TMP/kafka-latency.sh"
python3 - "$JSON" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| workload | metric | value |")
print("|---|---|---|")
for r in rows:
    print(f"| {r['params'].get('variant', r['workload'])} | {r['metric']} | {r['value']} {r.get('unit', '')} |")
PY
