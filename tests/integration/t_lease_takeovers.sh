# pgoutbox_lease_takeovers_total counts leases taken over from another
# relay, not first grants nor leases moved between a relay's own
# connections (issue 44, item 8: 96 right after one relay started
# alone).  A relay alone: 0.  A second relay joins: it counts the shards
# the first gave up.  The first is killed: the second counts the shards
# it takes from the dead one.  A relay restarted under its own name takes
# its old leases back: not a takeover.
. "$(dirname "$0")/../lib.sh"
t_db
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PA=$(free_port)
PB=$(free_port)
sample() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" 'index($1, n "{") == 1 && !done { print $2; done = 1 }'; }
shards=$(q "SELECT shards FROM pgoutbox.queues WHERE name = 'outbox'")
ARGS=(--sink stdout --mode ordered --in-flight 4 --heartbeat 200ms --lease-timeout 2s --poll-interval 1s)

start_relay "$T_TMP/a" --name a --metrics-listen "127.0.0.1:$PA" "${ARGS[@]}"
a=$RELAY_PID
wait_until 20 '[ "$(sample $PA pgoutbox_shards_owned)" = "$shards" ]'
sleep 1 # a few more lease rounds
t=$(sample $PA pgoutbox_lease_takeovers_total)
[ "$t" = 0 ] || fail "relay a alone: $t takeovers, expected 0 (first grants and its connections' share-out)"

start_relay "$T_TMP/b" --name b --metrics-listen "127.0.0.1:$PB" "${ARGS[@]}"
b=$RELAY_PID
half=$((shards / 2))
wait_until 20 '[ "$(sample $PB pgoutbox_shards_owned)" = "$half" ] && [ "$(sample $PA pgoutbox_shards_owned)" = "$half" ]'
sleep 1
ta=$(sample $PA pgoutbox_lease_takeovers_total)
tb=$(sample $PB pgoutbox_lease_takeovers_total)
[ "$ta" = 0 ] || fail "relay a gave shards up: $ta takeovers, expected 0"
[ "$tb" = "$half" ] || fail "relay b joined: $tb takeovers, expected the $half shards relay a gave up"

kill -9 "$a"
wait "$a" 2>/dev/null || true
wait_until 30 '[ "$(sample $PB pgoutbox_shards_owned)" = "$shards" ]'
sleep 1
tb=$(sample $PB pgoutbox_lease_takeovers_total)
[ "$tb" = "$shards" ] || fail "relay a died: relay b counts $tb takeovers, expected $shards"

# Relay b restarted under its name: its own leases back, no takeover.
stop_relay "$b"
start_relay "$T_TMP/b2" --name b --metrics-listen "127.0.0.1:$PB" "${ARGS[@]}"
b=$RELAY_PID
wait_until 20 '[ "$(sample $PB pgoutbox_shards_owned)" = "$shards" ]'
sleep 1
t=$(sample $PB pgoutbox_lease_takeovers_total)
[ "$t" = 0 ] || fail "relay b restarted: $t takeovers of its own leases, expected 0"
stop_relay "$b"
note "alone 0, joining $half, after a kill -9 $shards, restarted under its name 0"
