# Modes mixed on one queue (docs/ordering.md, "Mixing modes"): a relay
# that starts next to live relays of the queue in another mode is refused
# (exit 2, a message naming them and what to do) and relays nothing; an
# ordered relay then a concurrent one, a concurrent one then an ordered
# and a strict one.  A relay of another mode that appears later (here: a
# concurrent relay frozen past its lease timeout, so that an ordered one
# could start, then thawed) is reported by both sides at ERROR and in
# pgoutbox_relay_mode_conflicts, and `pgoutbox status` (text and --json)
# shows every relay's mode and warns.
. "$(dirname "$0")/../lib.sh"
# Migrating grants relay_beat() to the roles that may run rebalance(), so
# that their relays keep working (and keep beating) after the upgrade.
U=$(pg_url t_mixed_modes_up)
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_mixed_modes_up" -c "CREATE DATABASE t_mixed_modes_up" >/dev/null
latest=$("$PGO_BIN" --version | sed 's/.*schema version \([0-9]*\).*/\1/')
# 15: the version before 016_queues_named, which brought relay_beat().
"$PGO_BIN" migrate --db "$U" --to 15 >/dev/null 2>&1 || fail "migrate --to 15"
psql -XAtq -v ON_ERROR_STOP=1 "$U" -c "CREATE ROLE t_mm_relay; CREATE ROLE t_mm_other; GRANT EXECUTE ON FUNCTION pgoutbox.rebalance(text, text, text, interval) TO t_mm_relay" >/dev/null
"$PGO_BIN" migrate --db "$U" >/dev/null 2>&1 || fail "migrate to $latest"
[ "$(psql -XAtq "$U" -c "SELECT has_function_privilege('t_mm_relay', 'pgoutbox.relay_beat(text, text, text, interval, boolean)', 'EXECUTE'), has_function_privilege('t_mm_other', 'pgoutbox.relay_beat(text, text, text, interval, boolean)', 'EXECUTE')")" = "t|f" ] ||
	fail "relay_beat grants after migrating"
t_db
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json() { "$PGO_BIN" status --json | python3 -c "import json,sys; s=json.load(sys.stdin); $1"; }
members() { q "SELECT count(*) FROM pgoutbox.relays WHERE mode = '$1'"; }

refused() { # refused WHAT MODE EXPECTED-TEXT...
	local what=$1 mode=$2 rc=0 text
	shift 2
	timeout 30 "$PGO_BIN" relay --mode "$mode" --name "new$mode" --sink stdout \
		>"$T_TMP/refused.out" 2>"$T_TMP/refused.err" || rc=$?
	[ "$rc" = 2 ] || fail "$what: exit $rc, not 2: $(cat "$T_TMP/refused.err")"
	for text in "$@"; do
		grep -qF -- "$text" "$T_TMP/refused.err" || fail "$what: no \"$text\" in: $(cat "$T_TMP/refused.err")"
	done
	[ ! -s "$T_TMP/refused.out" ] || fail "$what published: $(cat "$T_TMP/refused.out")"
	[ "$(q "SELECT count(*) FROM pgoutbox.relays WHERE member LIKE 'new%'")" = 0 ] ||
		fail "$what left a member row: $(q 'SELECT * FROM pgoutbox.relays')"
}

# An ordered relay, then a concurrent one.
start_relay "$T_TMP/ord.out" --name ord --sink stdout
wait_until 20 '[ "$(members ordered)" = 2 ]'
refused "concurrent after ordered" concurrent \
	'queue "outbox" has relays in ordered mode: ord/0 (ordered), ord/1 (ordered);' \
	'this one runs in concurrent mode' 'Mixing modes' '--mode ordered'
# Under `pgoutbox run` the refusal is not restarted either.
printf '[relay]\nmode = concurrent\nname = runconc\nsink = stdout\n' >"$T_TMP/run.ini"
rc=0; timeout 30 "$PGO_BIN" run --config "$T_TMP/run.ini" >"$T_TMP/run.out" 2>"$T_TMP/run.err" || rc=$?
[ "$rc" = 2 ] && grep -q 'relay cannot run with this configuration; stopping' "$T_TMP/run.err" ||
	fail "run: exit $rc: $(cat "$T_TMP/run.err")"
[ "$(grep -c 'relay started' "$T_TMP/run.err")" = 1 ] && grep -q 'has relays in ordered mode' "$T_TMP/run.err" || fail "run restarted the refused relay: $(cat "$T_TMP/run.err")"
"$PGO_BIN" status >"$T_TMP/status" || fail "status"
grep -q '^  relays: 1 (ordered)$' "$T_TMP/status" || fail "status (one process, two connections): $(cat "$T_TMP/status")"
grep -q 'modes mixed' "$T_TMP/status" && fail "status warns of mixed modes: $(cat "$T_TMP/status")"
json 'assert [m["mode"] for m in s["relays"]] == ["ordered", "ordered"] and s["modes"] == ["ordered"] and not s["mixed_modes"], s' ||
	fail "status --json"
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.relays')" = 0 ] || fail "a stopped relay left its rows"

# A concurrent relay (it registers too), then an ordered and a strict one.
MPORT=$(free_port)
start_relay "$T_TMP/conc.out" --name conc --mode concurrent --sink stdout --heartbeat 200ms \
	--lease-timeout 1s --metrics-listen "127.0.0.1:$MPORT"
C=$RELAY_PID
wait_until 20 '[ "$(members concurrent)" = 1 ]'
q "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 1}')" >/dev/null
wait_until 20 '[ "$(pending)" = 0 ]'
refused "ordered after concurrent" ordered \
	'queue "outbox" has relays in concurrent mode: conc/0 (concurrent);' \
	'this one runs in ordered mode' '--mode concurrent'
refused "strict after concurrent" strict 'has relays in concurrent mode: conc/0' 'this one runs in strict mode'
"$PGO_BIN" status >"$T_TMP/status" || fail "status"
grep -q '^    conc  *concurrent 1 connection from local, heartbeat' "$T_TMP/status" || fail "status shows no concurrent relay: $(cat "$T_TMP/status")"
json 'assert [(m["member"], m["mode"]) for m in s["relays"]] == [("conc/0", "concurrent")] and s["lease_holders"] == [], s' ||
	fail "status --json"
metric() { curl -s "http://127.0.0.1:$1/metrics" | grep '^pgoutbox_relay_mode_conflicts{' | awk '{print $2}'; }
[ "$(metric "$MPORT")" = 0 ] || fail "mode conflicts gauge: $(metric "$MPORT")"

# One that appears later: the concurrent relay frozen past its lease
# timeout no longer counts, so an ordered relay starts; thawed, it beats
# again, and both see the other.
kill -STOP "$C"
wait_until 20 '[ "$(q "SELECT count(*) FROM pgoutbox.relays WHERE member = '"'conc/0'"' AND heartbeat_at > now() - interval '"'1.5 s'"'")" = 0 ]'
OPORT=$(free_port)
start_relay "$T_TMP/ord2.out" --name ord --sink stdout --heartbeat 200ms --lease-timeout 1s \
	--metrics-listen "127.0.0.1:$OPORT"
O=$RELAY_PID
wait_until 20 '[ "$(members ordered)" = 2 ]'
kill -CONT "$C"
wait_until 20 'grep -q "ERROR.*queue outbox is also relayed in another mode: ord/0 (ordered), ord/1 (ordered)" "$T_TMP/conc.out.log"'
wait_until 20 'grep -q "ERROR.*queue outbox is also relayed in another mode: conc/0 (concurrent); this relay runs in ordered mode" "$T_TMP/ord2.out.log"'
wait_until 20 '[ "$(metric "$MPORT")" = 2 ] && [ "$(metric "$OPORT")" = 1 ]'
"$PGO_BIN" status >"$T_TMP/status" || fail "status"
grep -q 'WARNING modes mixed on queue: concurrent, ordered' "$T_TMP/status" || fail "status does not warn: $(cat "$T_TMP/status")"
json 'assert s["mixed_modes"] and s["modes"] == ["concurrent", "ordered"] and sorted(m["mode"] for m in s["relays"]) == ["concurrent", "ordered", "ordered"], s' ||
	fail "status --json while mixed"
# Events still go out (a warning, not a stop).
q "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 2}')" >/dev/null
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$O"
wait_until 20 'grep -q "no relay of another mode on queue outbox any more" "$T_TMP/conc.out.log"'
wait_until 20 '[ "$(metric "$MPORT")" = 0 ]'
stop_relay "$C"
true
