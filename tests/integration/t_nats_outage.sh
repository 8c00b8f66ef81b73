# The nats sink through crashes: nats-server killed -9 and restarted in the
# middle of a drain (nothing lost, each event id once in the stream: the
# server's dedup drops what the relay sends again), a relay killed -9 in
# the middle of a drain (the next relay sends the unsettled batch again:
# still each id once), and a server that is down while events keep coming
# (they wait in the outbox without spending attempts).
# serial: failed once each in a parallel run, never alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../nats.sh"
trap 'cleanup_pids; [ -z "${NATS_PID:-}" ] || kill -CONT "$NATS_PID" 2>/dev/null; nats_stop' EXIT
nats_start "$T_TMP/nats"
js create OUTBOX 'ev.>'
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=1s PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
send_n() { q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 'ev.$1', 'k' || (i % 50), 'x', jsonb_build_object('i', i) FROM generate_series(1, $2) i"; }
# The stream's distinct event ids and its message count.
check_once() {
	js dump OUTBOX >"$T_TMP/dump.jsonl"
	python3 - "$T_TMP/dump.jsonl" "$1" "$2" <<'PY'
import json, sys
ids = [json.loads(l)['headers']['Nats-Msg-Id'] for l in open(sys.argv[1])
       if json.loads(l)['subject'] == sys.argv[2]]
n = int(sys.argv[3])
if len(set(ids)) != n:
    sys.exit(f'{sys.argv[2]}: {len(set(ids))} distinct ids of {n}')
if len(ids) != n:
    sys.exit(f'{sys.argv[2]}: {len(ids) - n} ids stored twice')
PY
}

# 1. kill -9 of nats-server in the middle of a drain.
send_n a 20000
start_relay "$T_TMP/relay" --sink nats --nats-url "$NATS_URL" --poll-interval 500ms
relay=$RELAY_PID
wait_until 30 '[ "$(js info OUTBOX)" -gt 3000 ]'
nats_kill9
left=$(pending)
[ "$left" -gt 0 ] || fail "the drain finished before the kill: nothing tested"
sleep 0.5
kill -0 "$relay" || fail "the relay exited when nats-server died"
nats_start_again
wait_until 60 '[ "$(pending)" = 0 ]'
check_once ev.a 20000 || fail "after kill -9 of nats-server"
grep -q "lost 127.0.0.1:$NATS_PORT" "$T_TMP/relay.log" || fail "the outage is not in the relay log"
note "kill -9 of nats-server with $left pending: 20000 of 20000, each id once"

# 2. The server down while events come: they wait, no attempt is spent.
nats_stop
send_n b 300
sleep 1
[ "$(pending)" = 300 ] || fail "expected 300 events waiting in the outbox, found $(pending)"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "events spent attempts while nats-server was down"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters during the outage"
nats_start_again
wait_until 30 '[ "$(pending)" = 0 ]'
check_once ev.b 300 || fail "after the outage"
kill -0 "$relay" || fail "the relay exited"
stop_relay "$relay"
note "nats-server down: 300 events waited without attempts, delivered once"

# 3. kill -9 of the relay in the middle of a drain.
send_n c 20000
start_relay "$T_TMP/relay2" --sink nats --nats-url "$NATS_URL" --batch 1000
wait_until 30 '[ "$(js info OUTBOX)" -gt 25000 ]'
kill -9 "$RELAY_PID"
wait "$RELAY_PID" 2>/dev/null || true
left=$(pending)
[ "$left" -gt 0 ] || fail "the drain finished before the relay's kill: nothing tested"
start_relay "$T_TMP/relay3" --sink nats --nats-url "$NATS_URL" --batch 1000
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
check_once ev.c 20000 || fail "after kill -9 of the relay"
note "kill -9 of the relay with $left pending: 20000 of 20000, each id once"

# 4. A server that stops answering (SIGSTOP) with the connection open: no
# PubAck within sink.nats_timeout makes the batch unavailable (rolled
# back, no attempt spent); once it answers again, each event lands once.
start_relay "$T_TMP/relay4" --sink nats --nats-url "$NATS_URL" --nats-timeout 500ms --poll-interval 300ms
relay=$RELAY_PID
send_n d 10
wait_until 20 '[ "$(pending)" = 0 ]'
kill -STOP "$NATS_PID"
send_n d 200
wait_until 20 'grep -q "no PubAck" "$T_TMP/relay4.log"'
[ "$(pending)" = 200 ] || { kill -CONT "$NATS_PID"; fail "events left the outbox while the server was stopped: $(pending) of 200 wait"; }
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || { kill -CONT "$NATS_PID"; fail "attempts spent on a silent server"; }
kill -CONT "$NATS_PID"
wait_until 30 '[ "$(pending)" = 0 ]'
check_once ev.d 210 || fail "after the server stopped answering"
kill -0 "$relay" || fail "the relay exited"
stop_relay "$relay"
note "a silent server: batch unavailable after 500 ms without a PubAck, then 210 of 210 once"

# 5. SIGTERM while PubAcks are awaited (the server stopped with SIGSTOP, its
# socket holding the publishes unread): the relay gives the batch back at
# its drain deadline and exits 0.  cnats owns a message until its PubAck
# handler runs and its library is gone after the sink stops: freeing such
# messages again there was a use after free (CI, 2026-12-02: exit 86 in
# natsMutex_Lock).
PGOUTBOX_RELAY_DRAIN_TIMEOUT=1s start_relay "$T_TMP/relay5" --sink nats --nats-url "$NATS_URL" --nats-timeout 30s
relay=$RELAY_PID
send_n e 10
wait_until 20 '[ "$(pending)" = 0 ]'
kill -STOP "$NATS_PID"
send_n e 100
wait_until 20 '[ "$(unread "$NATS_PORT")" -gt 0 ]'
stop_relay "$relay"
kill -CONT "$NATS_PID"
[ "$(pending)" = 100 ] || fail "expected the 100 events back in the outbox, found $(pending)"
start_relay "$T_TMP/relay6" --sink nats --nats-url "$NATS_URL"
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
check_once ev.e 110 || fail "after a stop with PubAcks awaited"
note "SIGTERM with PubAcks awaited: the batch rolled back at the drain deadline, exit 0, then 110 of 110 once"
