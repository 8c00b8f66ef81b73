# One relay process serving 3 databases; the third is named by a host
# name whose lookup takes 3 s (tests/slow_dns.c, LD_PRELOAD: a name
# server that answers slowly).  The lookup runs in the database's start
# thread and its connections are given the address (hostaddr): no
# lookup on the loop the others turn on.  A probe event committed on
# db1 or db2 every half second arrives within 2 s while the third
# starts (up to 3 s a connection when libpq looks the name up on the
# loop), and again while the third's sessions are terminated and
# reconnect; the third delivers all its events, per key in order.
. "$(dirname "$0")/../lib.sh"
name=$(basename "$0" .sh)
cc -shared -fPIC -o "$T_TMP/slow_dns.so" "$(dirname "$0")/../slow_dns.c" -ldl ||
	fail "cannot build the slow_dns.so shim"
for i in 1 2 3; do
	t_db "${name}_$i"
	make_aggregates
done
url() { pg_url "${name}_$1"; }
SLOW_URL="host=db3.test port=$PG_PORT user=postgres dbname=${name}_3"
OUT=$T_TMP/out
# ASan's runtime must come first unless told otherwise.
LD_PRELOAD=$T_TMP/slow_dns.so SLOW_DNS_MS=3000 \
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
	PGOUTBOX_RELAY_RECONNECT_MAX=1s \
	start_relay "$OUT" --mode ordered --sink stdout \
	--db "$(url 1)" --db "$(url 2)" --db "$SLOW_URL"
relay=$RELAY_PID
got() { grep -c "\"pgoutbox-source\": \"${name}_$1\"}" "$OUT" || true; }
# A probe event on database $1 (1-3): ms until delivered (fleet_probe).
probe() { fleet_probe "$(url "$1")" "${name}_$1" "${2:-3}"; }
probes_until() { fleet_probes_until "$1" "db3's name is looked up"; }
PRODUCERS=()
for i in 1 2 3; do
	DATABASE_URL=$(url "$i") start_producer 30 0.01
done
wait_until 15 '[ "$(got 1)" -gt 0 ] && [ "$(got 2)" -gt 0 ]'
starting=$(probes_until $((SECONDS + 12)) | sort -n | tail -1)
back=$(probe 3 30)
# db3's sessions terminated: its connections come back, given the
# address looked up, while the lookups go on in their thread.
DATABASE_URL=$(url 3) q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE datname = '${name}_3' AND application_name LIKE 'pgoutbox relay%'" >/dev/null
again=$(probes_until $((SECONDS + 6)) | sort -n | tail -1)
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "a producer failed"; done
for i in 1 2 3; do DATABASE_URL=$(url "$i") wait_until 60 '[ "$(pending)" = 0 ]'; done
stop_relay "$relay"
for i in 1 2 3; do
	grep "\"pgoutbox-source\": \"${name}_$i\"}" "$OUT" >"$OUT.$i" || true
	python3 "$(dirname "$0")/../order_check.py" "$OUT.$i" "$(url "$i")" >"$T_TMP/check$i" ||
		{ cat "$T_TMP/check$i"; fail "order check of db$i"; }
	note "db$i: $(head -1 "$T_TMP/check$i")"
done
note "probes on db1/db2: max ${starting} ms while db3 started (3 s a lookup), max ${again} ms while its sessions reconnected; db3's probe ${back} ms"
