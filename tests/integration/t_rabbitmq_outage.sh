# RabbitMQ and the relay fail under a drain into a durable queue with
# persistent messages, and nothing is lost: a clean broker restart, a
# kill -9 of the broker, and a kill -9 of the relay in the middle of a
# batch.  Every event arrives (counted with amqplib); the duplicates that
# at-least-once allows carry the same message_id and the same body.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../rabbitmq.sh"
. "$(dirname "$0")/../rabbitmq_defs.sh"
trap 'cleanup_pids; rabbit_kill9' EXIT
amqplib_ready
rabbit_defs "$T_TMP/defs.json"
rabbit_start "$T_TMP/rabbit" "$T_TMP/defs.json"
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=500ms PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
RELAY_ARGS=(--sink rabbitmq --amqp-url "$RABBIT_URL" --amqp-exchange pgo --poll-interval 500ms --batch 500 --mode concurrent)
N=8000
send_n() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'orders', '$1', jsonb_build_object('phase', '$1', 'i', i) FROM generate_series(1, $N) i"; }
queued() { amqp_count q.orders 2>/dev/null || echo 0; }

start_relay "$T_TMP/relay" "${RELAY_ARGS[@]}"
relay=$RELAY_PID

# 1. A clean restart of the broker during a drain.
send_n restart
wait_until 60 '[ "$(queued)" -gt 1000 ]'
rabbit_stop
left=$(pending)
[ "$left" -gt 0 ] || fail "restart: the drain finished before the stop: nothing tested"
kill -0 "$relay" || fail "the relay exited when RabbitMQ stopped"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "restart: attempts spent while RabbitMQ was down"
rabbit_start_again
wait_until 60 '[ "$(pending)" = 0 ]'
note "1: broker restarted with $left pending: drained after it came back"

# 2. kill -9 of the broker during a drain.
before=$(queued)
send_n kill9
wait_until 60 '[ "$(queued)" -gt $((before + 1000)) ]'
rabbit_kill9
left=$(pending)
[ "$left" -gt 0 ] || fail "kill -9: the drain finished before the kill: nothing tested"
rabbit_start_again
wait_until 60 '[ "$(pending)" = 0 ]'
note "2: broker killed -9 with $left pending: drained after it came back"

# 3. kill -9 of the relay in the middle of a batch.
before=$(queued)
send_n relay9
wait_until 60 '[ "$(queued)" -gt $((before + 500)) ]'
kill -9 "$relay"
wait "$relay" 2>/dev/null || true
left=$(pending)
[ "$left" -gt 0 ] || fail "relay kill -9: the drain finished before the kill: nothing tested"
start_relay "$T_TMP/relay2" "${RELAY_ARGS[@]}"
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
note "3: relay killed -9 with $left pending: drained by a new relay"

amqp_drain q.orders >"$T_TMP/all.jsonl"
q "SELECT count(*) FROM pgoutbox.dead_letters" | grep -qx 0 || fail "dead letters"
res=$(python3 - "$T_TMP/all.jsonl" "$N" <<'PY'

import json, sys
path, n = sys.argv[1], int(sys.argv[2])
by_id, total = {}, 0
for line in open(path):
    m = json.loads(line)
    total += 1
    body = m['body']
    if m['message_id'] in by_id and by_id[m['message_id']] != body:
        sys.exit(f'message_id {m["message_id"]}: two different bodies')
    by_id.setdefault(m['message_id'], body)
phases = {}
for body in by_id.values():
    b = json.loads(body)
    phases.setdefault(b['phase'], set()).add(b['i'])
for ph in ('restart', 'kill9', 'relay9'):
    got = len(phases.get(ph, ()))
    if got != n:
        sys.exit(f'{ph}: {got} of {n} events arrived')
print(f'{len(by_id)} events, {total} messages, {total - len(by_id)} duplicates (same message_id, same body)')
PY
) || fail "lost or inconsistent messages: $res"
note "$res"
