# The http sink in ordered mode with 8 requests in flight: producers bump
# 200 aggregates' versions and send an event per bump; the receiver
# (verifying every signature with standardwebhooks) answers with random
# delays and some 500s, so requests overtake each other, yet per key the
# versions arrive in order (tests/order_check.py on what it answered 2xx),
# none lost.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../http.sh"
trap 'cleanup_pids; http_stop' EXIT
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

SECRET=whsec_$(openssl rand -base64 32)
http_start "$T_TMP/recv" VERIFY_SECRETS="$SECRET"
t_db
make_aggregates
export PGOUTBOX_SINK_HTTP_SECRET=$SECRET PGOUTBOX_RELAY_RETRY_BASE=50ms PGOUTBOX_RELAY_RETRY_MAX=200ms \
	PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
hctl '{"status": 200, "count": -1, "jitter_ms": 5}'
start_relay "$T_TMP/relay" --sink http --http-url "$HTTP_URL/agg" --http-concurrency 8 \
	--mode ordered --in-flight 2 --batch 100 --poll-interval 200ms
PRODUCERS=()
start_producer 6 0.002
start_producer 6 0.002
# A few 500s in the middle: retried events must not be overtaken.
wait_until 20 '[ "$(http_requests)" -ge 200 ]'
hctl '{"status": 500, "count": 30, "jitter_ms": 5}'
wait_until 20 '[ "$(grep -c "\"status\":500" "$HTTP_DIR/requests.ndjson")" -ge 30 ]'
hctl '{"status": 200, "count": -1, "jitter_ms": 5}'
for p in "${PRODUCERS[@]}"; do wait "$p"; done
wait_until 40 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
python3 "$ROOT/tests/order_check.py" "$HTTP_DIR/events.ndjson" "$DATABASE_URL" >&2 ||
	fail "per-key order broken at the receiver"
grep -q '"valid":false' "$HTTP_DIR/requests.ndjson" && fail "a request did not verify"
note "$(grep -c '"status":200' "$HTTP_DIR/requests.ndjson") requests answered 200, $(grep -c '"status":500' "$HTTP_DIR/requests.ndjson") answered 500"
