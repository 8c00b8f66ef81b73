# A real Prometheus scrapes a relay under load (metrics.listen, every
# second): the published counter it stores equals what Redis received, the
# pending gauge returns to 0, and `promtool check metrics` finds the
# scrape clean.  /readyz turns 503 with the reason when Redis or
# PostgreSQL stops and 200 again when they are back.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
command -v prometheus >/dev/null || fail "prometheus not installed (scripts/deps.sh installs it)"
PROM_PID=
# A cluster of its own: the test stops it.
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; [ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null; redis_stop; pg_stop' EXIT
redis_start "$T_TMP/redis"
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=1s PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
export PGOUTBOX_METRICS_INTERVAL=500ms PGOUTBOX_RELAY_RECONNECT_MAX=500ms
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MPORT=$(free_port)
PPORT=$(free_port)
M=http://127.0.0.1:$MPORT
send_n() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT '$1', 'x', jsonb_build_object('i', i) FROM generate_series(1, $2) i"; }
# HTTP status and body of a GET.
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
body_of() { curl -s "$1"; }
# A sample of the relay's own scrape ("" if absent).
sample() { body_of "$M/metrics" | awk -v n="$1" '!done && ($1 == n || index($1, n "{") == 1) { print $2; done = 1 }'; }

# A wrong address is refused at start, exit 2, with what to do.
rc=0
"$PGO_BIN" relay --sink stdout --metrics-listen 'nonsense' >/dev/null 2>"$T_TMP/bad.log" || rc=$?
[ "$rc" = 2 ] || fail "metrics.listen nonsense: exit $rc, expected 2"
grep -q 'metrics.listen "nonsense": expected host:port' "$T_TMP/bad.log" || fail "no reason for the bad address: $(cat "$T_TMP/bad.log")"

# Gauges read every 0.5 s (5 s by default), so the backlog below shows.
export PGOUTBOX_METRICS_INTERVAL=500ms
start_relay "$T_TMP/relay" --sink redis --redis "$REDIS_URL" --poll-interval 500ms \
	--metrics-listen "127.0.0.1:$MPORT" --mode concurrent --in-flight 2
wait_until 30 '[ "$(code_of $M/readyz)" = 200 ]'
[ "$(code_of $M/healthz)" = 200 ] || fail "/healthz: $(code_of $M/healthz)"
[ "$(code_of $M/nothing)" = 404 ] || fail "/nothing is not 404"
note "ready: $(body_of $M/readyz)"

# A second relay may not take the same address: refused, exit 2.
rc=0
"$PGO_BIN" relay --sink stdout --metrics-listen "127.0.0.1:$MPORT" >/dev/null 2>"$T_TMP/taken.log" || rc=$?
[ "$rc" = 2 ] || fail "a taken metrics.listen: exit $rc, expected 2"
grep -q 'cannot listen: Address already in use' "$T_TMP/taken.log" || fail "no reason for the taken address: $(cat "$T_TMP/taken.log")"

# Prometheus on a private port, scraping every second.
mkdir -p "$T_TMP/prom"
cat >"$T_TMP/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pgoutbox
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
prometheus --config.file="$T_TMP/prom/prometheus.yml" --storage.tsdb.path="$T_TMP/prom/data" \
	--web.listen-address="127.0.0.1:$PPORT" >"$T_TMP/prom/log" 2>&1 &
PROM_PID=$!
P=http://127.0.0.1:$PPORT
# One value of an instant query ("" while there is none).
promq() {
	curl -s --get "$P/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["data"]["result"]
except ValueError:  # not listening yet
    r = []
print(r[0]["value"][1] if r else "")'
}
wait_until 60 '[ "$(promq "up{job=\"pgoutbox\"}")" = 1 ]'
note "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') scrapes the relay"

# Load: 30,000 events in bursts while Prometheus scrapes.  Redis takes
# no write for the first 3 s, so the backlog lasts some scrapes: the relay
# drains 30,000 events in about a second, faster than the scrapes and the
# gauge's reads can be sure to see it.
rcli CLIENT PAUSE 3000 WRITE >/dev/null
for i in $(seq 30); do send_n "t$((i % 3))" 1000; done
wait_until 120 '[ "$(pending)" = 0 ]'
received=$(( $(rcli XLEN pgoutbox:t0) + $(rcli XLEN pgoutbox:t1) + $(rcli XLEN pgoutbox:t2) ))
[ "$received" -ge 30000 ] || fail "Redis has $received entries, expected at least 30000"
# Prometheus catches up within a few scrapes; its value must equal what
# Redis received (the relay publishes each event once here: no outage).
wait_until 30 '[ "$(promq "pgoutbox_events_published_total")" = "$received" ]'
wait_until 30 '[ "$(promq "pgoutbox_events_pending")" = 0 ]'
peak=$(promq 'max_over_time(pgoutbox_events_pending[5m])')
[ "${peak%.*}" -gt 0 ] || fail "the pending gauge never saw the backlog (max $peak)"
batches=$(promq 'pgoutbox_batch_duration_seconds_count')
acks=$(promq 'pgoutbox_commit_to_ack_seconds_count')
[ "$acks" = "$received" ] || fail "commit_to_ack observed $acks events, expected $received"
[ "${batches:-0}" -gt 0 ] || fail "no batch durations"
p99=$(promq 'histogram_quantile(0.99, sum by (le) (pgoutbox_commit_to_ack_seconds_bucket))')
note "prometheus: published $received = Redis entries, pending peak $peak -> 0, $batches batches, commit-to-ack p99 ${p99}s"

# Every query of the Grafana dashboard is valid PromQL for this
# Prometheus, and those on the relay's metrics return data.
python3 - "$(dirname "$0")/../../contrib/grafana/pgoutbox.json" "$P" >"$T_TMP/grafana.txt" 2>&1 <<'PY' || fail "dashboard queries: $(cat "$T_TMP/grafana.txt")"
import json, sys, urllib.parse, urllib.request
dash, prom = json.load(open(sys.argv[1])), sys.argv[2]
n = empty = 0
for panel in dash["panels"]:
    for t in panel["targets"]:
        q = (t["expr"].replace("$__rate_interval", "1m").replace("$__range", "5m")
             .replace('=~"$queue"', '=~".*"'))
        url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
        r = json.load(urllib.request.urlopen(url))
        assert r["status"] == "success", (panel["title"], q, r)
        n += 1
        # No worker, scheduler or consumer runs here, and a concurrent
        # relay holds no shards: only those panels may be empty.
        if not r["data"]["result"]:
            empty += 1
            assert panel["title"] in ("Shards owned", "Worker jobs / s", "Worker job duration",
                                      "Cron ticks", "Inbox consumers / s"), ("no data", panel["title"], q)
print(n, empty)
PY
read -r nq nempty < <(tail -1 "$T_TMP/grafana.txt")
note "grafana dashboard: $nq queries valid PromQL, the relay's $((nq - nempty)) return data"

# The scrape passes promtool's lint.
body_of "$M/metrics" >"$T_TMP/scrape.txt"
promtool check metrics <"$T_TMP/scrape.txt" >"$T_TMP/lint.txt" 2>&1 || fail "promtool check metrics: $(cat "$T_TMP/lint.txt")"
[ -s "$T_TMP/lint.txt" ] && fail "promtool check metrics complains: $(cat "$T_TMP/lint.txt")"
for name in pgoutbox_events_retried_total pgoutbox_events_dead_lettered_total \
	pgoutbox_lease_takeovers_total pgoutbox_sink_up pgoutbox_sink_outages_total pgoutbox_pg_connections \
	pgoutbox_pg_reconnects_total pgoutbox_oldest_due_event_age_seconds pgoutbox_dead_letters \
	pgoutbox_oldest_xmin_age_seconds pgoutbox_batches_total; do
	grep -q "^$name" "$T_TMP/scrape.txt" || fail "$name missing from the scrape"
done
grep -q '^pgoutbox_events_published_total{queue="outbox",sink="redis",relay="' "$T_TMP/scrape.txt" || fail "labels queue, sink, relay missing"
# A concurrent relay holds no shards: no gauge that could say "unowned".
grep -q '^pgoutbox_shards_owned' "$T_TMP/scrape.txt" && fail "pgoutbox_shards_owned from a concurrent relay"

# Redis stops: /readyz says 503 and why; back: 200.
redis_stop
send_n t0 5
wait_until 30 '[ "$(code_of $M/readyz)" = 503 ]'
why=$(body_of "$M/readyz")
grep -Eq '^sink redis (down|unavailable)' <<<"$why" || fail "/readyz reason does not name the sink: $why"
# /metrics is shared by the scrapes of 100 ms (docs/operations.md): one
# made just before the outage may still be served after /readyz turned.
wait_until 2 '[ "$(sample pgoutbox_sink_up)" = 0 ]'
[ "$(code_of $M/healthz)" = 200 ] || fail "/healthz failed while only Redis is down"
note "Redis stopped: /readyz 503 \"$why\""
redis_start_again
wait_until 30 '[ "$(code_of $M/readyz)" = 200 ]'
wait_until 30 '[ "$(pending)" = 0 ]'
# At least one; a Redis loading its AOF after the restart accepts the
# connection and then refuses (LOADING), and each such flap is one more.
[ "$(sample pgoutbox_sink_outages_total)" -ge 1 ] || fail "no outage counted"
note "Redis back: /readyz 200, outages $(sample pgoutbox_sink_outages_total)"

# PostgreSQL stops: 503 and why; back: 200.
pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
wait_until 30 '[ "$(code_of $M/readyz)" = 503 ]'
why=$(body_of "$M/readyz")
grep -q '^postgresql: connection' <<<"$why" || fail "/readyz reason does not name PostgreSQL: $why"
note "PostgreSQL stopped: /readyz 503 \"$why\""
pg_start_again
wait_until 60 '[ "$(code_of $M/readyz)" = 200 ]'
wait_until 2 '[ "$(sample pgoutbox_pg_reconnects_total)" -ge 1 ]'
note "PostgreSQL back: /readyz 200, reconnects $(sample pgoutbox_pg_reconnects_total)"

stop_relay "$RELAY_PID"
