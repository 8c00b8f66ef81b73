# The rabbitmq sink's vhost, against a real rabbitmq-server: a vhost the
# broker does not have is a misconfiguration, refused at start, where a
# broker that cannot be reached or a vhost the user may not use yet is an
# outage waited out.
#  1. amqp://...:PORT/ (a trailing slash: the empty vhost) exits 2 at
#     start, saying that /%2f is the vhost "/", without the password;
#  2. a vhost that does not exist (/nosuch) exits 2, naming it;
#  3. a vhost that exists but the user has no permission on is an outage
#     (permissions may be granted while it waits): the relay waits and
#     spends no attempt;
#  4. a broker that is not there at start is an outage: the relay waits;
#  5. the same relay with /%2f delivers.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../rabbitmq.sh"
. "$(dirname "$0")/../rabbitmq_defs.sh"
trap 'cleanup_pids; rabbit_kill9' EXIT
amqplib_ready
rabbit_defs "$T_TMP/defs.json"
rabbit_start "$T_TMP/rabbit" "$T_TMP/defs.json"
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=500ms
BASE="amqp://relay:s3cr3t@127.0.0.1:$RABBIT_PORT"
ARGS=(--sink rabbitmq --amqp-exchange pgo --poll-interval 200ms)

# Runs a relay that must refuse to start: exit 2 within 30 s (a relay
# that waits instead is killed by timeout: exit 124).
refused() {
	local what=$1 url=$2 rc=0
	timeout 30 "$PGO_BIN" relay "${ARGS[@]}" --amqp-url "$url" >/dev/null 2>"$T_TMP/$what.err" || rc=$?
	[ "$rc" = 2 ] || fail "$what: the relay exited $rc, not 2 (124: it waited): $(tail -n 3 "$T_TMP/$what.err")"
	grep -q s3cr3t "$T_TMP/$what.err" && fail "$what: the password appears in the message"
	return 0
}

q "INSERT INTO pgoutbox.outbox (topic, type, payload) VALUES ('orders', 'vhost', '{}')"

# 1. The empty vhost.
refused empty "$BASE/"
grep -q 'vhost is empty' "$T_TMP/empty.err" || fail "empty: the message does not say the vhost is empty: $(cat "$T_TMP/empty.err")"
grep -q '/%2f' "$T_TMP/empty.err" || fail "empty: the message does not give the fix (/%2f): $(cat "$T_TMP/empty.err")"
note "1: trailing slash: exit 2: $(grep -o 'sink.amqp_url.*' "$T_TMP/empty.err" | cut -c1-150)..."

# 2. A vhost that does not exist.
refused nosuch "$BASE/nosuch"
grep -q 'no vhost "nosuch"' "$T_TMP/nosuch.err" || fail "nosuch: the message does not name the vhost: $(cat "$T_TMP/nosuch.err")"
note "2: no such vhost: exit 2: $(grep -o 'sink.amqp_url.*' "$T_TMP/nosuch.err" | cut -c1-120)..."
[ "$(pending)" = 1 ] || fail "a refused relay touched the outbox"

# 3. A vhost without permission for the user: an outage until granted.
rctl add_vhost other >/dev/null
start_relay "$T_TMP/relay_perm" "${ARGS[@]}" --amqp-url "$BASE/other"
perm=$RELAY_PID
wait_until 30 'grep -q "NOT_ALLOWED" "$T_TMP/relay_perm.log"'
sleep 1
kill -0 "$perm" 2>/dev/null || fail "permission: the relay exited: $(tail -n 3 "$T_TMP/relay_perm.log")"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "permission: attempts spent"
stop_relay "$perm"
note "3: no permission on an existing vhost: waited, no attempt spent ($(grep -o 'NOT_ALLOWED[^"]*' "$T_TMP/relay_perm.log" | head -1 | cut -c1-70)...)"

# 4. No broker at start: an outage, not a refusal.
nobody=$(rabbit_free_port)
start_relay "$T_TMP/relay_none" "${ARGS[@]}" --amqp-url "amqp://relay:s3cr3t@127.0.0.1:$nobody/%2f"
none=$RELAY_PID
wait_until 30 'grep -q "cannot reach" "$T_TMP/relay_none.log"'
sleep 1
kill -0 "$none" 2>/dev/null || fail "no broker: the relay exited: $(tail -n 3 "$T_TMP/relay_none.log")"
stop_relay "$none"
note "4: no broker at start: the relay waits"

# 5. The vhost "/" delivers.
start_relay "$T_TMP/relay_ok" "${ARGS[@]}" --amqp-url "$BASE/%2f"
ok=$RELAY_PID
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$ok"
[ "$(amqp_count q.orders)" = 1 ] || fail "/%2f: $(amqp_count q.orders) messages in q.orders, not 1"
note "5: /%2f delivers"
