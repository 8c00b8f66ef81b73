# pgoutbox status names relays by process, not by PostgreSQL backend
# (issue 44 items 6 and 16): one relay with two connections is "relays:
# 1", listed by its name (relay.name, by default HOST-PID) with its
# connections, and no backend pid is called the relay's pid; events
# pending with no relay connected is a warning (text and --json); an
# adopted table whose --done marks rows says so instead of "delete on
# ack".
. "$(dirname "$0")/../lib.sh"
t_db
json() { "$PGO_BIN" status --json | python3 -c "import json,sys; s=json.load(sys.stdin); $1"; }

# 201 events and no relay: a warning.
q "SELECT pgoutbox.send('t', 'k' || i, 'x', '{}') FROM generate_series(1, 201) i" >/dev/null
"$PGO_BIN" status >"$T_TMP/status" || fail "status"
grep -q '^  WARNING queue outbox: 201 events pending and no relay connected: start one (pgoutbox relay)$' "$T_TMP/status" ||
	fail "no warning of an unserved queue: $(cat "$T_TMP/status")"
json 'w = [x for x in s["warnings"] if x["kind"] == "queue"]; assert len(w) == 1 and w[0]["subject"] == "outbox" and "201 events pending and no relay connected" in w[0]["detail"], s["warnings"]' ||
	fail "status --json: no warning of an unserved queue"
note "201 events, no relay: $(grep WARNING "$T_TMP/status")"

# One relay process (default name HOST-PID), two connections.
start_relay "$T_TMP/relay" --sink stdout --in-flight 2
name="$(hostname)-$RELAY_PID"
wait_until 30 '[ "$(pending)" = 0 ]'
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.relays")" = 2 ]'
"$PGO_BIN" status >"$T_TMP/status" || fail "status"
grep -q '^  relays: 1 (ordered)$' "$T_TMP/status" || fail "one process is not one relay: $(cat "$T_TMP/status")"
grep -Eq "^    $name +ordered +2 connections from local, heartbeat" "$T_TMP/status" ||
	fail "the relay is not shown as $name with 2 connections: $(cat "$T_TMP/status")"
for pid in $(q "SELECT backend_pid FROM pgoutbox.relays"); do
	grep -Eq "pid $pid\b" "$T_TMP/status" && fail "backend $pid shown as a pid: $(cat "$T_TMP/status")"
done
grep -q 'WARNING queue' "$T_TMP/status" && fail "warns with a relay connected: $(cat "$T_TMP/status")"
json '
p = s["relay_processes"]
assert [(x["relay"], x["connections"], x["connected"]) for x in p] == [("'"$name"'", 2, True)], p
assert all("pid" not in m and m["relay"] == "'"$name"'" and m["backend_pid"] > 0 for m in s["relays"] + s["lease_holders"]), s
assert all("pid" not in c and c["backend_pid"] > 0 for c in s["relay_connections"]), s
assert not [x for x in s["warnings"] if x["kind"] == "queue"], s["warnings"]' || fail "status --json: $("$PGO_BIN" status --json)"
note "one relay, two connections: $(grep -A1 '^  relays:' "$T_TMP/status" | tr -s ' ' | tr '\n' ';')"

# Killed, its rows stay behind: once its backends are gone and its last
# beat is older than the default lease timeout, it is not connected.
kill -9 "$RELAY_PID"
q "SELECT pgoutbox.send('t', 'k', 'x', '{}')" >/dev/null
wait_until 40 '"$PGO_BIN" status | qgrep "^  WARNING queue outbox: 1 event pending and no relay connected"'
"$PGO_BIN" status | qgrep -E "^    $name +ordered +2 connections, heartbeat .* ago \(not connected now\)$" ||
	fail "a killed relay shows as connected: $("$PGO_BIN" status)"
note "killed: $("$PGO_BIN" status | grep 'not connected now' | tr -s ' ')"

# An adopted table whose --done marks rows: its rows stay.
q "CREATE TABLE app_events (id bigserial PRIMARY KEY, topic text NOT NULL, key text, type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'PENDING', created_at timestamptz NOT NULL DEFAULT now())"
q "CREATE TABLE app_deleted (LIKE app_events INCLUDING ALL)"
"$PGO_BIN" adopt public.app_events --name marked --id id --topic topic --key key --type type --payload payload \
	--created-at created_at --pending "status = 'PENDING'" --done "status = 'SENT'" >"$T_TMP/adopt" 2>&1 ||
	fail "adopt: $(cat "$T_TMP/adopt")"
"$PGO_BIN" status --queue marked >"$T_TMP/status" 2>&1 || fail "status --queue marked: $(cat "$T_TMP/status")"
grep -q "^  retention: mark on ack (SET status = 'SENT' on public.app_events); the rows stay" "$T_TMP/status" ||
	fail "retention of a marking adopted table: $(cat "$T_TMP/status")"
"$PGO_BIN" status --queue marked --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["retention"]; assert r == {"mode": "mark", "table": "public.app_events", "done": "status = '"'SENT'"'"}, r' ||
	fail "status --json retention of a marking adopted table"
"$PGO_BIN" adopt public.app_deleted --name deleted --id id --topic topic --key key --type type --payload payload \
	--created-at created_at >"$T_TMP/adopt" 2>&1 || fail "adopt: $(cat "$T_TMP/adopt")"
"$PGO_BIN" status --queue deleted >"$T_TMP/status" 2>&1 || fail "status --queue deleted: $(cat "$T_TMP/status")"
grep -q "^  retention: delete on ack (rows of public.app_deleted)$" "$T_TMP/status" ||
	fail "retention of a deleting adopted table: $(cat "$T_TMP/status")"
note "adopted tables: $(grep retention "$T_TMP/status")"
