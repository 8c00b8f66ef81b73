# One relay process serving 3 databases; the third is reached through a
# TCP proxy that is stopped (SIGSTOP: the kernel accepts and ACKs, no
# reply ever comes, as from a host that hangs) before the relay starts
# and for ${STALL_SECONDS:-20} s; its URL names the host "localhost",
# looked up in the database's start thread, its connections given the
# address (hostaddr).  Its start (the pooler probe, the
# schema check, an adopted table's map) and its connects wait for that
# host meanwhile, at database.connect_timeout 5 s a try: none of it may
# hold up the loop the others turn on.  A probe event committed on db1
# or db2 every half second arrives within 2 s throughout (some ms when
# nothing blocks; up to 5 s when a connect to the stalled host blocks
# the loop).  Then the proxy runs again: db3's events, committed meanwhile
# straight to its server, are all delivered, per key in commit order; the
# proxy is stopped once more for 8 s with db3 running (its connections
# hang mid-round and reconnect): the probes on db1/db2 still arrive
# within 2 s.
. "$(dirname "$0")/../lib.sh"
STALL=${STALL_SECONDS:-20}
name=$(basename "$0" .sh)
for i in 1 2 3; do
	t_db "${name}_$i"
	make_aggregates
done
url() { pg_url "${name}_$1"; }
python3 "$(dirname "$0")/../tcp_proxy.py" "$PG_PORT" "$T_TMP/proxy.port" &
PROXY=$!
PIDS+=("$PROXY")
wait_until 10 "[ -s '$T_TMP/proxy.port' ]"
kill -STOP "$PROXY"
STALLED_URL="host=localhost port=$(cat "$T_TMP/proxy.port") user=postgres dbname=${name}_3"
OUT=$T_TMP/out
PGOUTBOX_DATABASE_CONNECT_TIMEOUT=5s PGOUTBOX_RELAY_RECONNECT_MAX=1s \
	start_relay "$OUT" --mode ordered --sink stdout \
	--db "$(url 1)" --db "$(url 2)" --db "$STALLED_URL"
relay=$RELAY_PID
# Deliveries from database $1 (1-3; named after its dbname) so far.
got() { grep -c "\"pgoutbox-source\": \"${name}_$1\"}" "$OUT" || true; }
# A probe event on database $1 (1-3): ms until delivered (fleet_probe).
probe() { fleet_probe "$(url "$1")" "${name}_$1" "${2:-3}"; }
probes_until() { fleet_probes_until "$1" "db3's host hangs"; }
PRODUCERS=()
for i in 1 2 3; do
	DATABASE_URL=$(url "$i") start_producer $((STALL + 12)) 0.01
done
stall_end=$((SECONDS + STALL))
wait_until 15 '[ "$(got 1)" -gt 0 ] && [ "$(got 2)" -gt 0 ]'
during=$(probes_until "$stall_end" | sort -n | tail -1)
[ "$(got 3)" = 0 ] || fail "db3 delivered through a stopped proxy"
kill -0 "$relay" || fail "the relay died"
kill -CONT "$PROXY"
back=$(probe 3 20)
# db3 running: its host hangs again, mid-round this time.
sleep 2
kill -STOP "$PROXY"
again=$(probes_until $((SECONDS + 8)) | sort -n | tail -1)
kill -CONT "$PROXY"
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "a producer failed"; done
for i in 1 2 3; do DATABASE_URL=$(url "$i") wait_until 60 '[ "$(pending)" = 0 ]'; done
stop_relay "$relay"
for i in 1 2 3; do
	grep "\"pgoutbox-source\": \"${name}_$i\"}" "$OUT" >"$OUT.$i" || true
	python3 "$(dirname "$0")/../order_check.py" "$OUT.$i" "$(url "$i")" >"$T_TMP/check$i" ||
		{ cat "$T_TMP/check$i"; fail "order check of db$i"; }
	note "db$i: $(head -1 "$T_TMP/check$i")"
done
note "probes on db1/db2: max ${during} ms while db3's host hung from the start (${STALL} s), max ${again} ms while it hung again mid-run (8 s); db3 delivered ${back} ms after its host came back"
