# fleet_wal.sh — sourced by the tests of a WAL queue's dead letters in a
# fleet (tests/integration/t_fleet_wal_dead.sh, t_fleet_wal_connect.sh)
# after lib.sh: one cluster with wal_level=logical, database fwa with a
# queue ev captured through the WAL, database fwb with a table queue ev,
# and a sink that refuses the events of key "bad".
#
#   fleet_wal_setup          the cluster (stopped at exit) and both databases
#   sql DB SQL               runs SQL in database DB
#   send DB KEY N            sends an event {"n": N} of key KEY in DB; prints its id
#   from DB                  the lines of database DB delivered so far ($OUT)
#   probe                    a probe event sent in fwb: ms until delivered
#                            (3 s at most)
#   probes_until END WHILE   probes every 0.3 s until SECONDS reaches END,
#                            each within 2 s (else fails saying "while
#                            WHILE"), at least 3; prints their latencies
#   fleet_wal_sink VERDICT   writes $T_TMP/sink.sh: each event of key "bad"
#                            appends its id $id to the file $bad and is
#                            answered by the shell code VERDICT (which prints
#                            the sink's line: "dead $id ..." or "retry $id ...");
#                            the rest is appended to $OUT ($T_TMP/out)
#   fleet_wal_start DB_URL...
#                            a fleet relay ($RELAY, log $T_TMP/r.log) over
#                            the URLs with that sink; then fwa's event n 1
#                            and a first probe delivered
#   fleet_wal_written BAD ATTEMPTS
#                            after the hold-up: fwa's event n 3 delivered,
#                            BAD's dead letter written once (ATTEMPTS, "refused
#                            for good"), fwa delivered n 1 and 3 in order,
#                            the slot confirmed past it all; the relay stopped
#   max N...                 the largest

fleet_wal_setup() {
	unset PG_PORT PG_DIR PG_URL PG_OPTS
	pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 fsync=off ||
		fail "cannot start a cluster with wal_level=logical"
	trap 'cleanup_pids; pg_stop' EXIT
	t_db fwa
	"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create ev --capture wal in fwa"
	t_db fwb
	"$PGO_BIN" queue create ev --kind outbox >/dev/null || fail "queue create ev in fwb"
}

sql() { psql -XAtq -v ON_ERROR_STOP=1 "$(pg_url "$1")" -c "$2"; }
send() { sql "$1" "SELECT pgoutbox.send_to('ev', 't', '$2', 'x', '{\"n\": $3}')"; }
from() { grep -F "\"pgoutbox-source\": \"$1\"" "$OUT" || true; }
probe() {
	local id t0 t1
	t0=$(date +%s%N)
	id=$(send fwb probe 0)
	wait_until 3 'from fwb | qgrep "^{\"id\":$id,"'
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

probes_until() {
	local ms n=0
	while [ $SECONDS -lt "$1" ]; do
		ms=$(probe)
		[ "$ms" -le 2000 ] || fail "a probe on fwb took $ms ms while $2 (the loop was held up)"
		echo "$ms"
		n=$((n + 1))
		sleep 0.3
	done
	[ "$n" -ge 3 ] || fail "only $n probes while $2"
}

fleet_wal_sink() {
	OUT=$T_TMP/out
	: >"$OUT"
	cat >"$T_TMP/sink.sh" <<SH
#!/bin/bash
bad="$T_TMP/bad"
while IFS= read -r line; do
	id=\${line#*\"id\":}; id=\${id%%,*}
	key=\${line#*\"key\":\"}; key=\${key%%\"*}
	if [ "\$key" = bad ]; then
		echo "\$id" >> "\$bad"
		$1
	else
		echo "\$line" >> "$OUT"
	fi
done
SH
	chmod +x "$T_TMP/sink.sh"
}

fleet_wal_start() {
	local d args=()
	for d in "$@"; do args+=(--db "$d"); done
	start_relay "$T_TMP/r" --queue ev --sink exec --exec "$T_TMP/sink.sh" "${args[@]}"
	RELAY=$RELAY_PID
	wait_until 30 'grep -q "streaming slot" "$T_TMP/r.log"'
	send fwa a 1 >/dev/null
	wait_until 10 'from fwa | qgrep "\"n\": 1}"'
	[ "$(probe)" -le 2000 ] || fail "fwb's first probe"
}

fleet_wal_written() {
	local n end
	wait_until 20 'from fwa | qgrep "\"n\": 3}"'
	[ "$(sql fwa "SELECT id || ' ' || attempts || ' ' || last_error FROM pgoutbox.dead_letters")" = "$1 $2 refused for good" ] ||
		fail "dead letters in fwa: $(sql fwa "SELECT * FROM pgoutbox.dead_letters")"
	grep -q "event $1 to dead letters" "$T_TMP/r.log" || fail "no log line for the dead letter: $(tail -5 "$T_TMP/r.log")"
	n=$(from fwa | grep -o '"n": [0-9]*' | cut -d' ' -f2 | tr '\n' ' ')
	[ "$n" = "1 3 " ] || fail "fwa delivered n: '$n', want '1 3 '"
	end=$(sql fwa "SELECT pg_current_wal_lsn() - '0/0'")
	wait_until 20 '[ "$(sql fwa "SELECT confirmed_flush_lsn - '"'0/0'"' >= $end FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = t ]'
	kill -0 "$RELAY" || fail "the relay died"
	stop_relay "$RELAY"
}

max() { printf '%s\n' "$@" | sort -n | tail -1; }
