# A WAL queue's plain connection is made without blocking a fleet
# (docs/fleet.md).  One relay process serves two databases of one
# cluster: fwa's queue ev is captured through the WAL and reached
# through a TCP proxy; fwb's is a table queue, reached directly.  The
# relay opens fwa's plain connection when it first writes a dead letter.
# An event the sink refuses once (retried after relay.retry_base, 2 s),
# then for good, is in the relay when the proxy is stopped (SIGSTOP: the
# kernel accepts and ACKs, nothing answers); its dead letter then needs
# that connection, and connecting hangs for the 8 s of the stall
# (connect_timeout 30 s):
#  - probe events sent in fwb arrive within 2 s each (the loop goes on);
# then the proxy runs again: the dead letter is written once, fwa's next
# event follows it, and the slot is confirmed past everything.
# Failed with the blocking connect: the first probe took the stall.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../fleet_wal.sh"
fleet_wal_setup
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
FWA_PROXIED="host=127.0.0.1 port=$(cat "$T_TMP/proxy.port") user=postgres dbname=fwa"
# The sink: key "bad" is refused once (retried), then for good.
fleet_wal_sink 'if [ "$(wc -l < "$bad")" = 1 ]; then echo "retry $id not yet"; else echo "dead $id refused for good"; fi'
# Batches of one event: the one after the poison waits for its dead
# letter, not in its batch.
export PGOUTBOX_RELAY_RETRY_BASE=2s PGOUTBOX_RELAY_RETRY_MAX=2s PGOUTBOX_DATABASE_CONNECT_TIMEOUT=30s PGOUTBOX_RELAY_BATCH=1
fleet_wal_start "$FWA_PROXIED" "$(pg_url fwb)"

# The poison event and one after it; the proxy stops after its first
# refusal, before its second attempt.
STALL=8
BAD=$(send fwa bad 2)
send fwa a 3 >/dev/null
wait_until 10 '[ -s "$T_TMP/bad" ]'
kill -STOP "$PROXY"
stalled_at=$SECONDS
wait_until 10 '[ "$(wc -l < "$T_TMP/bad")" = 2 ]'
probes=$(probes_until $((stalled_at + STALL - 1)) "fwa's plain connection hung connecting")
[ "$(sql fwa "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] ||
	fail "a dead letter was written through a stopped proxy: nothing measured"
from fwa | qgrep '"n": 3}' && fail "fwa's event after the dead one was delivered before the dead letter was written"

# The proxy runs again: written once, then the rest in order.
kill -CONT "$PROXY"
fleet_wal_written "$BAD" 2
note "fwa's plain connection hung connecting for a ${STALL}-s stall: $(echo "$probes" | wc -l) probes on fwb, max $(max $probes) ms; then its dead letter written once, its next event after it"
