# `pgoutbox status` of a fleet: three databases of one cluster with
# different backlogs and one URL where no server listens, given by --db
# and by [database NAME] sections.  The text heads each database's report
# with its name, the JSON names each database; every database's pending
# count equals its own SQL count; the one down gets an ERROR row while
# the others are still reported, and status exits 1 (2 with a database
# not migrated).  A single database's JSON keeps its shape, and `config
# show` lists the sections with their passwords masked.
. "$(dirname "$0")/../lib.sh"
A=t_fleet_status_a B=t_fleet_status_b C=t_fleet_status
declare -A WANT=([$A]=7 [$B]=0 [$C]=12)
for d in $A $B $C; do
	t_db "$d"
	n=${WANT[$d]}
	[ "$n" = 0 ] || q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	   SELECT CASE WHEN i % 3 = 0 THEN 'mail' ELSE 'orders' END, 'k' || i, 'x', '{}'
	   FROM generate_series(1, $n) i"
done
# The counts SQL gives, per database.
for d in $A $B $C; do
	got=$(psql -XAtq "$(pg_url "$d")" -c "SELECT count(*) FROM pgoutbox.outbox")
	[ "$got" = "${WANT[$d]}" ] || fail "setup: $d holds $got"
done
DOWN="postgresql://127.0.0.1:$(pg_free_port)/t_down?connect_timeout=2"
FLEET=(--db "$(pg_url $A)" --db "$(pg_url $B)" --db "$(pg_url $C)")

# Checks a fleet's JSON ($1) against WANT: each database named once, its
# pending_total its SQL count, error null; $2 names the one down, if any.
check_json() {
	python3 - "$1" "${2:-}" "$A=${WANT[$A]}" "$B=${WANT[$B]}" "$C=${WANT[$C]}" <<'PY' || fail "JSON: $(head -c 600 "$1")"
import json, sys
s = json.load(open(sys.argv[1]))
down = sys.argv[2]
want = dict(a.split('=') for a in sys.argv[3:])
dbs = {d['database']: d for d in s['databases']}
assert len(dbs) == len(s['databases']), 'a database twice'
assert set(dbs) == set(want) | ({down} if down else set()), sorted(dbs)
for name, n in want.items():
    d = dbs[name]
    assert d['error'] is None, (name, d['error'])
    assert d['pending_total'] == int(n), (name, d['pending_total'], n)
    assert sum(t['pending'] for t in d['pending']) == int(n), name
if down:
    assert dbs[down]['error'] and 'connect' in dbs[down]['error'], dbs[down]
assert s['pending_total'] == sum(int(n) for n in want.values()), s['pending_total']
assert s['databases_failed'] == (1 if down else 0), s['databases_failed']
PY
}

# Checks a fleet's text ($1): each database's header, its pending per
# topic adding up to its SQL count.
check_text() {
	local d got
	for d in $A $B $C; do
		grep -qx "database $d, queue outbox" "$1" || fail "no header for $d: $(cat "$1")"
		got=$(awk -v h="database $d, queue outbox" '
			$0 == h { on = 1; next }
			/^database / || /^fleet:/ { on = 0 }
			on && ($1 == "orders" || $1 == "mail") { n += $2 }
			END { print n + 0 }' "$1")
		[ "$got" = "${WANT[$d]}" ] || fail "text of $d: $got pending, SQL $((WANT[$d])): $(cat "$1")"
	done
}

# All up, named by their dbnames: exit 0.
"$PGO_BIN" status "${FLEET[@]}" >"$T_TMP/up.txt" 2>"$T_TMP/up.err" ||
	fail "status of a fleet all up exited $?: $(cat "$T_TMP/up.err")"
check_text "$T_TMP/up.txt"
grep -qx "fleet: 3 databases, 19 pending" "$T_TMP/up.txt" || fail "fleet line: $(tail -1 "$T_TMP/up.txt")"
"$PGO_BIN" status --json "${FLEET[@]}" >"$T_TMP/up.json" || fail "status --json exited $?"
[ "$(wc -l <"$T_TMP/up.json")" = 1 ] || fail "JSON is not one line"
check_json "$T_TMP/up.json"

# One down (nothing listens): its ERROR row, the others still reported,
# exit 1 naming it.
rc=0
"$PGO_BIN" status "${FLEET[@]}" --db "$DOWN" >"$T_TMP/down.txt" 2>"$T_TMP/down.err" || rc=$?
[ "$rc" = 1 ] || fail "status with a database down exited $rc: $(cat "$T_TMP/down.err")"
check_text "$T_TMP/down.txt"
grep -A1 -x "database t_down, queue outbox" "$T_TMP/down.txt" | qgrep "^  ERROR: cannot connect to PostgreSQL" ||
	fail "no ERROR row for t_down: $(cat "$T_TMP/down.txt")"
grep -q "1 of 4 databases failed: t_down" "$T_TMP/down.err" || fail "stderr: $(cat "$T_TMP/down.err")"
rc=0
"$PGO_BIN" status --json "${FLEET[@]}" --db "$DOWN" >"$T_TMP/down.json" 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "status --json with a database down exited $rc"
check_json "$T_TMP/down.json" t_down

# No such database: refused for good, exit 2 too.
rc=0
"$PGO_BIN" status "${FLEET[@]}" --db "$(pg_url t_fleet_status_none)" >"$T_TMP/none.txt" 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "status with no such database exited $rc: $(tail -3 "$T_TMP/none.txt")"
grep -A1 -x "database t_fleet_status_none, queue outbox" "$T_TMP/none.txt" | qgrep "ERROR: .*t_fleet_status_none" ||
	fail "no ERROR row for the database that does not exist: $(cat "$T_TMP/none.txt")"
check_text "$T_TMP/none.txt"

# --watch --json: an object a line, through the failure; SIGINT ends it
# with 0.
"$PGO_BIN" status --watch --json "${FLEET[@]}" --db "$DOWN" >"$T_TMP/watch.json" 2>"$T_TMP/watch.err" &
w=$!; PIDS+=("$w")
wait_until 20 '[ "$(wc -l <"$T_TMP/watch.json")" -ge 2 ]'
kill -INT "$w"
rc=0; wait "$w" || rc=$?
[ "$rc" = 0 ] || fail "status --watch exited $rc after SIGINT: $(cat "$T_TMP/watch.err")"
head -2 "$T_TMP/watch.json" | while read -r line; do
	printf '%s\n' "$line" >"$T_TMP/line.json"
	check_json "$T_TMP/line.json" t_down
done

# The same fleet as [database NAME] sections, a password in one URL.
cat >"$T_TMP/fleet.ini" <<EOF
[database]
connect_timeout = 2s

[database eu-1]
url = $(pg_url $A) password=s3cret-pw

[database us_2]
url = $(pg_url $B)

[database main]
url = $(pg_url $C)

[database down]
url = $DOWN
EOF
na=${WANT[$A]} nb=${WANT[$B]} nc=${WANT[$C]}
WANT=([eu-1]=$na [us_2]=$nb [main]=$nc)
A=eu-1 B=us_2 C=main
rc=0
"$PGO_BIN" status --config "$T_TMP/fleet.ini" --json >"$T_TMP/ini.json" 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "status --config with a database down exited $rc"
check_json "$T_TMP/ini.json" down
rc=0
"$PGO_BIN" status --config "$T_TMP/fleet.ini" >"$T_TMP/ini.txt" 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "status --config (text) exited $rc"
check_text "$T_TMP/ini.txt"
grep -q "in the 3 that answered; FAILED: down$" "$T_TMP/ini.txt" || fail "fleet line: $(tail -1 "$T_TMP/ini.txt")"

# config show: the sections, the password masked.
"$PGO_BIN" config show --config "$T_TMP/fleet.ini" >"$T_TMP/show.txt" || fail "config show exited $?"
for s in eu-1 us_2 main down; do
	grep -qx "\[database $s\]" "$T_TMP/show.txt" || fail "config show lists no [database $s]: $(cat "$T_TMP/show.txt")"
done
grep -q "s3cret-pw" "$T_TMP/show.txt" && fail "config show shows the password"
grep -A1 -x "\[database eu-1\]" "$T_TMP/show.txt" | grep "^url = .*dbname=t_fleet_status_a" | qgrep "password=\*\*\*" ||
	fail "the masked url: $(grep '^url' "$T_TMP/show.txt")"

# A database not migrated: exit 2, what no retry fixes outranks down.
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_fleet_status_new" -c "CREATE DATABASE t_fleet_status_new" >/dev/null
rc=0
"$PGO_BIN" status "${FLEET[@]}" --db "$DOWN" --db "$(pg_url t_fleet_status_new)" >"$T_TMP/new.txt" 2>"$T_TMP/new.err" || rc=$?
[ "$rc" = 2 ] || fail "status with a database not migrated exited $rc: $(cat "$T_TMP/new.err")"
grep -A1 -x "database t_fleet_status_new, queue outbox" "$T_TMP/new.txt" | qgrep "ERROR: .*migrate" ||
	fail "no ERROR row for the database not migrated: $(cat "$T_TMP/new.txt")"

# One database: the JSON of before, no fleet keys.
"$PGO_BIN" status --json --db "$(pg_url t_fleet_status_a)" |
	python3 -c "import json,sys; s=json.load(sys.stdin); k=list(s); assert k[:2] == ['queue', 'pending_total'] and 'database' not in s and 'databases' not in s and s['pending_total'] == 7, k" ||
	fail "single-database JSON changed"
note "fleet status: 3 databases' counts match SQL, the one down an ERROR row (exit 1), not migrated exit 2"
