#!/usr/bin/env bash
# metrics-flood.sh BUILD [N] [ROUNDS] — does a scrape flood slow the
# relay?  One relay (ordered, stdout sink, metrics.listen on) drains N
# events (100,000) already in the outbox, ROUNDS times (3) without scrapes,
# ROUNDS times while 4 clients send 2,000 GET /metrics in all (a bounded
# loop, back to back, new connection each; niced, see below), and ROUNDS
# times while the same flood goes to a bystander (bench/http-receiver, a
# libmicrohttpd server of its own) instead of the relay, interleaved
# quiet, flood, bystander, quiet ...  Prints each drain, the medians, the
# slowdown of the flooded median against the quiet one (target: at most
# 5 %), the bystander's (what the client and the kernel take from the
# drain on the same two cores, the relay untouched) and the flood's own
# figures (requests done during the drain, their rate, their latency
# p50/p99).  Starts its own PostgreSQL, durable (fsync on).
# FLOOD_CLIENT=ab (the default; apache2-utils is installed if missing)
# sends the flood with ApacheBench (C, -c 4, a new connection each, or
# kept alive with FLOOD_KEEPALIVE=1); FLOOD_CLIENT=python with the Python
# client below, whose own CPU on the same two cores costs the drain more
# than the endpoint does.  The relay is started and stopped before each
# fill (pgoutbox-bench drain --warm) and the flood starts when it goes on,
# so the whole flood lands inside the drain: each round says when.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${1:?usage: bench/metrics-flood.sh BUILD [N] [ROUNDS]}
N=${2:-100000}
ROUNDS=${3:-3}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PGO=$BUILD/pgoutbox
BENCH=$BUILD/bench/pgoutbox-bench
for exe in "$PGO" "$BENCH"; do
	[ -x "$exe" ] || { echo "metrics-flood.sh: $exe not built" >&2; exit 2; }
done
# ApacheBench (apache2-utils) sends the flood; the Python client is the
# fallback when it cannot be installed.
command -v ab >/dev/null || PGO_DEPS_EXTRA=apache2-utils scripts/deps.sh >/dev/null ||
	echo "metrics-flood.sh: apache2-utils would not install; the Python client floods" >&2
TMP=$(mktemp -d /tmp/pgoutbox-flood.XXXXXX)
chmod 755 "$TMP"
. scripts/pg.sh
. bench/cpu.sh
FLOOD= BYSTANDER=
cleanup() { [ -n "$FLOOD" ] && kill "$FLOOD" 2>/dev/null; [ -n "$BYSTANDER" ] && kill "$BYSTANDER" 2>/dev/null; pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on max_wal_size=4GB >/dev/null
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >/dev/null 2>&1
PORT=$(pg_free_port)
RELAY="$PGO relay --sink stdout --batch 1000 --in-flight 2 --metrics-listen 127.0.0.1:$PORT"
# The bystander: answers every request (204) from a process of its own.
[ -x "$BUILD/bench/http-receiver" ] || { echo "metrics-flood.sh: $BUILD/bench/http-receiver not built (libmicrohttpd)" >&2; exit 2; }
"$BUILD/bench/http-receiver" "$TMP/bport" >/dev/null &
BYSTANDER=$!
for _ in $(seq 200); do [ -s "$TMP/bport" ] && break; sleep 0.05; done
[ -s "$TMP/bport" ] || { echo "metrics-flood.sh: the bystander (bench/http-receiver) did not start" >&2; exit 1; }
BPORT=$(cat "$TMP/bport")
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $N events a drain, $ROUNDS rounds each"

# The flood: 4 threads, 2,000 requests in all, each on a new connection;
# starts when the port answers, writes "done seconds p50_ms p99_ms".
cat >"$TMP/flood.py" <<'PY'
import socket, sys, threading, time, http.client
port, total, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
path = sys.argv[4] if len(sys.argv) > 4 else "/metrics"
while True:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        break
    except OSError:
        time.sleep(0.01)
lat, lock, left = [], threading.Lock(), [total]
def worker():
    while True:
        with lock:
            if left[0] == 0:
                return
            left[0] -= 1
        t = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        assert r.status // 100 == 2
        assert path != "/metrics" or b"pgoutbox_events_published_total" in body
        with lock:
            lat.append(time.monotonic() - t)
t0 = time.monotonic()
ts = [threading.Thread(target=worker) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
lat.sort()
open(out, "w").write("%d %.3f %.2f %.2f\n" % (len(lat), time.monotonic() - t0,
    1000 * lat[len(lat) // 2], 1000 * lat[int(len(lat) * 0.99)]))
PY
FLOOD_CLIENT=${FLOOD_CLIENT:-$(command -v ab >/dev/null && echo ab || echo python)}
# flood PORT TOTAL OUT: the flood with the chosen client, once the port
# answers; OUT gets "done seconds p50_ms p99_ms".
flood() {
	if [ "$FLOOD_CLIENT" = python ]; then
		python3 "$TMP/flood.py" "$@"
		return
	fi
	local path=${4:-/metrics}
	[ "$path" != /metrics ] ||
		until curl -sf "http://127.0.0.1:$1/metrics" | grep pgoutbox_events_published_total >/dev/null; do sleep 0.01; done
	ab -q ${FLOOD_KEEPALIVE:+-k} -n "$2" -c 4 "http://127.0.0.1:$1$path" >"$TMP/ab.txt" 2>&1 || { cat "$TMP/ab.txt" >&2; return 1; }
	python3 - "$TMP/ab.txt" "$3" <<'AB'
import re, sys
t = open(sys.argv[1]).read()
done = int(re.search(r"Complete requests:\s+(\d+)", t).group(1))
secs = float(re.search(r"Time taken for tests:\s+([\d.]+)", t).group(1))
bad = re.search(r"Non-2xx responses:\s+(\d+)", t)
if bad or re.search(r"Failed requests:\s+(\d+)\n\s+\(Connect: (\d+), Receive: (\d+)", t) and \
        any(int(x) for x in re.search(r"\(Connect: (\d+), Receive: (\d+)", t).groups()):
    sys.exit("ab: requests failed:\n" + t)
p = dict(re.findall(r"^\s+(\d+)%\s+(\d+)", t, re.M))
open(sys.argv[2], "w").write("%d %.3f %s %s\n" % (done, secs, p["50"], p["99"]))
AB
}

echo "flood client: $FLOOD_CLIENT"
for r in $(seq "$ROUNDS"); do
	for mode in quiet flood bystander; do
		psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox" -c "CHECKPOINT" >/dev/null
		if [ $mode != quiet ]; then
			target="$PORT 2000 $TMP/flood.out"
			[ $mode = bystander ] && target="$BPORT 2000 $TMP/flood.out /hook"
			rm -f "$TMP/flood.out"
			# Niced: the scraper of a real deployment runs elsewhere;
			# here it shares the two cores, and at full priority its
			# own CPU, not the relay's endpoint, is what slows the
			# drain (FLOOD_NICE=0 to see that).
			# The relay is connected and stopped (--warm) while the
			# outbox fills; the flood starts once the rows are in,
			# the moment the drain's clock starts and the relay
			# goes on, so that it lands inside the drain.
			nice -n "${FLOOD_NICE:-19}" bash -c "$(declare -f flood)
				until [ \"\$(psql -XAtq '$URL' -c 'SELECT count(*) > 0 FROM pgoutbox.outbox')\" = t ]; do sleep 0.005; done
				until curl -sf http://127.0.0.1:$PORT/healthz >/dev/null; do sleep 0.005; done; date +%s.%N >$TMP/flood.t0
				TMP=$TMP FLOOD_CLIENT=$FLOOD_CLIENT flood $target
				date +%s.%N >$TMP/flood.t1" &
			FLOOD=$!
		fi
		"$BENCH" drain --db "$URL" --events "$N" --relays 1 --repeat 1 --timeout 120 --warm \
			--relay-cmd "$RELAY" --json "$TMP/$mode.jsonl" --label "$mode" --relay-log "$TMP/relay.log" >"$TMP/drain.txt"
		d1=$(date +%s.%N) # the drain's end, plus the relay's stop
		rate=$(python3 -c 'import json,sys; print([r for r in map(json.loads, open(sys.argv[1])) if r["metric"] == "events_per_s"][-1]["value"])' "$TMP/$mode.jsonl")
		extra=
		if [ $mode != quiet ]; then
			wait "$FLOOD" || { echo "metrics-flood.sh: the flood failed: if it outlasted the drain (the relay stops at its end), give more events than $N" >&2; exit 1; }
			FLOOD=
			read -r done secs p50 p99 <"$TMP/flood.out"
			# When the flood ran, in the drain's seconds (its start
			# taken as its end less N / rate; the relay's stop, a few
			# ms, counts as drain here).
			span=$(python3 -c "
d = $N / $rate; s = $d1 - d
print('%.2f-%.2f s of the drain\'s %.2f s' % ($(cat $TMP/flood.t0) - s, $(cat $TMP/flood.t1) - s, d))")
			extra=" | flood: $done requests in ${secs} s ($(python3 -c "print(round($done / $secs))")/s), p50 ${p50} ms, p99 ${p99} ms, at $span"
			echo "$secs" >>"$TMP/flood_secs"
		fi
		printf 'round %d %-9s: %8.0f events/s%s\n' "$r" "$mode" "$rate" "$extra"
		echo "$rate" >>"$TMP/$mode.rates"
	done
done
python3 - "$TMP/quiet.rates" "$TMP/flood.rates" "$TMP/bystander.rates" <<'PY'
import statistics, sys
q, f, b = (statistics.median(float(x) for x in open(a)) for a in sys.argv[1:4])
slow = 100 * (q - f) / q
print(f"median drain: quiet {q:,.0f} events/s, under the flood {f:,.0f} events/s: "
      f"{slow:+.1f} % slower (target <= 5 %){'' if slow <= 5 else '  MISSED'}")
print(f"the same flood at the bystander: {b:,.0f} events/s, {100 * (q - b) / q:+.1f} % slower: "
      f"the client's and the kernel's share; the relay's endpoint adds {100 * (b - f) / q:+.1f} % of the quiet drain")
PY

# What a scrape costs the relay itself: its CPU time (utime + stime) over
# 2,000 scrapes of an idle relay, apart from the client's share of the
# same two cores that slows the drain above.
$RELAY --db "$URL" >/dev/null 2>"$TMP/idle.log" &
rpid=$!
until curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null; do sleep 0.05; done
c0=$(cpu_s "$rpid")
flood "$PORT" 2000 "$TMP/idle.out"
c1=$(cpu_s "$rpid")
kill -TERM "$rpid"; wait "$rpid" || true
read -r done secs p50 p99 <"$TMP/idle.out"
python3 -c "
import sys
c = float(sys.argv[2]) - float(sys.argv[1])
print(f'idle relay: 2000 scrapes in {float(sys.argv[3]):.2f} s cost the relay {1000 * c:.0f} ms of CPU = {1e6 * c / 2000:.0f} us a scrape (p50 {sys.argv[4]} ms, p99 {sys.argv[5]} ms)')
" "$c0" "$c1" "$secs" "$p50" "$p99"
