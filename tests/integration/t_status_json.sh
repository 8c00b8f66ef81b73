# pgoutbox status --json: the same facts as the text, as one JSON object
# (pending per topic, dead letters, lease holders, shards, retention,
# warnings, relay connections); --watch writes it again every second.
. "$(dirname "$0")/../lib.sh"
t_db
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'a', 'x', '{}' FROM generate_series(1, 3)"
q "INSERT INTO pgoutbox.outbox (topic, type, payload) VALUES ('b', 'x', '{}')"
q "INSERT INTO pgoutbox.dead_letters (id, queue, topic, type, payload, headers, created_at, attempts, last_error) VALUES (99, 'outbox', 'a', 'x', '{}', '{}', now(), 10, 'boom \"quoted\"')"
"$PGO_BIN" status --json >"$T_TMP/s.json" || fail "status --json"
python3 - "$T_TMP/s.json" <<'PY' || fail "status --json: $(cat "$T_TMP/s.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["queue"] == "outbox", s
assert s["pending_total"] == 4, s
t = {r["topic"]: r for r in s["pending"]}
assert t["a"]["pending"] == 3 and t["b"]["pending"] == 1, t
assert isinstance(t["a"]["oldest_seconds"], (int, float)), t
assert s["dead_letters"]["count"] == 1, s["dead_letters"]
assert s["dead_letters"]["latest_error"] == 'boom "quoted"', s["dead_letters"]
assert s["retention"]["mode"] == "delete", s["retention"]
assert s["lease_holders"] == [] and s["relay_connections"] == [], s
assert sum(r["pending"] for r in s["shards"]) == 4, s["shards"]
PY
# The text says the same.
"$PGO_BIN" status >"$T_TMP/s.txt"
grep -q '^  a  *3 ' "$T_TMP/s.txt" && grep -q '^  dead letters: 1' "$T_TMP/s.txt" || fail "text: $(cat "$T_TMP/s.txt")"

# A relay holding leases shows up in both.
start_relay "$T_TMP/relay" --sink stdout
wait_until 30 '[ "$(pending)" = 0 ]'
wait_until 30 '"$PGO_BIN" status --json | python3 -c "import json,sys; s=json.load(sys.stdin); sys.exit(0 if s[\"lease_holders\"] and sum(len(m[\"shards\"]) for m in s[\"lease_holders\"]) == 64 and s[\"relay_connections\"] else 1)"'
note "status --json: pending, dead letters, 64 leased shards, relay connections"

# --watch: one object a line, every second, until SIGTERM.
"$PGO_BIN" status --json --watch >"$T_TMP/w.ndjson" 2>"$T_TMP/w.log" &
w=$!
PIDS+=("$w")
wait_until 10 '[ "$(wc -l <"$T_TMP/w.ndjson")" -ge 3 ]'
kill -TERM "$w"
wait "$w" || fail "status --watch exited $? after SIGTERM"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$T_TMP/w.ndjson" || fail "--watch lines are not JSON"
# Text --watch clears the screen each time.
"$PGO_BIN" status --watch >"$T_TMP/w.txt" 2>&1 &
w=$!
PIDS+=("$w")
wait_until 10 '[ "$(grep -c "queue outbox" "$T_TMP/w.txt")" -ge 2 ]'
kill -INT "$w"
wait "$w" || fail "status --watch exited $? after SIGINT"
grep -q $'\033\[2J' "$T_TMP/w.txt" || fail "--watch does not clear the screen"
note "status --watch: $(wc -l <"$T_TMP/w.ndjson") JSON lines, text refreshed $(grep -c 'queue outbox' "$T_TMP/w.txt") times"
stop_relay "$RELAY_PID"
