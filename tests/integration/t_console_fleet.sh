# The web console over a fleet (docs/console.md, docs/fleet.md): three
# databases on three PostgreSQL clusters, named shard1..shard3 by
# [database NAME] sections, each with its own backlog and dead letters
# (a dead letter of the same queue and id in each).  `pgoutbox console
# --config` in Debian's headless Chromium (tests/console/fleet_test.js):
# the overview names each database with its pending and dead letters as
# `status --json` says, and the fleet's totals; a WAL queue's slot lag
# is shown.  Cluster 3 stops: within 15 s its row says "database shard3:
# ..." while the others are still shown, and the overview still answers
# at once.  A dead letter retried from shard2's page is back in shard2's
# outbox only (an action without db= is refused).  Cluster 3 starts: it
# is shown up again.  A database that never answers (a listener that
# never speaks) holds no overview 1.5 s.  Then a relay fleet serving
# the console on its metrics address shows the three databases and its
# relays.
. "$(dirname "$0")/../lib.sh"
command -v /usr/bin/chromium >/dev/null || fail "chromium not installed (scripts/deps.sh installs it)"
command -v node >/dev/null || fail "node not installed"
NODE_DIR=$(cd "$(dirname "$0")/../console" && pwd)
if [ ! -f "$NODE_DIR/node_modules/playwright-core/package.json" ] ||
	[ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
	(cd "$NODE_DIR" && flock "$NODE_DIR/package-lock.json" \
		npm ci --no-audit --no-fund --loglevel=error) >&2 || fail "npm ci in tests/console"
fi
# Three clusters of the test's own (it stops the third).
DIRS=() PORTS=() BINS=() OPTS=()
for i in 1 2 3; do
	PG_PORT= pg_start "$T_TMP/pg$i" fsync=off wal_level=logical max_replication_slots=4 max_wal_senders=4
	DIRS+=("$PG_DIR") PORTS+=("$PG_PORT") BINS+=("$PG_BIN") OPTS+=("$PG_OPTS")
done
trap 'cleanup_pids; for d in "${DIRS[@]}"; do pg_stop_dir "$d"; done' EXIT
url() { echo "host=${DIRS[$1 - 1]} port=${PORTS[$1 - 1]} user=postgres dbname=t_console_fleet"; }
CONF=$T_TMP/fleet.ini
: >"$CONF"
declare -A PENDING=([1]=7 [2]=3 [3]=12) DEAD=([1]=2 [2]=1 [3]=4)
DEAD_ID=42
for i in 1 2 3; do
	PG_DIR=${DIRS[$i - 1]} PG_PORT=${PORTS[$i - 1]} t_db
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	   SELECT 'orders', 'k' || g, 'order.created', '{}' FROM generate_series(1, ${PENDING[$i]}) g"
	# Dead letter $DEAD_ID in each, its payload naming its database.
	q "INSERT INTO pgoutbox.dead_letters (id, queue, topic, key, type, payload, headers, created_at, attempts, last_error)
	   SELECT $DEAD_ID + g, 'outbox', 'orders', 'd' || g, 'order.created',
	          jsonb_build_object('from', 'shard$i', 'n', g), '{}', now(), 5, 'sink said 500'
	   FROM generate_series(0, ${DEAD[$i]} - 1) g"
	printf '[database shard%d]\nurl = %s\n\n' "$i" "$(url "$i")" >>"$CONF"
done
# A WAL queue in shard1 no relay streams: its slot keeps WAL.
DATABASE_URL=$(url 1) "$PGO_BIN" queue create events --kind outbox --capture wal >/dev/null ||
	fail "queue create events --capture wal"
DATABASE_URL=$(url 1) "$PGO_BIN" send --queue events --topic t '{"n": 1}' >/dev/null

echo "hunter2-$RANDOM$RANDOM" >"$T_TMP/token"
CPORT=$(pg_free_port)
PGOUTBOX_CONSOLE_TOKEN_FILE=$T_TMP/token "$PGO_BIN" console --config "$CONF" \
	--listen "127.0.0.1:$CPORT" >"$T_TMP/console.log" 2>&1 &
CONSOLE_PID=$!
PIDS+=("$CONSOLE_PID")
wait_until 30 'curl -sf "http://127.0.0.1:$CPORT/" >/dev/null'
grep -q "over the fleet's databases" "$T_TMP/console.log" || fail "console log: $(cat "$T_TMP/console.log")"

CONSOLE_URL=http://127.0.0.1:$CPORT CONSOLE_TOKEN=$(cat "$T_TMP/token") CONSOLE_LOG=$T_TMP/console.log \
	PGO_BIN=$PGO_BIN CONF=$CONF URL1=$(url 1) URL2=$(url 2) URL3=$(url 3) DEAD_ID=$DEAD_ID \
	STOP3=". '$PWD/scripts/pg.sh'; PG_DIR='${DIRS[2]}' PG_BIN='${BINS[2]}' pg_stop" \
	START3=". '$PWD/scripts/pg.sh'; PG_DIR='${DIRS[2]}' PG_BIN='${BINS[2]}' PG_OPTS='${OPTS[2]}' pg_start_again" \
	node "$NODE_DIR/fleet_test.js" >&2 || { tail -n 30 "$T_TMP/console.log" >&2; fail "fleet_test.js"; }

# The API: db= names the database of every page but the overview; an
# unknown one is refused with the names there are.
C=http://127.0.0.1:$CPORT
code=$(curl -s -o "$T_TMP/nodb.json" -w '%{http_code}' "$C/api/dead")
[ "$code" = 400 ] && grep -q 'one of shard1, shard2, shard3' "$T_TMP/nodb.json" ||
	fail "GET /api/dead without db: $code $(cat "$T_TMP/nodb.json")"
code=$(curl -s -o "$T_TMP/bad.json" -w '%{http_code}' "$C/api/queue?name=outbox&db=shard9")
[ "$code" = 404 ] && grep -q 'no database named' "$T_TMP/bad.json" ||
	fail "db=shard9: $code $(cat "$T_TMP/bad.json")"
for i in 1 3; do
	n=$(curl -sf "$C/api/dead?db=shard$i" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"][0]["n"])')
	[ "$n" = "${DEAD[$i]}" ] || fail "shard$i's dead letters by the API: $n, expected ${DEAD[$i]}"
done
grep -q "$(cat "$T_TMP/token")" "$T_TMP/console.log" && fail "the console logged its token"
kill -TERM "$CONSOLE_PID"
rc=0; wait "$CONSOLE_PID" || rc=$?
[ "$rc" = 0 ] || fail "console exited $rc after SIGTERM: $(tail -n 20 "$T_TMP/console.log")"
note "console --config over 3 databases: each shown, one down shown as such, an action hit its database only"

# A database that does not answer (a listener that never accepts: the
# connection is made, the server never speaks) holds the others' pages a
# quarter of a second at most while the console tries it, not its 2 s
# connect timeout: every overview of 8 s answers within 1.5 s, shard1's
# figures in it, the silent one's row saying it did not answer.
HPORT=$(pg_free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); time.sleep(600)' "$HPORT" &
PIDS+=("$!")
wait_until 10 'ss -Hltn "sport = :$HPORT" | qgrep .'
CPORT2=$(pg_free_port)
"$PGO_BIN" console --listen "127.0.0.1:$CPORT2" --db "$(url 1)" --db "$(url 2)" \
	--db "host=127.0.0.1 port=$HPORT dbname=silent" >"$T_TMP/console2.log" 2>&1 &
PIDS+=("$!")
wait_until 30 'curl -sf "http://127.0.0.1:$CPORT2/" >/dev/null'
slowest=0 end=$((SECONDS + 8))
while [ $SECONDS -lt $end ]; do
	ms=$(curl -s -o "$T_TMP/silent.json" -w '%{time_total}' "http://127.0.0.1:$CPORT2/api/overview" |
		awk '{ printf "%d", $1 * 1000 }')
	[ "$ms" -lt 1500 ] || fail "an overview took $ms ms with a database silent"
	[ "$ms" -le "$slowest" ] || slowest=$ms
	python3 - "$T_TMP/silent.json" "${PENDING[1]}" <<'PY' || fail "overview with a silent database: $(head -c 600 "$T_TMP/silent.json")"
import json, sys
d = json.load(open(sys.argv[1]))
dbs = {x["name"]: x for x in d["databases"]}
assert d["fleet"]["up"] == 2 and d["fleet"]["down"] == 1, d["fleet"]
assert dbs["db1"]["db"]["ok"] and dbs["db2"]["db"]["ok"], dbs.keys()
assert not dbs["db3"]["db"]["ok"] and dbs["db3"]["db"]["error"].startswith("database db3: "), dbs["db3"]
q = {x["name"]: x for x in dbs["db1"]["queues"]}
assert q["outbox"]["pending"] == int(sys.argv[2]), q["outbox"]
PY
	sleep 0.2
done
grep -q 'console db3: PostgreSQL is unreachable (no answer within the connect timeout)' "$T_TMP/console2.log" ||
	fail "console log with a silent database: $(cat "$T_TMP/console2.log")"
note "a database that never answers: every overview of 8 s within $slowest ms, the others shown"

# A relay fleet serves the console on its metrics address: the three
# databases, each with the relay connected.
MPORT=$(pg_free_port)
PGOUTBOX_METRICS_LISTEN=127.0.0.1:$MPORT PGOUTBOX_CONSOLE_ENABLED=true \
	start_relay "$T_TMP/relay.out" --config "$CONF" --sink stdout
wait_until 30 '[ "$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$MPORT/")" = 200 ]'
relay_console() {
	curl -s "http://127.0.0.1:$MPORT/api/overview" >"$T_TMP/relay.json" &&
		python3 - "$T_TMP/relay.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fleet"]["up"] == 3, d["fleet"]
names = [x["name"] for x in d["databases"]]
assert names == ["shard1", "shard2", "shard3"], names
assert all(any(s["role"] == "relay" for s in x["sessions"]) for x in d["databases"])
PY
}
# Within 30 s (the relays connect, the console's worker reads).
for _ in $(seq 150); do relay_console 2>/dev/null && break; sleep 0.2; done
relay_console || fail "the relay's console: $(head -c 600 "$T_TMP/relay.json")"
note "relay --config over 3 databases: its metrics address serves the fleet's console"
stop_relay "$RELAY_PID"
echo ok
