# A Redis that is not there, refuses the password or never answers when
# the relay starts: the relay keeps running and retrying (the events wait
# in the outbox), its loop never blocks, and it delivers once Redis is
# reachable.  What retrying cannot fix is refused at start with exit 2.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=500ms PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
send_n() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', jsonb_build_object('i', i) FROM generate_series(1, $1) i"; }

# 1. Nothing listens on the port yet.
REDIS_PORT=$(redis_free_port)
send_n 100
start_relay "$T_TMP/relay" --sink redis --redis "redis://127.0.0.1:$REDIS_PORT" --poll-interval 300ms
relay=$RELAY_PID
wait_until 10 'grep -q "cannot reach" "$T_TMP/relay.log"'
sleep 1
kill -0 "$relay" || fail "the relay exited with Redis unreachable"
[ "$(pending)" = 100 ] || fail "events left the outbox while Redis was unreachable"
# An unreachable sink is not the events' fault: they spend no attempt,
# and the relay backs off (a few tries in the log, not a busy loop).
tries=$(q 'SELECT max(attempts) FROM pgoutbox.outbox')
[ "$tries" = 0 ] || fail "events spent $tries attempts while Redis was unreachable"
grep -q 'sink unavailable' "$T_TMP/relay.log" || fail "no 'sink unavailable' in the log"
redis_start "$T_TMP/redis"
wait_until 20 '[ "$(pending)" = 0 ]'
[ "$(rcli XLEN pgoutbox:t)" = 100 ] || fail "expected 100 entries once Redis came"
stop_relay "$relay"
note "unreachable at start: batches rolled back without spending attempts, all 100 delivered once Redis came"

# 2. A wrong password: logged, retried, never an exit.
redis_stop
REDIS_ARGS=(--requirepass right)
redis_start_again
send_n 10
start_relay "$T_TMP/wrongpw" --sink redis --redis "redis://:wrong@127.0.0.1:$REDIS_PORT"
wait_until 10 'grep -q "AUTH refused: WRONGPASS" "$T_TMP/wrongpw.log"'
grep -q ':wrong@' "$T_TMP/wrongpw.log" && fail "the password appears in the log"
sleep 0.5
kill -0 "$RELAY_PID" || fail "the relay exited on a refused password"
[ "$(pending)" = 10 ] || fail "events left the outbox with the password refused"
stop_relay "$RELAY_PID"

# 3. A server that accepts connections but never answers: the connect
# timeout and the reply timeout end each attempt; SIGTERM still works.
python3 -c '
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)' >"$T_TMP/silent.port" &
PIDS+=($!)
wait_until 5 '[ -s "$T_TMP/silent.port" ]'
silent=$(cat "$T_TMP/silent.port")
PGOUTBOX_SINK_REDIS_CONNECT_TIMEOUT=300ms start_relay "$T_TMP/silent" --sink redis \
	--redis "redis://:pw@127.0.0.1:$silent" --redis-timeout 300ms
wait_until 10 'grep -q "no reply to AUTH/SELECT in time" "$T_TMP/silent.log"'
start=$SECONDS
stop_relay "$RELAY_PID"
[ $((SECONDS - start)) -le 2 ] || fail "SIGTERM took $((SECONDS - start)) s with a silent Redis"
[ "$(pending)" = 10 ] || fail "events left the outbox with a silent Redis"
start_relay "$T_TMP/silent2" --sink redis --redis "redis://127.0.0.1:$silent" --redis-timeout 300ms
wait_until 10 'grep -q "no reply within 300 ms" "$T_TMP/silent2.log"'
stop_relay "$RELAY_PID"
[ "$(pending)" = 10 ] || fail "events left the outbox with a silent Redis"

# 4. What no retry fixes: exit 2 with the reason, nothing sent.
expect_usage() {
	local want=$1; shift
	local rc=0
	"$PGO_BIN" relay --sink redis "$@" >"$T_TMP/bad.out" 2>"$T_TMP/bad.err" || rc=$?
	[ "$rc" = 2 ] || fail "relay $* exited $rc, not 2"
	grep -q "$want" "$T_TMP/bad.err" || fail "relay $*: no \"$want\" in: $(cat "$T_TMP/bad.err")"
}
expect_usage 'TLS' --redis "rediss://127.0.0.1:$REDIS_PORT"
expect_usage 'must start with redis://' --redis "http://127.0.0.1:6379"
expect_usage 'port must be a number' --redis "redis://127.0.0.1:99999"
expect_usage 'database number' --redis "redis://127.0.0.1:6379/x"
expect_usage 'unknown placeholder' --redis "redis://127.0.0.1:$REDIS_PORT" --redis-stream 'x:{tpoic}'
expect_usage 'must be less than' --redis "redis://127.0.0.1:$REDIS_PORT" --redis-wait 2m
[ "$(pending)" = 10 ] || fail "a refused start touched the outbox"
