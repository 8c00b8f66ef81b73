# lib.sh — sourced by every integration test (tests/integration/t_*.sh).
# tests/run.sh exports PGO_BIN (the binary under test), PG_DIR/PG_PORT
# (a running cluster) and T_TMP (a scratch directory for this test).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/pg.sh"

PIDS=()

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

note() { echo "  $*" >&2; }

# Creates a fresh database named after the test and migrates it.
t_db() {
	local name=${1:-$(basename "$0" .sh)}
	PGOPTIONS='-c client_min_messages=warning' psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
	export DATABASE_URL
	DATABASE_URL=$(pg_url "$name")
	"$PGO_BIN" migrate >/dev/null 2>"$T_TMP/migrate.log" || { cat "$T_TMP/migrate.log" >&2; fail "migrate"; }
}

q() { psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1"; }

# Starts a relay in the background: stdout to $1, stderr to $1.log.
# Prints nothing; the pid is in RELAY_PID and PIDS.
start_relay() {
	local out=$1; shift
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$PGO_BIN" relay "$@" >"$out" 2>"$out.log" &
	RELAY_PID=$!
	PIDS+=("$RELAY_PID")
}

# Waits until a shell condition holds; fails after $1 seconds.
wait_until() {
	local secs=$1; shift
	local end=$((SECONDS + secs))
	until eval "$@"; do
		[ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for: $*"
		sleep 0.05
	done
}

pending() { q "SELECT count(*) FROM pgoutbox.outbox"; }

# `cmd | qgrep [grep options] PATTERN`: true when a line matches.  Use it
# instead of `grep -q` at the end of a pipe: under pipefail, grep -q quits
# at the first match and the writer still writing dies of SIGPIPE, which
# fails the pipe (ldd in t_deb did, on CI).  This reads all of its input.
qgrep() { grep "$@" >/dev/null; }

# Bytes that arrived on the local TCP ports given and that their server
# has not read yet (a stopped broker's sockets hold a relay's requests).
unread() {
	local filter p
	for p in "$@"; do filter="${filter:+$filter or }sport = :$p"; done
	ss -Htn state established "( $filter )" | awk '{ n += $1 } END { print n + 0 }'
}

# The event ids in NDJSON files, one per line, in file order.
ids_of() { cat "$@" | grep -o '^{"id":[0-9]*' | cut -d: -f2; }

# Stops a relay with SIGTERM and checks that it exits 0 within 10 s.
stop_relay() {
	local pid=$1 rc=0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && fail "relay $pid did not stop within 10 s of SIGTERM"
	wait "$pid" || rc=$?
	[ "$rc" = 0 ] || fail "relay $pid exited $rc after SIGTERM"
}

cleanup_pids() {
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
	done
}
trap cleanup_pids EXIT

# Ordered-mode fixtures: 200 aggregates and a producer procedure that, per
# event, bumps one aggregate's version and sends the event in the same
# transaction, so writers of one key are serialized (DESIGN.md).
make_aggregates() {
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE agg (key text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (key) SELECT 'k' || i FROM generate_series(1, 200) i;
CREATE PROCEDURE produce(seconds float8, pause float8) LANGUAGE plpgsql AS $$
DECLARE
    k text;
    v int;
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        k := 'k' || (1 + floor(random() * 200))::int;
        UPDATE agg SET version = version + 1 WHERE key = k RETURNING version INTO v;
        PERFORM pgoutbox.send('agg', k, 'agg.changed', jsonb_build_object('v', v));
        COMMIT;
        IF pause > 0 THEN PERFORM pg_sleep(pause); END IF;
    END LOOP;
END $$;
SQL
}

# Starts a producer session in the background for $1 seconds.
start_producer() {
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce($1, ${2:-0.0005})" >/dev/null 2>"$T_TMP/producer.$RANDOM.log" &
	PIDS+=("$!")
	PRODUCERS+=("$!")
}

# A fleet's probe: commits an event through URL $1 and prints the ms
# until the relay wrote it to $OUT with the pgoutbox-source $2; fails
# after ${3:-3} s.
fleet_probe() {
	local id t0 t1 pat
	t0=$(date +%s%N)
	id=$(psql -XAtq "$1" -c "SELECT pgoutbox.send('probe', 'probe', 'probe', '{\"v\": 0}')")
	pat="^{\"id\":$id,.*\"pgoutbox-source\": \"$2\"}"
	wait_until "${3:-3}" 'grep -q "$pat" "$OUT"'
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

# Probes on databases 1 and 2 (the test's probe N) every half second
# until SECONDS reaches $1; each must arrive within 2 s, else fails
# saying "while $2".  Prints the latencies.
fleet_probes_until() {
	local ms i
	while [ $SECONDS -lt "$1" ]; do
		for i in 1 2; do
			ms=$(probe "$i")
			[ "$ms" -le 2000 ] || fail "a probe on db$i took $ms ms while $2 (the loop was held up)"
			echo "$ms"
		done
		sleep 0.5
	done
}

# Shard leases held now in the queue's namespace, per backend pid.
lease_count() {
	q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
	   AND classid = pgoutbox.lease_ns('outbox')::oid AND objid::bigint < 4096
	   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
}

# The durations auto_explain logged (server log on stdin) for the claims
# (DELETE FROM pgoutbox."outbox") of the sessions whose pids match the
# regex $1: "NNN.NNN ms" lines.
claims_over() {
	awk -v pids="^($1)\$" '
		match($0, /\[[0-9]+\] LOG:  duration: [0-9.]+ ms/) {
			split(substr($0, RSTART, RLENGTH), f, /[][ ]+/)
			ms = (f[2] ~ pids) ? f[5] : ""
			next
		}
		ms != "" && /DELETE FROM pgoutbox."outbox"/ { print ms " ms"; ms = "" }
		/LOG:/ { ms = "" }'
}
