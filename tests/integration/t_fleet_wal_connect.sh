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
unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
url() { pg_url "$1"; }
t_db fwa
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create ev --capture wal in fwa"
t_db fwb
"$PGO_BIN" queue create ev --kind outbox >/dev/null || fail "queue create ev in fwb"
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
FWA_PROXIED="host=127.0.0.1 port=$(cat "$T_TMP/proxy.port") user=postgres dbname=fwa"
sql() { psql -XAtq -v ON_ERROR_STOP=1 "$(url "$1")" -c "$2"; }
send() { sql "$1" "SELECT pgoutbox.send_to('ev', 't', '$2', 'x', '{\"n\": $3}')"; }
# Lines of database $1 delivered so far.
from() { grep -F "\"pgoutbox-source\": \"$1\"" "$OUT" || true; }
# A probe event sent in fwb: ms until delivered (3 s at most).
probe() {
	local id t0 t1
	t0=$(date +%s%N)
	id=$(send fwb probe 0)
	wait_until 3 'from fwb | qgrep "^{\"id\":$id,"'
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

# The sink: key "bad" is refused once (retried), then for good; the
# rest is appended to out.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/bash
while IFS= read -r line; do
	id=\${line#*\"id\":}; id=\${id%%,*}
	key=\${line#*\"key\":\"}; key=\${key%%\"*}
	if [ "\$key" = bad ]; then
		echo "\$id" >> "$T_TMP/bad"
		if [ "\$(wc -l < "$T_TMP/bad")" = 1 ]; then
			echo "retry \$id not yet"
		else
			echo "dead \$id refused for good"
		fi
	else
		echo "\$line" >> "$T_TMP/out"
	fi
done
SH
chmod +x "$T_TMP/sink.sh"
: >"$T_TMP/out"
OUT=$T_TMP/out
# Batches of one event: the one after the poison waits for its dead
# letter, not in its batch.
export PGOUTBOX_RELAY_RETRY_BASE=2s PGOUTBOX_RELAY_RETRY_MAX=2s PGOUTBOX_DATABASE_CONNECT_TIMEOUT=30s PGOUTBOX_RELAY_BATCH=1
start_relay "$T_TMP/r" --queue ev --sink exec --exec "$T_TMP/sink.sh" --db "$FWA_PROXIED" --db "$(url fwb)"
relay=$RELAY_PID
wait_until 30 'grep -q "streaming slot" "$T_TMP/r.log"'
send fwa a 1 >/dev/null
wait_until 10 'from fwa | qgrep "\"n\": 1}"'
[ "$(probe)" -le 2000 ] || fail "fwb's first probe"

# The poison event and one after it; the proxy stops after its first
# refusal, before its second attempt.
STALL=8
BAD=$(send fwa bad 2)
send fwa a 3 >/dev/null
wait_until 10 '[ -s "$T_TMP/bad" ]'
kill -STOP "$PROXY"
stalled_at=$SECONDS
wait_until 10 '[ "$(wc -l < "$T_TMP/bad")" = 2 ]'
probes=()
while [ $((SECONDS - stalled_at)) -lt $((STALL - 1)) ]; do
	ms=$(probe)
	[ "$ms" -le 2000 ] || fail "a probe on fwb took $ms ms while fwa's plain connection hung connecting (the loop was held up)"
	probes+=("$ms")
	sleep 0.3
done
[ "${#probes[@]}" -ge 3 ] || fail "only ${#probes[@]} probes while the proxy was stopped"
[ "$(sql fwa "SELECT count(*) FROM pgoutbox.dead_letters")" = 0 ] ||
	fail "a dead letter was written through a stopped proxy: nothing measured"
from fwa | qgrep '"n": 3}' && fail "fwa's event after the dead one was delivered before the dead letter was written"

# The proxy runs again: written once, then the rest in order.
kill -CONT "$PROXY"
wait_until 20 'from fwa | qgrep "\"n\": 3}"'
[ "$(sql fwa "SELECT id || ' ' || attempts || ' ' || last_error FROM pgoutbox.dead_letters")" = "$BAD 2 refused for good" ] ||
	fail "dead letters in fwa: $(sql fwa "SELECT * FROM pgoutbox.dead_letters")"
grep -q "event $BAD to dead letters" "$T_TMP/r.log" || fail "no log line for the dead letter: $(tail -5 "$T_TMP/r.log")"
n=$(from fwa | grep -o '"n": [0-9]*' | cut -d' ' -f2 | tr '\n' ' ')
[ "$n" = "1 3 " ] || fail "fwa delivered n: '$n', want '1 3 '"
end=$(sql fwa "SELECT pg_current_wal_lsn() - '0/0'")
wait_until 20 '[ "$(sql fwa "SELECT confirmed_flush_lsn - '"'0/0'"' >= $end FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = t ]'
kill -0 "$relay" || fail "the relay died"
stop_relay "$relay"
max() { printf '%s\n' "$@" | sort -n | tail -1; }
note "fwa's plain connection hung connecting for a ${STALL}-s stall: ${#probes[@]} probes on fwb, max $(max "${probes[@]}") ms; then its dead letter written once, its next event after it"
