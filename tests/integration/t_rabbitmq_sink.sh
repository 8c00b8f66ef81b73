# The rabbitmq sink against a real rabbitmq-server (one node for the whole
# file), checked with amqplib as the consumer:
#  1. every event reaches its bound durable queue (classic and quorum) once,
#     with exact properties (message_id = id, type, timestamp, content_type,
#     delivery_mode 2, app_id) and headers (traceparent, ...), and with
#     sink.amqp_format = cloudevents the cloudEvents_* headers;
#  2. ordered mode into a single-active-consumer queue keeps per-key order;
#  3. a queue with x-overflow reject-publish nacks: the events are retried
#     with backoff and all arrive once the consumer makes room;
#  4. a memory alarm (connection.blocked) spends no attempt, loses nothing;
#  5. wrong credentials: a clear error, no attempt spent, nothing lost;
#  6. an unroutable routing key (mandatory, basic.return) dead-letters with
#     the broker's reason;
#  7. an exchange that does not exist (channel error 404): retried with the
#     broker's text, delivered once fixed;
#  8. amqps:// with our CA and a client certificate delivers; without the
#     certificate it is an outage.  config show never prints the password.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../rabbitmq.sh"
. "$(dirname "$0")/../rabbitmq_defs.sh"
trap 'cleanup_pids; rabbit_kill9' EXIT
amqplib_ready
rabbit_defs "$T_TMP/defs.json"
# A TLS listener that wants a client certificate, all signed by a CA of
# our own (for 8).
tls=$T_TMP/tls
mkdir -p "$tls"
(
	cd "$tls"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=pgo-test-ca -keyout ca.key -out ca.pem
	for who in server client; do
		openssl req -newkey rsa:2048 -nodes -subj "/CN=$who" -keyout $who.key -out $who.csr
		printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >$who.ext
		openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out $who.pem -extfile $who.ext
	done
) >"$T_TMP/openssl.log" 2>&1 || { cat "$T_TMP/openssl.log" >&2; fail "openssl"; }
TLS_PORT=$(rabbit_free_port)
RABBIT_EXTRA_CONF="listeners.ssl.default = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $tls/ca.pem
ssl_options.certfile = $tls/server.pem
ssl_options.keyfile = $tls/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true"
rabbit_start "$T_TMP/rabbit" "$T_TMP/defs.json"
t_db
export PGTZ=UTC
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=500ms PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
RELAY_ARGS=(--sink rabbitmq --amqp-url "$RABBIT_URL" --amqp-exchange pgo --poll-interval 500ms)

# 1. Exact messages.
N=1000
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
   SELECT CASE WHEN i % 3 = 0 THEN 'users' ELSE 'orders' END,
          CASE WHEN i % 5 = 0 THEN NULL ELSE 'k' || (i % 17) END,
          'thing.happened',
          jsonb_build_object('i', i, 'text', 'quote \" and
newline, ünïcödé ✓'),
          CASE WHEN i % 2 = 0 THEN '{}'
               ELSE jsonb_build_object('traceparent', '00-' || lpad(i::text, 32, '0') || '-00f067aa0ba902b7-01', 'tenant', 't' || (i % 3)) END
   FROM generate_series(1, $N) i"
q "CREATE TABLE expected AS SELECT id, topic, key, type, payload::text AS payload,
   headers::text AS headers, replace(replace(created_at::text, ' ', 'T'), '+00', 'Z') AS created_at,
   floor(extract(epoch FROM created_at))::bigint AS ts FROM pgoutbox.outbox"
start_relay "$T_TMP/relay1" "${RELAY_ARGS[@]}" --batch 200
relay=$RELAY_PID
wait_until 60 '[ "$(pending)" = 0 ]'
grep -q "connected to 127.0.0.1:$RABBIT_PORT" "$T_TMP/relay1.log" || fail "no 'connected' line in the relay log"
amqp_drain q.orders >"$T_TMP/orders.jsonl"
amqp_drain q.users >"$T_TMP/users.jsonl"
psql -XAtq "$DATABASE_URL" -c "SELECT json_agg(e ORDER BY id) FROM expected e" >"$T_TMP/expected.json"
python3 - "$T_TMP" <<'PY' || fail "messages differ from the events (see above)"
import json, sys
tmp = sys.argv[1]
want = {e['id']: e for e in json.load(open(f'{tmp}/expected.json'))}
got = {}
for queue, topic in (('orders', 'orders'), ('users', 'users')):
    for line in open(f'{tmp}/{queue}.jsonl'):
        m = json.loads(line)
        i = int(m['message_id'])
        if i in got:
            sys.exit(f'event {i} twice')
        got[i] = m
        e = want.get(i)
        if e is None:
            sys.exit(f'message_id {i}: no such event')
        if e['topic'] != topic or m['routing_key'] != topic or m['exchange'] != 'pgo':
            sys.exit(f'event {i}: topic {e["topic"]} in queue {queue} via {m["exchange"]}/{m["routing_key"]}')
        exp = {'type': e['type'], 'timestamp': e['ts'], 'content_type': 'application/json',
               'delivery_mode': 2, 'app_id': 'pgoutbox'}
        for k, v in exp.items():
            if m[k] != v:
                sys.exit(f'event {i}: {k} {m[k]!r} != {v!r}')
        if json.loads(m['body']) != json.loads(e['payload']) or m['body'] != e['payload']:
            sys.exit(f'event {i}: body {m["body"]!r} != {e["payload"]!r}')
        h = json.loads(e['headers'])
        h.setdefault('topic', e['topic'])
        if e['key'] is not None:
            h.setdefault('key', e['key'])
        h.setdefault('created_at', e['created_at'])
        if m['headers'] != h:
            sys.exit(f'event {i}: headers {m["headers"]!r} != {h!r}')
if set(got) != set(want):
    sys.exit(f'{len(got)} messages, {len(want)} events; missing {sorted(set(want) - set(got))[:5]}')
print(f'{len(got)} messages, each once, exact')
PY
note "1: $N events, each once in q.orders (classic) / q.users (quorum), exact properties and headers"

# 2. Per-key order through a single-active-consumer queue (ordered mode is
# the relay's default): one transaction per event, keys interleaved.
for i in $(seq 1 300); do echo "SELECT pgoutbox.send('ordered', 'k$((i % 7))', 'step', '{\"seq\": $i}');"; done |
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null
wait_until 60 '[ "$(pending)" = 0 ]'
amqp_drain q.sac >"$T_TMP/sac.jsonl"
python3 - "$T_TMP/sac.jsonl" <<'PY' || fail "per-key order broken in q.sac"
import json, sys
last, n = {}, 0
for line in open(sys.argv[1]):
    m = json.loads(line)
    k, seq = m['headers']['key'], json.loads(m['body'])['seq']
    if seq <= last.get(k, 0):
        sys.exit(f'key {k}: seq {seq} after {last[k]}')
    last[k] = seq
    n += 1
if n != 300:
    sys.exit(f'{n} of 300 messages')
PY
note "2: 300 events of 7 keys in per-key order through a single-active-consumer queue"

# 3. reject-publish: 5 fit, the rest are nacked and retried until the
# consumer makes room.
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'small', 'x', jsonb_build_object('i', i) FROM generate_series(1, 12) i"
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE last_error LIKE '"'"'%nacked%'"'"'")" -gt 0 ]'
q "SELECT DISTINCT last_error FROM pgoutbox.outbox WHERE last_error IS NOT NULL" >"$T_TMP/nack_err"
grep -q "reject-publish" "$T_TMP/nack_err" || fail "no clear nack reason: $(cat "$T_TMP/nack_err")"
: >"$T_TMP/small.jsonl"
wait_until 60 'amqp_drain q.small >>"$T_TMP/small.jsonl"; [ "$(pending)" = 0 ]'
amqp_drain q.small >>"$T_TMP/small.jsonl"
got=$(python3 -c 'import json,sys; print(len({json.loads(l)["message_id"] for l in open(sys.argv[1])}))' "$T_TMP/small.jsonl")
[ "$got" = 12 ] || fail "reject-publish: $got of 12 events arrived"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters after reject-publish"
note "3: reject-publish nacks retried with backoff: 12 of 12 arrived ($(head -c 120 "$T_TMP/nack_err")...)"

# 4. A memory alarm: connection.blocked is an outage, no attempt spent.
rctl set_vm_memory_high_watermark 0.0000001 >/dev/null
wait_until 30 'rctl eval "rabbit_alarm:get_alarms()." | qgrep memory'
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'orders', 'alarm', jsonb_build_object('i', i) FROM generate_series(1, 50) i"
wait_until 30 'grep -q "connection blocked by the broker" "$T_TMP/relay1.log"'
sleep 1 # the alarm lasts: whatever the relay does meanwhile must not spend attempts
[ "$(pending)" -gt 0 ] || fail "alarm: every event left the outbox while the broker was blocked"
[ "$(q "SELECT max(attempts) FROM pgoutbox.outbox")" = 0 ] || fail "alarm: attempts spent while blocked"
rctl set_vm_memory_high_watermark 0.4 >/dev/null
wait_until 60 '[ "$(pending)" = 0 ]'
amqp_drain q.orders >"$T_TMP/alarm.jsonl"
got=$(python3 -c 'import json,sys; print(len({json.loads(l)["message_id"] for l in open(sys.argv[1]) if json.loads(l)["type"] == "alarm"}))' "$T_TMP/alarm.jsonl")
[ "$got" = 50 ] || fail "alarm: $got of 50 events arrived"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters after the alarm"
note "4: memory alarm: blocked, no attempt spent, 50 of 50 arrived after it cleared"
stop_relay "$relay"

# 5. Wrong credentials.
start_relay "$T_TMP/relay_bad" --sink rabbitmq --amqp-url "amqp://relay:Wr0ngPw@127.0.0.1:$RABBIT_PORT/%2f" --amqp-exchange pgo --poll-interval 500ms
bad=$RELAY_PID
wait_until 30 'grep -q "ACCESS_REFUSED" "$T_TMP/relay_bad.log"'
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'orders', 'creds', jsonb_build_object('i', i) FROM generate_series(1, 10) i"
sleep 1 # a relay that cannot log in must leave the events alone meanwhile
[ "$(pending)" = 10 ] || fail "wrong credentials: $(pending) of 10 events left"
[ "$(q "SELECT max(attempts) FROM pgoutbox.outbox")" = 0 ] || fail "wrong credentials: attempts spent"
grep -q Wr0ngPw "$T_TMP/relay_bad.log" && fail "the password appears in the log"
stop_relay "$bad"
note "5: wrong credentials: $(grep -o 'ACCESS_REFUSED[^"]*' "$T_TMP/relay_bad.log" | head -1 | cut -c1-80)..."

# 6. Unroutable: returned (mandatory), retried, then dead-lettered with the
# reason; the CloudEvents headers ride along for the routable ones.
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) VALUES ('nowhere', 'a', 'lost', '{}'), ('nowhere', 'b', 'lost', '{}'), ('ce', 'c', 'ce.test', '{\"ce\": 1}')"
start_relay "$T_TMP/relay3" "${RELAY_ARGS[@]}" --max-attempts 2 --amqp-format cloudevents
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters WHERE topic = 'nowhere' AND last_error LIKE '%NO_ROUTE%'")" = 2 ] ||
	fail "unroutable events not dead-lettered with NO_ROUTE: $(q 'SELECT id, attempts, last_error FROM pgoutbox.dead_letters')"
amqp_drain q.ce >"$T_TMP/ce.jsonl"
python3 - "$T_TMP/ce.jsonl" <<'PY' || fail "CloudEvents headers wrong"
import json, sys
ms = [json.loads(l) for l in open(sys.argv[1])]
assert len(ms) == 1, ms
m = ms[0]; h = m['headers']
want = {'cloudEvents_specversion': '1.0', 'cloudEvents_id': m['message_id'], 'cloudEvents_source': '/ce',
        'cloudEvents_type': 'ce.test', 'cloudEvents_subject': 'c', 'cloudEvents_time': h['created_at']}
for k, v in want.items():
    assert h.get(k) == v, (k, h.get(k), v)
assert m['content_type'] == 'application/json'
PY
note "6: unroutable: $(q "SELECT last_error FROM pgoutbox.dead_letters LIMIT 1" | cut -c1-100)..."

# 7. An exchange that does not exist: the broker closes the channel (404);
# the events are retried with its text, and delivered once it is right.
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'orders', 'nx', jsonb_build_object('i', i) FROM generate_series(1, 3) i"
start_relay "$T_TMP/relay_nx" --sink rabbitmq --amqp-url "$RABBIT_URL" --amqp-exchange nosuch --poll-interval 500ms
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE attempts > 0 AND last_error LIKE '"'"'%NOT_FOUND%nosuch%'"'"'")" -gt 0 ]'
stop_relay "$RELAY_PID"
[ "$(pending)" = 3 ] || fail "missing exchange: $(pending) of 3 events left"
note "7: missing exchange: $(q "SELECT last_error FROM pgoutbox.outbox WHERE last_error IS NOT NULL LIMIT 1" | cut -c1-100)"
start_relay "$T_TMP/relay4" "${RELAY_ARGS[@]}"
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
got=$(amqp_drain q.orders | python3 -c 'import json,sys; print(len({json.loads(l)["message_id"] for l in sys.stdin if json.loads(l)["type"] == "nx"}))')
[ "$got" = 3 ] || fail "missing exchange: $got of 3 events arrived once it was fixed"

# 8. amqps:// with the CA and a client certificate; without the client
# certificate the broker refuses the handshake: an outage, nothing spent.
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'orders', 'tls', jsonb_build_object('i', i) FROM generate_series(1, 5) i"
PGOUTBOX_SINK_AMQP_CA=$tls/ca.pem start_relay "$T_TMP/relay_nocert" --sink rabbitmq --amqp-url "amqps://relay:s3cr3t@localhost:$TLS_PORT/%2f" --amqp-exchange pgo --poll-interval 500ms
wait_until 30 'grep -q "cannot reach localhost:$TLS_PORT" "$T_TMP/relay_nocert.log"'
stop_relay "$RELAY_PID"
[ "$(pending)" = 5 ] && [ "$(q "SELECT max(attempts) FROM pgoutbox.outbox")" = 0 ] || fail "TLS without a client certificate: events touched"
PGOUTBOX_SINK_AMQP_CA=$tls/ca.pem PGOUTBOX_SINK_AMQP_CERT=$tls/client.pem PGOUTBOX_SINK_AMQP_KEY=$tls/client.key \
	start_relay "$T_TMP/relay_tls" --sink rabbitmq --amqp-url "amqps://relay:s3cr3t@localhost:$TLS_PORT/%2f" --amqp-exchange pgo --poll-interval 500ms
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
grep -q "connected to localhost:$TLS_PORT" "$T_TMP/relay_tls.log" || fail "no TLS connection in the log"
got=$(amqp_drain q.orders | python3 -c 'import json,sys; print(len({json.loads(l)["message_id"] for l in sys.stdin if json.loads(l)["type"] == "tls"}))')
[ "$got" = 5 ] || fail "TLS: $got of 5 events arrived"
note "8: amqps:// with a client certificate: 5 of 5; without one: $(grep -o 'cannot reach.*' "$T_TMP/relay_nocert.log" | head -1 | cut -c1-90)"

"$PGO_BIN" config show --sink rabbitmq --amqp-url "$RABBIT_URL" >"$T_TMP/show" 2>&1 || true
grep -q '^amqp_url = ' "$T_TMP/show" || fail "config show has no amqp_url"
grep -q s3cr3t "$T_TMP/show" && fail "config show prints the password"
true
