#!/usr/bin/env bash
# run.sh BUILD [--quick] [--only REGEX] [--rounds N] — the benchmarks
# behind `make bench`.
#
# Starts a throwaway PostgreSQL cluster (scripts/pg.sh) with honest
# durability (fsync and synchronous_commit on), migrates a database, and
# runs every workload of pgoutbox-bench against it, emptying the outbox in
# between.  Each workload prints a progress line and its figures; the end
# is a Markdown table whose last column compares each figure with the
# PostgreSQL limit measured in the same run (see bench/report.py).
#
#   bench/run.sh build            full run, ~14 minutes on 2 cores
#   bench/run.sh build --quick    every workload tiny (~30 s): a smoke test
#   bench/run.sh build --only 'enqueue|limit: (INSERT|COPY)' --rounds 3
#                                 only the workloads whose label matches
#                                 the extended regex, the list run N times
#                                 in turn (A B C A B C: a shared host
#                                 weighs on each alike); each figure's
#                                 ratio is taken within its round
#
# A full run without failures appends its JSON lines to
# bench/results/results.jsonl, writes the table to bench/results/latest.md
# and draws the charts (bench/charts.gp, gnuplot) into bench/results/*.png.
# A quick, partial (--only, --rounds) or failed run keeps its results out
# of all three
# (bench/results/*.tmp; a quick run draws its charts in its temporary
# directory, only to check that they draw).  The relay runs in its default
# mode (ordered) and, where marked, in concurrent mode.  The cluster runs
# at wal_level=logical: the workloads marked WAL use the queue benchwal,
# captured through the WAL (docs/wal.md), side by side with the table's.  Installs only
# what scripts/deps.sh lacks, plus gnuplot for the charts; `make bench`
# built everything first.  Works as root (PostgreSQL then runs as the
# postgres user) and as a normal user.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/run.sh BUILD_DIR [--quick]}
QUICK=0 ONLY= ROUNDS=1
shift
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--only) ONLY=${2:?--only needs a regex}; shift ;;
	--rounds) ROUNDS=${2:?--rounds needs a number}; shift ;;
	*) echo "usage: bench/run.sh BUILD_DIR [--quick] [--only REGEX] [--rounds N]" >&2; exit 2 ;;
	esac
	shift
done
case $ROUNDS in ''|*[!0-9]*|0) echo "run.sh: --rounds must be a positive number" >&2; exit 2 ;; esac
PARTIAL=0
[ -n "$ONLY" ] || [ "$ROUNDS" != 1 ] && PARTIAL=1
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PGO=$BUILD/pgoutbox
BENCH=$BUILD/bench/pgoutbox-bench
for exe in "$PGO" "$BENCH"; do
	[ -x "$exe" ] || { echo "run.sh: $exe not built (ninja -C $BUILD)" >&2; exit 2; }
done

# gnuplot draws the charts: installed here rather than by every build.
PGO_DEPS_EXTRA=gnuplot-nox scripts/deps.sh ||
	echo "run.sh: scripts/deps.sh could not install gnuplot-nox" >&2
if ! command -v gnuplot >/dev/null; then
	echo "run.sh: gnuplot is missing, so the charts cannot be drawn:" \
		"install the gnuplot-nox package (apt-get install gnuplot-nox)" >&2
	exit 2
fi

RESULTS=$ROOT/bench/results
mkdir -p "$RESULTS"
TMP=$(mktemp -d /tmp/pgoutbox-bench.XXXXXX)
chmod 755 "$TMP"
. scripts/pg.sh
cleanup() { pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Durable commits as in production; only the cache and WAL sizes are
# raised, so that no checkpoint storm lands in the middle of a workload.
# wal_level=logical for the WAL-capture workloads (docs/wal.md): both
# capture modes are measured at the same level, side by side.
SETTINGS=(shared_buffers=256MB fsync=on synchronous_commit=on
	max_wal_size=4GB checkpoint_timeout=30min wal_level=logical max_connections=400)
echo "== starting PostgreSQL ($(pg_bindir | grep -o '[0-9]*' | head -1)): ${SETTINGS[*]}"
pg_start "$TMP/pg" "${SETTINGS[@]}" || { echo "run.sh: cannot start PostgreSQL" >&2; exit 2; }
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >"$TMP/migrate.log" 2>&1 || { cat "$TMP/migrate.log" >&2; exit 1; }
# The WAL-capture workloads' queue: send_to('benchwal', ...) writes a
# logical message, its relay streams the slot pgoutbox_benchwal.
WALQ=benchwal
"$PGO" queue create "$WALQ" --capture wal --db "$URL" >>"$TMP/migrate.log" 2>&1 ||
	{ cat "$TMP/migrate.log" >&2; exit 1; }
# The work queues of the work workloads (docs/queue.md): benchjobs plain
# (no controls), benchgroups with its jobs in $WORK_GROUPS groups and a group
# limit (group_concurrency 1: each group's jobs one after the other).
# pgoutbox-bench work fills them and creates the no-op handler
# pgoutbox_bench_job(jsonb) their --sql workers run.
WORK_GROUPS=100
for q in benchjobs benchgroups; do
	"$PGO" queue create "$q" --db "$URL" >>"$TMP/migrate.log" 2>&1 ||
		{ cat "$TMP/migrate.log" >&2; exit 1; }
done
PG_VERSION=$(psql -XAtq "$URL" -c "SHOW server_version")

RUN_ID=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# Everything shares the host: say how busy it was before we started.
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
RUN_JSON=$TMP/run.jsonl
: >"$RUN_JSON"
RELAY="$PGO relay --sink stdout"
WAL_RELAY="$RELAY --queue $WALQ"

if [ $QUICK = 1 ]; then
	SECS=0.3 WARM=0.1 RTT=200 DRAIN=1000 REPEAT=1 LAT_SECS=0.5 LAT500=0.5 GRACE=3 LIMIT=20
	STEADY=1 AFTER=0.5 WINDOW=0.5 HISTORY=20000 HDRAIN=2000 HOLD=0.3
	OUT_UP=6 OUT_DOWN=3 OUT_AFTER=3
else
	SECS=10 WARM=1 RTT=5000 DRAIN=100000 REPEAT=3 LAT_SECS=10 LAT500=20 GRACE=5 LIMIT=60
	STEADY=60 AFTER=20 WINDOW=5 HISTORY=10000000 HDRAIN=100000 HOLD=60
	# The fleet outage (issue 41): 60 s all up, 60 s one down, 30 s after.
	OUT_UP=60 OUT_DOWN=60 OUT_AFTER=30
fi
DRAIN_RELAY="$RELAY --batch 1000 --in-flight 2"
# One worker process, 2 connections (the host's cores), batches of 100.
WORKER="$PGO worker --sql pgoutbox_bench_job --concurrency 2 --batch 100"
WAL_DRAIN_RELAY="$WAL_RELAY --batch 1000"
# A relay fleet (docs/fleet.md): 3 databases drained by one process, and
# the memory of one process serving $IDLE idle databases (3 in --quick).
# Each is a database of the same cluster, migrated like bench.
IDLE=50
[ $QUICK = 1 ] && IDLE=3
FLEET3= SHARDS3= SHARDS_IDLE=
: >"$TMP/fleet.ini"
for i in $(seq "$IDLE"); do
	psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench_s$i" >/dev/null
	"$PGO" migrate --db "$(pg_url "bench_s$i")" >>"$TMP/migrate.log" 2>&1 ||
		{ cat "$TMP/migrate.log" >&2; exit 1; }
	arg=" --db '$(pg_url "bench_s$i")'" sarg=" --shard-db '$(pg_url "bench_s$i")'"
	SHARDS_IDLE+=$sarg
	printf '[database s%d]\nurl = %s\n' "$i" "$(pg_url "bench_s$i")" >>"$TMP/fleet.ini"
	[ "$i" -le 3 ] && FLEET3+=$arg SHARDS3+=$sarg
done
FLEET_IDLE=" --config $TMP/fleet.ini"
CHARTS=$TMP/charts
mkdir -p "$CHARTS"
# steady and held-xmin: producers at 50 % of the drain rate of one relay
# (ordered, the default mode) measured earlier in this run, as 2 producers
# committing 100 events per INSERT; @STEADY_RATE@ is filled in then.  Not
# 80 %: on two shared cores the producers cost about 0.7 of the relay's CPU
# per event, so 80 % of a lone drain asks more CPU than the host has, and
# the more so the faster the relay.
# STEADY_RATE=N in the environment offers N/s instead (run them alone:
# STEADY_RATE=100000 bench/run.sh build --only 'steady|held xmin').
STEADY_ARGS="--rate @STEADY_RATE@ --producers 2 --per-tx 100 --insert --window $WINDOW --warmup $WARM --grace 60 --relay-cmd \"$DRAIN_RELAY\""
steady_rate() {
	python3 - "$RUN_JSON" <<'PY'
import json, sys
rate = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = r["params"]
    if (r["workload"] == "drain" and r["metric"] == "events_per_s"
            and p["relays"] == 1 and "--mode" not in p.get("relay", "")
            and "rss" not in p and "queue" not in p and "shards" not in p):
        rate = r["value"]
print(int(round(0.5 * rate, -2)) if rate else 10000)
PY
}

# The workloads: "label|arguments of pgoutbox-bench".
W=(
	"limit: INSERT, 1 client|enqueue --mode insert --clients 1 --seconds $SECS --warmup $WARM"
	"limit: INSERT, 8 clients|enqueue --mode insert --clients 8 --seconds $SECS --warmup $WARM"
	"limit: COPY 100/tx, 1 client|enqueue --mode insert100 --clients 1 --seconds $SECS --warmup $WARM"
	"limit: INSERT 100 rows/tx into the outbox, 1 client|enqueue --mode insert-outbox --clients 1 --seconds $SECS --warmup $WARM"
	"limit: COPY 100 rows/tx into the outbox, 1 client|enqueue --mode copy-outbox --clients 1 --seconds $SECS --warmup $WARM"
	"limit: NOTIFY round trip|notify-rtt --count $RTT"
	"enqueue send(), 1 client|enqueue --mode send --clients 1 --seconds $SECS --warmup $WARM"
	"enqueue send(), 8 clients|enqueue --mode send --clients 8 --seconds $SECS --warmup $WARM"
	"enqueue INSERT of 1 row/tx into the outbox, 1 client|enqueue --mode insert-outbox1 --clients 1 --seconds $SECS --warmup $WARM"
	"enqueue INSERT of 1 row/tx into the outbox, 8 clients|enqueue --mode insert-outbox1 --clients 8 --seconds $SECS --warmup $WARM"
	"enqueue send() without NOTIFY, 1 client|enqueue --mode send-quiet --clients 1 --seconds $SECS --warmup $WARM"
	"enqueue send() without NOTIFY, 8 clients|enqueue --mode send-quiet --clients 8 --seconds $SECS --warmup $WARM"
	"enqueue send(), 1 client, relay listening|enqueue --mode send --clients 1 --seconds $SECS --warmup $WARM --relay-cmd \"$RELAY\""
	"enqueue send(), 8 clients, relay listening|enqueue --mode send --clients 8 --seconds $SECS --warmup $WARM --relay-cmd \"$RELAY\""
	"enqueue send(), 1 client, relay polling every 100 ms|enqueue --mode send --clients 1 --seconds $SECS --warmup $WARM --relay-cmd \"$RELAY --listen off --poll-interval 100ms\""
	"enqueue send(), 8 clients, relay polling every 100 ms|enqueue --mode send --clients 8 --seconds $SECS --warmup $WARM --relay-cmd \"$RELAY --listen off --poll-interval 100ms\""
	"enqueue send() WAL, 1 client|enqueue --mode send --queue $WALQ --clients 1 --seconds $SECS --warmup $WARM"
	"enqueue send() WAL, 8 clients|enqueue --mode send --queue $WALQ --clients 8 --seconds $SECS --warmup $WARM"
	"enqueue send() WAL, 1 client, relay streaming|enqueue --mode send --queue $WALQ --clients 1 --seconds $SECS --warmup $WARM --relay-cmd \"$WAL_RELAY\""
	"enqueue send() WAL, 8 clients, relay streaming|enqueue --mode send --queue $WALQ --clients 8 --seconds $SECS --warmup $WARM --relay-cmd \"$WAL_RELAY\""
	"enqueue bulk 100/tx, 1 client|enqueue --mode bulk --clients 1 --seconds $SECS --warmup $WARM"
	"enqueue send_batch() 100/call, 1 client|enqueue --mode batch --clients 1 --seconds $SECS --warmup $WARM"
	"drain $DRAIN events, 1 relay (ordered)|drain --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY\""
	"drain $DRAIN events, 2 relays (ordered)|drain --events $DRAIN --relays 2 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY\""
	"drain $DRAIN events, 1 relay (concurrent)|drain --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY --mode concurrent\""
	"drain $DRAIN events, 2 relays (concurrent)|drain --events $DRAIN --relays 2 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY --mode concurrent\""
	"drain $DRAIN events, 4 relays (ordered)|drain --events $DRAIN --relays 4 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY\""
	"drain $DRAIN events, 4 relays (concurrent)|drain --events $DRAIN --relays 4 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY --mode concurrent\""
	"drain $DRAIN events WAL, 1 relay|drain --queue $WALQ --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$WAL_DRAIN_RELAY\""
	"drain $DRAIN events of 3 databases, 1 relay process (ordered)|drain --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT $SHARDS3 --relay-cmd \"$DRAIN_RELAY $FLEET3\""
	"work: $DRAIN jobs, 1 worker (--sql no-op, 2 connections)|work --queue benchjobs --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$WORKER --queue benchjobs\""
	"work: $DRAIN jobs in $WORK_GROUPS groups, group_concurrency 1, 1 worker (--sql no-op, 2 connections)|work --queue benchgroups --groups $WORK_GROUPS --group-concurrency 1 --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$WORKER --queue benchgroups\""
	"relay RSS: idle fleet of $IDLE databases, then draining $DRAIN events|drain --events $DRAIN --relays 1 --rss --timeout $LIMIT $SHARDS_IDLE --relay-cmd \"$DRAIN_RELAY $FLEET_IDLE\""
	"relay RSS: idle, then draining $DRAIN events|drain --events $DRAIN --relays 1 --rss --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY\""
	"latency 500/s, NOTIFY|latency --rate 500 --seconds $LAT500 --warmup $WARM --grace $GRACE --samples \"$CHARTS/cdf-notify.dat\" --relay-cmd \"$RELAY\""
	"latency 500/s, NOTIFY (concurrent)|latency --rate 500 --seconds $LAT_SECS --warmup $WARM --grace $GRACE --samples \"$CHARTS/cdf-notify-concurrent.dat\" --relay-cmd \"$RELAY --mode concurrent\""
	"latency 500/s, WAL|latency --queue $WALQ --rate 500 --seconds $LAT500 --warmup $WARM --grace $GRACE --samples \"$CHARTS/cdf-wal.dat\" --relay-cmd \"$WAL_RELAY\""
	"latency 500/s, poll only (1 s)|latency --rate 500 --seconds $LAT_SECS --warmup $WARM --grace $GRACE --samples \"$CHARTS/cdf-poll.dat\" --relay-cmd \"$RELAY --listen off --poll-interval 1s\""
	"latency 5000/s, NOTIFY, 1 event/tx|latency --rate 5000 --producers 4 --seconds $LAT_SECS --warmup $WARM --grace $GRACE --relay-cmd \"$RELAY\""
	"latency 8 producers at full speed, NOTIFY|latency --rate 40000 --producers 8 --seconds $LAT_SECS --warmup $WARM --grace $GRACE --relay-cmd \"$RELAY\""
	"latency 5000/s, NOTIFY, 10 events/tx|latency --rate 5000 --per-tx 10 --seconds $LAT_SECS --warmup $WARM --grace $GRACE --relay-cmd \"$RELAY\""
	"steady: 50 % of the drain rate for $STEADY s|latency --seconds $STEADY $STEADY_ARGS"
	"held xmin: steady load, snapshot held $STEADY s, then $AFTER s|latency --hold-xmin --seconds $STEADY --after $AFTER $STEADY_ARGS"
	"held snapshot, WAL: send(), 8 clients, relay streaming, $HOLD s, none held|enqueue --mode send --queue $WALQ --clients 8 --seconds $HOLD --warmup $WARM --relay-cmd \"$WAL_RELAY\""
	"held snapshot, WAL: send(), 8 clients, relay streaming, $HOLD s, snapshot held|enqueue --mode send --queue $WALQ --clients 8 --seconds $HOLD --warmup $WARM --hold-xmin --relay-cmd \"$WAL_RELAY\""
	"held snapshot, WAL: drain $DRAIN events, 1 relay, snapshot held|drain --queue $WALQ --hold-xmin --events $DRAIN --relays 1 --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$WAL_DRAIN_RELAY\""
	"fleet of 3 clusters, 500/s each, one stopped for ${OUT_DOWN} s|fleet-outage --how stop --rate 500 --up $OUT_UP --down $OUT_DOWN --after $OUT_AFTER"
	"fleet of 3 clusters, 500/s each, one's host hung for ${OUT_DOWN} s|fleet-outage --how stall --rate 500 --up $OUT_UP --down $OUT_DOWN --after $OUT_AFTER"
	"history: $HISTORY events through, then drain $HDRAIN|history --history $HISTORY --events $HDRAIN --repeat $REPEAT --timeout $LIMIT --relay-cmd \"$DRAIN_RELAY --mode concurrent\""
)

# --only: the workloads whose label matches; --rounds: the list N times.
SEL=()
for w in "${W[@]}"; do
	[ -z "$ONLY" ] || grep -Eq -- "$ONLY" <<<"${w%%|*}" && SEL+=("$w")
done
[ ${#SEL[@]} -gt 0 ] || { echo "run.sh: no workload matches --only '$ONLY'" >&2; exit 2; }
RUNS=()
for r in $(seq "$ROUNDS"); do
	for w in "${SEL[@]}"; do
		if [ "$ROUNDS" = 1 ]; then RUNS+=("$w"); else RUNS+=("${w%%|*} #$r|${w#*|}"); fi
	done
done

failed=()
n=0
start=$SECONDS
for w in "${RUNS[@]}"; do
	n=$((n + 1))
	label=${w%%|*}
	args=${w#*|}
	case $args in *@STEADY_RATE@*)
		rate=${STEADY_RATE:-$(steady_rate)}
		args=${args//@STEADY_RATE@/$rate}
		label="$label ($rate/s)" ;;
	esac
	echo "== [$n/${#RUNS[@]}] $label"
	# An empty outbox, a fresh slot and a fresh checkpoint: workloads
	# do not inherit each other's backlog (rows or WAL) or dirty pages.
	psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox, pgoutbox.benchjobs, pgoutbox.benchgroups" \
		-c "SELECT pg_drop_replication_slot('pgoutbox_$WALQ')" \
		-c "SELECT pg_create_logical_replication_slot('pgoutbox_$WALQ', 'pgoutput')" \
		-c "CHECKPOINT" >/dev/null
	for i in $(seq "$IDLE"); do
		psql -XAtq "$(pg_url "bench_s$i")" -c "TRUNCATE pgoutbox.outbox" >/dev/null
	done
	log=$TMP/relay-$n.log
	# The fleet outage starts clusters of its own (bench/fleet_outage.sh).
	bench='"$BENCH"'
	case $args in fleet-outage\ *) bench='bench/fleet_outage.sh "$PGO"' args=${args#fleet-outage } ;; esac
	if ! eval "$bench $args --db \"\$URL\" --json \"\$RUN_JSON\" --run-id \"\$RUN_ID\" --relay-log \"\$log\" --label \"\$label\""; then
		failed+=("$label")
		echo "   FAILED: $label" >&2
		[ -s "$log" ] && { echo "   -- relay log (last lines)" >&2; tail -n 15 "$log" | sed 's/^/   | /' >&2; }
	fi
done

table=$(python3 bench/report.py "$RUN_JSON" --chart-data "$CHARTS")
# The charts: into bench/results only from a full run without failures;
# a partial run has not the data for them.
CHART_OUT=$CHARTS
[ $QUICK = 0 ] && [ ${#failed[@]} = 0 ] && CHART_OUT=$RESULTS
if [ $PARTIAL = 1 ]; then
	:
elif ! gnuplot -e "data='$CHARTS'; out='$CHART_OUT'" bench/charts.gp 2>"$TMP/gnuplot.log"; then
	failed+=("charts")
	echo "   FAILED: charts (gnuplot)" >&2
	sed 's/^/   | /' "$TMP/gnuplot.log" >&2
fi
{
	echo "# pgoutbox benchmarks$([ $QUICK = 1 ] && echo ' (quick smoke run: figures mean nothing)')"
	echo
	echo "- date: $RUN_ID; commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "- machine: $(head -n 1 "$RUN_JSON" | python3 -c 'import json,sys; print(json.load(sys.stdin)["machine"])' 2>/dev/null || echo unknown)"
	echo "- load average before the run: $LOAD (other work on the host skews the figures)"
	echo "- PostgreSQL $PG_VERSION on the same host, unix socket: ${SETTINGS[*]}"
	echo "- payload: 200 bytes of JSON per event; relay sink: stdout"
	echo "- command: bench/run.sh $(basename "$BUILD")$([ $QUICK = 1 ] && echo ' --quick')$([ -n "$ONLY" ] && printf " --only '%s'" "$ONLY")$([ "$ROUNDS" != 1 ] && echo " --rounds $ROUNDS")"
	echo
	echo "$table"
} >"$TMP/table.md"

echo
cat "$TMP/table.md"
if [ $QUICK = 1 ]; then
	cp "$TMP/table.md" "$RESULTS/quick.md.tmp"
elif [ $PARTIAL = 1 ]; then
	# A subset is kept for a look, never mixed with the full runs.
	cp "$TMP/table.md" "$RESULTS/partial.md.tmp"
	cp "$RUN_JSON" "$RESULTS/partial.jsonl.tmp"
	echo
	echo "partial run, not recorded: bench/results/partial.md.tmp (.jsonl.tmp)"
elif [ ${#failed[@]} != 0 ]; then
	# A partial run is kept for a look, never mixed with the results.
	cp "$TMP/table.md" "$RESULTS/failed.md.tmp"
	cp "$RUN_JSON" "$RESULTS/failed.jsonl.tmp"
	echo
	echo "not recorded (failures): see bench/results/failed.md.tmp"
else
	cat "$RUN_JSON" >>"$RESULTS/results.jsonl"
	cp "$TMP/table.md" "$RESULTS/latest.md"
	echo
	echo "appended to bench/results/results.jsonl; table in bench/results/latest.md;" \
		"charts in bench/results/*.png"
fi
echo "$n workloads in $((SECONDS - start)) s, ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} = 0 ]
