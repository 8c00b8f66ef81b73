# The http sink's verdicts against a receiver told to fail
# (tests/http/receiver.js, every request verified with standardwebhooks):
#  - 500s: failed attempts with the status and the body's first bytes,
#    the same webhook-id on every try, then a dead letter;
#  - 429 with Retry-After: 2: no attempt spent, the next request not
#    before 2 s (measured at the receiver);
#  - 503 for a while: no attempt spent, nothing dead, all delivered after;
#  - 410: dead letters at once, "the endpoint is disabled" in the log and
#    in `pgoutbox status`;
#  - a response slower than sink.http_timeout: a failed attempt;
#  - connection refused: no attempt spent, delivered once it listens;
#  - the receiver killed (-9) mid-drain: nothing lost;
#  - SIGTERM to the relay with the receiver stopped (SIGSTOP) and requests
#    in flight: exit 0 at relay.drain_timeout, the events back untouched.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../http.sh"
trap 'cleanup_pids; [ -z "${HTTP_PID:-}" ] || kill -CONT "$HTTP_PID" 2>/dev/null; http_stop' EXIT

http_start "$T_TMP/recv"
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=300ms PGOUTBOX_RELAY_MAX_ATTEMPTS=4
send() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT '$1', 'x', jsonb_build_object('i', i) FROM generate_series(1, $2) i RETURNING id" | sort -n; }
dead() { q "SELECT count(*) FROM pgoutbox.dead_letters WHERE topic = '$1'"; }
# Requests (all, or those answered $2) for the event id $1.
reqs_for() { python3 -c 'import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    n += r["id"] == sys.argv[2] and (sys.argv[3] == "" or r["status"] == int(sys.argv[3]))
print(n)' "$HTTP_DIR/requests.ndjson" "$1" "${2:-}"; }
delivered() { http_missing "$1"; }

start_relay "$T_TMP/relay" --sink http --http-url "$HTTP_URL/{topic}" --http-timeout 1s \
	--http-concurrency 4 --poll-interval 200ms --batch 50
relay=$RELAY_PID

# 1. 500s: a transient one is retried with the same webhook-id; a
# permanent one ends as a dead letter with the status and the body.
hctl '{"status": 500, "count": -1, "body": "boom: the disk is on fire", "path": "/poison"}'
poison=$(send poison 1)
wait_until 20 '[ "$(dead poison)" = 1 ]'
[ "$(reqs_for "$poison" 500)" = 4 ] || fail "expected 4 tries (max_attempts) of the poison event, got $(reqs_for "$poison" 500)"
err=$(q "SELECT last_error FROM pgoutbox.dead_letters WHERE topic = 'poison'")
[[ $err == *"500: boom: the disk is on fire"* ]] || fail "dead letter error lacks the status and body: $err"
hctl '{"status": 500, "count": 2, "path": "/flaky"}'
flaky=$(send flaky 1)
wait_until 20 '[ "$(delivered <(echo "$flaky"))" = 0 ]'
[ "$(reqs_for "$flaky")" = 3 ] || fail "expected 3 requests with webhook-id $flaky, got $(reqs_for "$flaky")"
note "500: poison dead after 4 tries ($err); flaky delivered on try 3, same webhook-id"

# 2. 429 with Retry-After: 2.
hctl '{"status": 429, "count": 1, "retry_after": "2"}'
ra=$(send ra 1)
wait_until 10 '[ "$(reqs_for "$ra" 429)" = 1 ]'
wait_until 10 'grep -q "sink down" "$T_TMP/relay.log"'
[ "$(q "SELECT attempts FROM pgoutbox.outbox WHERE id = $ra")" = 0 ] || fail "a 429 spent an attempt"
wait_until 20 '[ "$(delivered <(echo "$ra"))" = 0 ]'
gap=$(python3 -c 'import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
t = [r for r in t if r["id"] == sys.argv[2]]
print(t[1]["t"] - t[0]["t"])' "$HTTP_DIR/requests.ndjson" "$ra")
[ "$gap" -ge 2000 ] || fail "Retry-After: 2 not honoured: the next request came after $gap ms"
[ "$gap" -lt 4000 ] || fail "Retry-After: 2: the next request came only after $gap ms"
note "429 Retry-After 2: next request after $gap ms, no attempt spent"

# 3. 503 for a while: no attempt spent.
hctl '{"status": 503, "count": -1}'
sent=$(send outage 20)
wait_until 20 '[ "$(grep -c "\"status\":503" "$HTTP_DIR/requests.ndjson")" -ge 3 ]'
[ "$(q "SELECT max(attempts) FROM pgoutbox.outbox WHERE topic = 'outage'")" = 0 ] || fail "503s spent attempts"
hctl '{"reset": true}'
wait_until 20 '[ "$(delivered <(echo "$sent"))" = 0 ]'
[ "$(dead outage)" = 0 ] || fail "503s made dead letters"
note "503: $(grep -c '"status":503' "$HTTP_DIR/requests.ndjson") refused requests, no attempt spent, 20 of 20 delivered after"

# 4. 410 Gone: dead letters at once, the endpoint reported disabled.
hctl '{"gone": "/gone"}'
send gone 3 >/dev/null
ok=$(send fine 5)
wait_until 20 '[ "$(dead gone)" = 3 ]'
wait_until 20 '[ "$(delivered <(echo "$ok"))" = 0 ]'
[ "$(q "SELECT max(attempts) FROM pgoutbox.dead_letters WHERE topic = 'gone'")" -le 1 ] || fail "410 was retried"
grep -q "410 Gone: the endpoint is disabled" "$T_TMP/relay.log" || fail "410 not in the relay log"
"$PGO_BIN" status >"$T_TMP/status" 2>&1 || fail "status failed"
grep -q "410 Gone: the endpoint is disabled" "$T_TMP/status" || { cat "$T_TMP/status" >&2; fail "410 not in pgoutbox status"; }
note "410: 3 dead letters at once, endpoint disabled in the log and status"

# 5. Slower than sink.http_timeout: failed attempts, then a dead letter.
hctl '{"delay_ms": 2500, "count": -1, "path": "/slow"}'
send slow 1 >/dev/null
wait_until 30 '[ "$(dead slow)" = 1 ]'
err=$(q "SELECT last_error FROM pgoutbox.dead_letters WHERE topic = 'slow'")
[[ $err == *"no response within 1000 ms"* ]] || fail "timeout dead letter: $err"
hctl '{"reset": true}'
note "timeout: $err"

# 6. Connection refused: no attempt spent, delivered once it listens.
ups=$(grep -c "sink up again" "$T_TMP/relay.log")
http_stop
sent=$(send refused 20)
wait_until 20 'grep -q "Failed to connect\|Connection refused\|Could not connect" "$T_TMP/relay.log"'
# Tried again at least twice after the outage began: attempts stay 0.
wait_until 20 '[ "$(grep -c "sink up again" "$T_TMP/relay.log")" -ge $((ups + 2)) ]'
[ "$(q "SELECT max(attempts) FROM pgoutbox.outbox WHERE topic = 'refused'")" = 0 ] || fail "connection refused spent attempts"
http_start_again
wait_until 30 '[ "$(delivered <(echo "$sent"))" = 0 ]'
[ "$(dead refused)" = 0 ] || fail "connection refused made dead letters"
note "connection refused: no attempt spent, 20 of 20 delivered once it listens"

# 7. The receiver killed mid-drain: nothing lost.
hctl '{"delay_ms": 20, "count": -1}'
sent=$(send kill 400)
wait_until 20 '[ "$(grep -c "\"path\":\"/kill\"" "$HTTP_DIR/requests.ndjson")" -ge 60 ]'
http_kill9
[ "$(pending)" -gt 0 ] || fail "the drain finished before the kill: nothing tested"
left=$(pending)
http_start_again
wait_until 40 '[ "$(pending)" = 0 ]'
lost=$(delivered <(echo "$sent"))
[ "$lost" = 0 ] || fail "$lost events lost after the receiver was killed"
[ "$(dead kill)" = 0 ] || fail "the kill made dead letters"
note "kill -9 of the receiver with $left pending: 400 of 400 delivered"
grep -q '"valid":false' "$HTTP_DIR/requests.ndjson" && fail "a request did not verify"
kill -0 "$relay" || fail "the relay exited"
stop_relay "$relay"

# 8. SIGTERM while requests are in flight (the receiver stopped with
# SIGSTOP, its sockets holding the requests unread): the relay abandons
# the transfers and rolls the batches back at its drain deadline, exits 0,
# and spends no attempt; the next relay delivers them.
PGOUTBOX_RELAY_DRAIN_TIMEOUT=1s start_relay "$T_TMP/relay2" --sink http --http-url "$HTTP_URL/{topic}" --http-timeout 20s \
	--http-concurrency 4 --poll-interval 200ms --batch 50
relay=$RELAY_PID
warm=$(send warm 5)
wait_until 20 '[ "$(delivered <(echo "$warm"))" = 0 ]'
kill -STOP "$HTTP_PID"
sent=$(send stall 100)
wait_until 20 '[ "$(unread "$HTTP_PORT")" -gt 0 ]'
stop_relay "$relay"
kill -CONT "$HTTP_PID"
[ "$(pending)" = 100 ] || fail "expected the 100 events back in the outbox, found $(pending)"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "a stop with requests in flight spent attempts"
start_relay "$T_TMP/relay3" --sink http --http-url "$HTTP_URL/{topic}" --http-concurrency 4 --poll-interval 200ms --batch 50
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
lost=$(delivered <(echo "$sent"))
[ "$lost" = 0 ] || fail "$lost events lost after a stop with requests in flight"
[ "$(dead stall)" = 0 ] || fail "a stop with requests in flight made dead letters"
grep -q '"valid":false' "$HTTP_DIR/requests.ndjson" && fail "a request did not verify"
note "SIGTERM with requests in flight and the receiver stopped: exit 0, 100 back untouched, then 100 of 100 delivered"
