# Each runner refuses a queue of the wrong kind at start (exit 2, a
# message saying what to run instead) and touches nothing: a relay on a
# work queue would publish and delete its jobs, a worker on the outbox
# would fail on its missing columns forever.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create emails >/dev/null
q "SELECT pgoutbox.enqueue('emails', '{\"to\": \"a@b\"}')" >/dev/null
q "SELECT pgoutbox.send('t', 'k', 'x', '{}')" >/dev/null

refused() { # refused WHAT EXPECTED-TEXT CMD...
	local what=$1 text=$2 rc=0
	shift 2
	timeout 30 "$@" >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	[ "$rc" = 2 ] || fail "$what: exit $rc, not 2: $(cat "$T_TMP/err")"
	grep -q -- "$text" "$T_TMP/err" || fail "$what: no \"$text\" in: $(cat "$T_TMP/err")"
	[ ! -s "$T_TMP/out" ] || fail "$what published: $(cat "$T_TMP/out")"
}
for mode in ordered concurrent strict; do
	refused "relay --mode $mode on a work queue" 'queue "emails" is a work queue' \
		"$PGO_BIN" relay --queue emails --mode "$mode" --sink stdout
done
refused "worker --exec on the outbox" 'queue "outbox" is an outbox' \
	"$PGO_BIN" worker --queue outbox --exec cat
q "CREATE FUNCTION noop(p jsonb) RETURNS void LANGUAGE sql AS 'SELECT'"
refused "worker --sql on the outbox" 'queue "outbox" is an outbox' \
	"$PGO_BIN" worker --queue outbox --sql noop
[ "$(q 'SELECT count(*) FROM pgoutbox.emails')" = 1 ] || fail "the job left the work queue"
[ "$(pending)" = 1 ] || fail "the event left the outbox"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters: $(q 'SELECT * FROM pgoutbox.dead_letters')"
# The right kinds still run.
start_relay "$T_TMP/relay.out" --sink stdout
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
"$PGO_BIN" worker --queue emails --exec 'cat >/dev/null' 2>"$T_TMP/w.log" &
W=$!
PIDS+=("$W")
wait_until 20 '[ "$(q "SELECT count(*) FROM pgoutbox.emails")" = 0 ]'
kill -TERM "$W"
wait "$W" || fail "worker exited $? after SIGTERM"
