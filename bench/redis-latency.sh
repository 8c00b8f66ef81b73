#!/usr/bin/env bash
# redis-latency.sh BUILD_DIR [--quick] [--appendfsync always|everysec|no]
#   — the latency "commit to consumer" through Redis (issue #3), behind
#   `make bench-redis`.
#
# Starts a throwaway PostgreSQL (scripts/pg.sh; fsync and synchronous_commit
# on, as bench/run.sh) with two databases, the service that writes
# (bench_producer, the outbox) and the one that consumes (bench_consumer,
# the inbox), and a throwaway redis-server (tests/redis.sh; appendonly yes,
# appendfsync everysec unless --appendfsync says otherwise).  Then, for
# each scenario
#   A  100 events, one every 100 ms (10 s)
#   B  500 events/s for 20 s (10000 events)
# and each wake-up of the relay
#   notify  LISTEN/NOTIFY (the default)
#   poll    --listen off --poll-interval 1s
# and each consumer
#   redis   relay --sink redis; `pgoutbox consume --sql lat_record` (the C
#           consumer with the inbox)
#   bullmq  relay --sink bullmq (BullMQ 6's add script, exported with
#           tools/bullmq-export.js); a real BullMQ 6 Worker in Node
#           (bench/redis-latency-worker.js, concurrency 1) with the inbox
# it runs a fresh relay and consumer, warms them up with 3 events, and lets
# bench/redis-latency-producer (one pgoutbox.send() per transaction, paced
# open loop on 4 connections) write the events, stamping each with the
# wall clock right after its COMMIT returned.  The latency of an event is
# its arrival (the consumer's handler runs: clock_timestamp() inside the
# SQL handler for `pgoutbox consume`, performance.timeOrigin +
# performance.now() as the BullMQ processor starts) minus that commit
# stamp.  Also measured: "in Redis" (the XADD's entry id, or the job's
# timestamp set by the relay; both whole milliseconds) and the commit of
# the consumer's transaction (its BEGIN: now(); its commit:
# track_commit_timestamp, stamped as the commit record is written, before
# its WAL fsync).  Lost: sent but not arrived
# within the scenario's timeout; dups: deliveries past the first (the
# inbox's skips included).
#
#   bench/redis-latency.sh build                      full run, ~3 minutes
#   bench/redis-latency.sh build --appendfsync always Redis fsyncs every write
#   bench/redis-latency.sh build --quick              tiny counts: a smoke test
#   ... --consumers bullmq --bullmq-concurrency 8     only the BullMQ runs,
#                                                     8 jobs at once (no order)
#
# Prints a progress line per run and a Markdown table.  A full run without
# failures writes the table to bench/results/redis-latency.md (a variant to
# redis-latency-fsync-always.md, -bullmq-c8.md, ...) and appends
# its JSON lines to bench/results/redis-latency.jsonl (the style of
# results.jsonl); a quick or failed run writes only
# bench/results/redis-latency-{quick,failed}.md.tmp.  Exit 0 when every run
# completed with nothing lost.  Needs redis-server, node and npm (`npm ci`
# in tests/bullmq on first use); works as root and as a normal user.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
BUILD=
QUICK=0
FSYNC=everysec
BULL_CONC=1
CONSUMERS=(redis bullmq)
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--quick) QUICK=1 ;;
	--appendfsync)
		FSYNC=${2:-}
		case $FSYNC in always | everysec | no) ;; *) echo "redis-latency.sh: --appendfsync always, everysec or no" >&2; exit 2 ;; esac
		shift ;;
	--bullmq-concurrency)
		BULL_CONC=${2:-}
		[[ $BULL_CONC =~ ^[1-9][0-9]*$ ]] || { echo "redis-latency.sh: --bullmq-concurrency N (N >= 1)" >&2; exit 2; }
		shift ;;
	--consumers)
		case ${2:-} in redis) CONSUMERS=(redis) ;; bullmq) CONSUMERS=(bullmq) ;; redis,bullmq | bullmq,redis) ;;
		*) echo "redis-latency.sh: --consumers redis, bullmq or redis,bullmq" >&2; exit 2 ;; esac
		shift ;;
	-*) echo "redis-latency.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) [ -z "$BUILD" ] || { echo "redis-latency.sh: one BUILD_DIR" >&2; exit 2; }; BUILD=$1 ;;
	esac
	shift
done
[ -n "$BUILD" ] || { echo "usage: bench/redis-latency.sh BUILD_DIR [--quick] [--appendfsync always|everysec|no] [--consumers redis|bullmq] [--bullmq-concurrency N] (--help)" >&2; exit 2; }
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PGO=$BUILD/pgoutbox
PRODUCER=$BUILD/bench/redis-latency-producer
for exe in "$PGO" "$PRODUCER"; do
	[ -x "$exe" ] || { echo "redis-latency.sh: $exe not built (ninja -C $BUILD)" >&2; exit 2; }
done
for cmd in redis-server redis-cli node npm python3; do
	command -v $cmd >/dev/null || { echo "redis-latency.sh: $cmd not found (scripts/deps.sh; apt-get install redis-server nodejs npm)" >&2; exit 2; }
done
NODE_DIR=$ROOT/tests/bullmq
if [ ! -f "$NODE_DIR/node_modules/bullmq6/package.json" ] || [ ! -f "$NODE_DIR/node_modules/pg/package.json" ]; then
	echo "== npm ci in tests/bullmq (bullmq 6, pg)"
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" npm ci --no-audit --no-fund --loglevel=error) >&2 ||
		{ echo "redis-latency.sh: npm ci in tests/bullmq failed" >&2; exit 2; }
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=86}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}

RESULTS=$ROOT/bench/results
mkdir -p "$RESULTS"
TMP=$(mktemp -d /tmp/pgoutbox-redis-latency.XXXXXX)
chmod 755 "$TMP"
. scripts/pg.sh
. tests/redis.sh
CHILDREN=() # running background processes of ours (stop_pid drops the ended)
cleanup() {
	local p
	for p in "${CHILDREN[@]:-}"; do
		[ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
	done
	sleep 0.2
	for p in "${CHILDREN[@]:-}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
	done
	redis_stop 2>/dev/null || true
	pg_stop
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Durable commits as in production (bench/run.sh), plus commit timestamps
# for the consumer's commit time.
SETTINGS=(shared_buffers=256MB fsync=on synchronous_commit=on
	max_wal_size=4GB checkpoint_timeout=30min track_commit_timestamp=on)
echo "== starting PostgreSQL ($(pg_bindir | grep -o '[0-9]*' | head -1)): ${SETTINGS[*]}"
unset PG_PORT PG_DIR PG_URL
pg_start "$TMP/pg" "${SETTINGS[@]}" || { echo "redis-latency.sh: cannot start PostgreSQL" >&2; exit 2; }
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench_producer" -c "CREATE DATABASE bench_consumer" >/dev/null
PROD_URL=$(pg_url bench_producer)
CONS_URL=$(pg_url bench_consumer)
for u in "$PROD_URL" "$CONS_URL"; do
	"$PGO" migrate --db "$u" >"$TMP/migrate.log" 2>&1 || { cat "$TMP/migrate.log" >&2; exit 1; }
done
# The consumer's handler: records which event arrived, and when.
psql -XAtq -v ON_ERROR_STOP=1 "$CONS_URL" >/dev/null <<'SQL'
CREATE TABLE lat_arrivals (run text NOT NULL, seq int NOT NULL,
                           arrived timestamptz NOT NULL DEFAULT clock_timestamp(),
                           began timestamptz NOT NULL DEFAULT now());  -- the BEGIN
CREATE FUNCTION lat_record(payload jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO lat_arrivals (run, seq) VALUES (payload->>'run', (payload->>'seq')::int)
$$;
SQL
PG_VERSION=$(psql -XAtq "$PROD_URL" -c "SHOW server_version")

echo "== starting redis-server ($(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-)): appendonly yes, appendfsync $FSYNC"
unset REDIS_PORT
redis_start "$TMP/redis" --appendfsync "$FSYNC" || { echo "redis-latency.sh: cannot start redis-server" >&2; exit 2; }
[ "$(rcli CONFIG GET appendfsync | tail -n 1)" = "$FSYNC" ] || { echo "redis-latency.sh: appendfsync is not $FSYNC" >&2; exit 1; }

node "$ROOT/tools/bullmq-export.js" --from "$NODE_DIR" --package bullmq6 --out "$TMP/bullmq-add.lua" 2>"$TMP/bullmq-export.log" ||
	{ cat "$TMP/bullmq-export.log" >&2; echo "redis-latency.sh: bullmq-export.js failed" >&2; exit 2; }
BULLMQ_VERSION=$(head -n 1 "$TMP/bullmq-add.lua" | grep -o 'bullmq=[0-9.]*' | cut -d= -f2)
export PGOUTBOX_SINK_BULLMQ_SCRIPT=$TMP/bullmq-add.lua PGOUTBOX_RELAY_STATS_INTERVAL=0

RUN_ID=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
# Scenarios: "name|label|count|rate/s|seconds to wait for the last arrivals".
if [ $QUICK = 1 ]; then
	SCENARIOS=("A|20 events, one per 50 ms|20|20|8" "B|40 events at 500/s|40|500|8")
else
	SCENARIOS=("A|100 events, one per 100 ms|100|10|10" "B|500 events/s for 20 s|10000|500|60")
fi
WAKEUPS=(notify poll)
RUNS=$TMP/runs.jsonl
: >"$RUNS"
failed=()

# Fresh-delivery count of RUN as seen by the consumer of this run.
arrived() {
	case $CONS in
	redis) psql -XAtq "$CONS_URL" -c "SELECT count(*) FROM lat_arrivals WHERE run = '$1'" ;;
	bullmq) awk -v r="$1" '$1 == r && $6 == 1' "$DIR/worker.out" 2>/dev/null | wc -l ;;
	esac
}
wait_arrived() { # RUN N SECONDS
	local end=$((SECONDS + $3))
	while [ "$(arrived "$1")" -lt "$2" ]; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}
stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	local i
	for i in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local keep=() p
	for p in "${CHILDREN[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	CHILDREN=("${keep[@]}")
}

run_one() { # SCENARIO-SPEC WAKE CONS
	local name label count rate grace
	IFS='|' read -r name label count rate grace <<<"$1"
	WAKE=$2 CONS=$3
	local topic; topic=lat_$(tr 'A-Z' 'a-z' <<<"$name")_${WAKE}_$CONS
	DIR=$TMP/$topic
	mkdir -p "$DIR"; chmod 777 "$DIR"
	local wake_args=() sink=(--sink redis) rc=0 cpid rpid
	[ "$WAKE" = poll ] && wake_args=(--listen off --poll-interval 1s)
	[ "$CONS" = bullmq ] && sink=(--sink bullmq)
	if [ "$CONS" = redis ]; then
		"$PGO" consume --db "$CONS_URL" --redis "$REDIS_URL" --stream "pgoutbox:$topic" \
			--group bench --consumer c1 --sql lat_record 2>"$DIR/consumer.log" &
	else
		PGHOST=$PG_DIR PGPORT=$PG_PORT PGUSER=postgres PGDATABASE=bench_consumer \
			node "$ROOT/bench/redis-latency-worker.js" "$NODE_DIR" bullmq6 "$REDIS_URL" "$topic" \
			bench lat_record "$DIR/worker.out" "$BULL_CONC" 2>"$DIR/consumer.log" &
	fi
	cpid=$!; CHILDREN+=("$cpid")
	"$PGO" relay --db "$PROD_URL" "${sink[@]}" --redis "$REDIS_URL" "${wake_args[@]}" \
		>"$DIR/relay.out" 2>"$DIR/relay.log" &
	rpid=$!; CHILDREN+=("$rpid")
	# Warm-up: 3 events through the whole chain, excluded from the figures.
	"$PRODUCER" "$PROD_URL" "$topic" "warm-$topic" 3 20 "$DIR/warm.txt" 1 2>>"$DIR/producer.log" &&
		wait_arrived "warm-$topic" 3 20 || rc=1
	if [ $rc = 0 ]; then
		"$PRODUCER" "$PROD_URL" "$topic" "$topic" "$count" "$rate" "$DIR/sent.txt" 4 2>>"$DIR/producer.log" || rc=1
		wait_arrived "$topic" "$count" "$grace" || true
	fi
	stop_pid "$rpid"
	stop_pid "$cpid"
	if [ $rc != 0 ]; then
		echo "   FAILED: $name $CONS $WAKE (warm-up or producer; logs below)" >&2
		tail -n 5 "$DIR"/*.log >&2 || true
		failed+=("$name/$CONS/$WAKE")
		return 0
	fi
	psql -XAtq "$CONS_URL" -c "COPY (SELECT run, seq, (extract(epoch FROM arrived) * 1e6)::bigint,
		(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1e6)::bigint,
		(extract(epoch FROM began) * 1e6)::bigint
		FROM lat_arrivals WHERE run = '$topic') TO STDOUT" >"$DIR/arrivals.txt"
	python3 - "$DIR" "$name" "$label" "$CONS" "$WAKE" "$count" "$rate" "$topic" "$REDIS_PORT" "$(tail -n 1 "$DIR/producer.log")" >>"$RUNS" <<'PY' || failed+=("$name/$CONS/$WAKE")
import json, math, os, re, socket, sys
d, name, label, cons, wake, count, rate, topic, port, prodline = sys.argv[1:]
count = int(count)

def pct(xs, p):
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]

def resp(f):
    line = f.readline().rstrip(b"\r\n")
    t, rest = line[:1], line[1:]
    if t in (b"+", b":"):
        return rest
    if t == b"-":
        raise RuntimeError(rest.decode())
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [resp(f) for _ in range(n)]
    raise RuntimeError("bad reply %r" % line)

commit = {}                      # seq -> commit stamp (us)
for line in open(os.path.join(d, "sent.txt")):
    seq, _id, _due, c = line.split()
    commit[int(seq)] = int(c)
arrival, ccommit, inredis, deliveries = {}, {}, {}, {}
txms = []                        # BullMQ: processor start -> COMMIT returned
dups = 0
began = {}                       # seq -> the consumer's BEGIN (us)
if cons == "redis":
    for line in open(os.path.join(d, "arrivals.txt")):
        run, seq, a, c, b = line.split()
        seq = int(seq)
        began.setdefault(seq, int(b))
        deliveries[seq] = deliveries.get(seq, 0) + 1
        arrival.setdefault(seq, int(a))
        ccommit.setdefault(seq, int(c))
    m = re.search(r"duplicates skipped (\d+)", open(os.path.join(d, "consumer.log")).read())
    dups += int(m.group(1)) if m else 0
    s = socket.create_connection(("127.0.0.1", int(port)))
    stream = ("pgoutbox:" + topic).encode()
    s.sendall(b"*4\r\n$6\r\nXRANGE\r\n$%d\r\n%s\r\n$1\r\n-\r\n$1\r\n+\r\n" % (len(stream), stream))
    for entry_id, fields in resp(s.makefile("rb")):
        kv = dict(zip(fields[::2], fields[1::2]))
        p = json.loads(kv[b"payload"])
        if p.get("run") == topic:
            inredis.setdefault(int(p["seq"]), int(entry_id.split(b"-")[0]) * 1000)
    s.close()
else:
    for line in open(os.path.join(d, "arrivals.txt")):
        run, seq, a, c, b = line.split()
        ccommit.setdefault(int(seq), int(c))
        began.setdefault(int(seq), int(b))
    for line in open(os.path.join(d, "worker.out")):
        run, seq, a, jts, c, fresh = line.split()
        if run != topic:
            continue
        seq = int(seq)
        deliveries[seq] = deliveries.get(seq, 0) + 1
        if fresh == "1":
            arrival.setdefault(seq, round(float(a) * 1000))
            txms.append(float(c) - float(a))
        inredis.setdefault(seq, int(jts) * 1000)
dups += sum(n - 1 for n in deliveries.values() if n > 1)

lat = [(arrival[s] - c) / 1000 for s, c in commit.items() if s in arrival]
rlat = [(inredis[s] - c) / 1000 for s, c in commit.items() if s in inredis]
clat = [(ccommit[s] - c) / 1000 for s, c in commit.items() if s in ccommit]
blat = [(began[s] - c) / 1000 for s, c in commit.items() if s in began]
lost = sum(1 for s in commit if s not in arrival)
r = {"scenario": name, "label": label, "sink": cons, "wakeup": wake,
     "consumer": "pgoutbox consume --sql" if cons == "redis" else "BullMQ Worker (node)",
     "count": count, "rate": float(rate), "sent": len(commit), "arrived": len(lat),
     "lost": lost + (count - len(commit)), "dups": dups,
     "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "p99_ms": pct(lat, 99),
     "max_ms": max(lat) if lat else None,
     "in_redis_p50_ms": pct(rlat, 50), "in_redis_p99_ms": pct(rlat, 99),
     "consumer_commit_p50_ms": pct(clat, 50), "consumer_commit_p99_ms": pct(clat, 99),
     "worker_tx_p50_ms": pct(txms, 50),
     "consumer_begin_p50_ms": pct(blat, 50), "consumer_begin_p99_ms": pct(blat, 99),
     "consumer_rate": (len(arrival) - 1) / ((max(arrival.values()) - min(arrival.values())) / 1e6)
                      if len(arrival) > 1 and max(arrival.values()) > min(arrival.values()) else None,
     "producer": prodline}
f = lambda v: "-" if v is None else "%.2f" % v
print("   %s %-6s %-6s sent %d, arrived %d, lost %d, dups %d: p50 %s p95 %s p99 %s max %s ms"
      " (in Redis p50 %s p99 %s; consumer BEGIN p50 %s, commit p50 %s ms)" % (name, cons, wake, r["sent"],
      r["arrived"], r["lost"], dups, f(r["p50_ms"]), f(r["p95_ms"]), f(r["p99_ms"]), f(r["max_ms"]),
      f(r["in_redis_p50_ms"]), f(r["in_redis_p99_ms"]), f(r["consumer_begin_p50_ms"]),
      f(r["consumer_commit_p50_ms"])), file=sys.stderr)
print("     %s; arrivals at %s/s%s" % (prodline.replace("producer: ", "producer "),
      "-" if r["consumer_rate"] is None else "%.0f" % r["consumer_rate"],
      "" if not txms else "; worker's transaction (claim, handler, COMMIT) p50 %.2f ms" % r["worker_tx_p50_ms"]),
      file=sys.stderr)
print(json.dumps(r))
PY
}

echo "== runs (relay: ordered mode, defaults; pgoutbox consume, BullMQ Worker concurrency $BULL_CONC; inbox in bench_consumer)"
start=$SECONDS
for spec in "${SCENARIOS[@]}"; do
	for CONS_ in "${CONSUMERS[@]}"; do
		for WAKE_ in "${WAKEUPS[@]}"; do
			echo "-- ${spec%%|*} ($(cut -d'|' -f2 <<<"$spec")): $CONS_, $WAKE_"
			run_one "$spec" "$WAKE_" "$CONS_" 2>&1
		done
	done
done

MACHINE="$(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
python3 - "$RUNS" "$TMP/table.md" "$TMP/run.jsonl" "$RUN_ID" "$MACHINE" "$FSYNC" \
	"$(grep -o "version : '[^']*'" meson.build | head -1 | cut -d"'" -f2)" "$BULL_CONC" <<'PY'
import datetime, json, sys
runs_f, table_f, json_f, run_id, machine, fsync, version, conc = sys.argv[1:]
runs = [json.loads(l) for l in open(runs_f) if l.strip()]
f = lambda v: "-" if v is None else "%.1f" % v if v >= 10 else "%.2f" % v
rows = ["| scenario | sink / consumer | wakeup | n | p50 ms | p95 ms | p99 ms | max ms | lost | dups"
        " | in Redis p50 / p99 ms | consumer commit p50 / p99 ms |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in runs:
    sc = "%s: %s" % (r["scenario"], r["label"])
    sink = "redis / pgoutbox consume" if r["sink"] == "redis" else "bullmq / BullMQ Worker"
    wake = "NOTIFY" if r["wakeup"] == "notify" else "poll 1 s"
    if r["sink"] == "bullmq" and conc != "1":
        sink += " ×%s" % conc
    rows.append("| %s | %s | %s | %d | %s | %s | %s | %s | %d | %d | %s / %s | %s / %s |" % (
        sc, sink, wake, r["arrived"], f(r["p50_ms"]), f(r["p95_ms"]), f(r["p99_ms"]), f(r["max_ms"]),
        r["lost"], r["dups"], f(r["in_redis_p50_ms"]), f(r["in_redis_p99_ms"]), f(r["consumer_commit_p50_ms"]),
        f(r["consumer_commit_p99_ms"])))
open(table_f, "w").write("\n".join(rows) + "\n")
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
with open(json_f, "w") as out:
    for r in runs:
        params = {"scenario": r["scenario"] + ": " + r["label"], "sink": r["sink"],
                  "consumer": r["consumer"], "wakeup": r["wakeup"], "events": r["count"],
                  "rate": r["rate"], "appendfsync": fsync, "arrived": r["arrived"]}
        if r["sink"] == "bullmq":
            params["worker_concurrency"] = int(conc)
        for metric, unit in (("p50_ms", "ms"), ("p95_ms", "ms"), ("p99_ms", "ms"), ("max_ms", "ms"),
                             ("lost", "events"), ("dups", "events"), ("in_redis_p50_ms", "ms"), ("in_redis_p99_ms", "ms"),
                             ("consumer_commit_p50_ms", "ms"), ("consumer_commit_p99_ms", "ms"),
                             ("consumer_begin_p50_ms", "ms"), ("consumer_begin_p99_ms", "ms"),
                             ("worker_tx_p50_ms", "ms"), ("consumer_rate", "events_per_s")):
            if r[metric] is None:
                continue
            out.write(json.dumps({"system": "pgoutbox", "version": version, "run": run_id,
                                  "workload": "redis-latency", "params": params, "metric": metric,
                                  "value": round(r[metric], 3), "unit": unit, "date": date,
                                  "machine": machine}, separators=(",", ":")) + "\n")
PY
n=$(wc -l <"$RUNS")
want=$((${#SCENARIOS[@]} * ${#WAKEUPS[@]} * ${#CONSUMERS[@]}))
[ "$n" = "$want" ] || [ ${#failed[@]} != 0 ] || failed+=("missing runs")
lost=$(python3 -c 'import json,sys; print(sum(json.loads(l)["lost"] for l in open(sys.argv[1]) if l.strip()))' "$RUNS")
[ "$lost" = 0 ] || failed+=("$lost lost")
{
	echo "# pgoutbox: latency commit → consumer through Redis$([ $QUICK = 1 ] && echo ' (quick smoke run: figures mean nothing)')"
	echo
	echo "- date: $RUN_ID; commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "- machine: $MACHINE; load average before the run: $LOAD"
	echo "- PostgreSQL $PG_VERSION, unix socket: ${SETTINGS[*]}"
	echo "- Redis $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-), TCP 127.0.0.1: appendonly yes, appendfsync $FSYNC; BullMQ $BULLMQ_VERSION, Node $(node --version)"
	echo "- latency: consumer's handler runs − producer's COMMIT returned (same host clock)"
	echo "- command: bench/redis-latency.sh $(basename "$BUILD")$([ $QUICK = 1 ] && echo ' --quick')$([ "$FSYNC" != everysec ] && echo " --appendfsync $FSYNC")$([ ${#CONSUMERS[@]} = 1 ] && echo " --consumers ${CONSUMERS[0]}")$([ "$BULL_CONC" != 1 ] && echo " --bullmq-concurrency $BULL_CONC")"
	echo
	cat "$TMP/table.md"
} >"$TMP/report.md"
echo
cat "$TMP/report.md"
if [ $QUICK = 1 ]; then
	cp "$TMP/report.md" "$RESULTS/redis-latency-quick.md.tmp"
elif [ ${#failed[@]} != 0 ]; then
	cp "$TMP/report.md" "$RESULTS/redis-latency-failed.md.tmp"
	echo
	echo "not recorded (failures): see bench/results/redis-latency-failed.md.tmp"
else
	# Variants get a table of their own: redis-latency-fsync-always.md, ...
	md=redis-latency
	[ "$FSYNC" = everysec ] || md+=-fsync-$FSYNC
	[ ${#CONSUMERS[@]} = 2 ] || md+=-${CONSUMERS[0]}
	[ "$BULL_CONC" = 1 ] || md+=-c$BULL_CONC
	md+=.md
	cp "$TMP/report.md" "$RESULTS/$md"
	cat "$TMP/run.jsonl" >>"$RESULTS/redis-latency.jsonl"
	echo
	echo "table in bench/results/$md; appended to bench/results/redis-latency.jsonl"
fi
echo "$n runs in $((SECONDS - start)) s, ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} = 0 ]
