# The schema as source (sql/README.md): a fresh install (sql/schema/) and
# a database upgraded from older versions (sql/upgrade/, then the
# source's functions and grants again) are the same schema, as
# pg_dump --schema-only prints it.  The older databases are made the way
# the pgoutbox that released them made them: the frozen steps 001..N run
# by psql in one transaction, each recorded in pgoutbox.migrations.
. "$(dirname "$0")/../lib.sh"
UPGRADE=$(cd "$(dirname "$0")/../../sql/upgrade" && pwd)
PG_DUMP=$(pg_bindir)/pg_dump
latest=$("$PGO_BIN" --version | sed 's/.*schema version \([0-9]*\).*/\1/')
[ "$latest" -ge 18 ] || fail "schema version from --version: '$latest'"
[ "$(ls "$UPGRADE" | grep -c '^[0-9][0-9][0-9]_.*\.sql$')" = "$latest" ] ||
	fail "sql/upgrade/ has $(ls "$UPGRADE" | wc -l) steps, the binary knows $latest"

newdb() {
	PGOPTIONS='-c client_min_messages=warning' psql -XAtq "$(pg_url postgres)" \
		-c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
}

# A database at version $2 as released: steps 001..$2 by psql.
released() {
	local db=$1 n=$2 f v
	newdb "$db"
	{
		echo "SET client_min_messages = warning;"
		echo "CREATE SCHEMA pgoutbox;"
		echo "CREATE TABLE pgoutbox.migrations (version integer PRIMARY KEY,"
		echo "  name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
		for f in "$UPGRADE"/[0-9][0-9][0-9]_*.sql; do
			v=$((10#$(basename "$f" | cut -c1-3)))
			[ "$v" -le "$n" ] || break
			cat "$f"
			echo
			echo "INSERT INTO pgoutbox.migrations (version, name) VALUES ($v, '$(basename "$f" .sql)');"
		done
	} | psql -XAtq -v ON_ERROR_STOP=1 -1 "$(pg_url "$db")" >/dev/null 2>"$T_TMP/$db.err" ||
		fail "steps 001..$n by psql: $(cat "$T_TMP/$db.err")"
}

# migrate DB SAYS [ARGS...]: pgoutbox migrate succeeds and prints SAYS.
migrate() {
	local db=$1 says=$2
	shift 2
	"$PGO_BIN" migrate --db "$(pg_url "$db")" "$@" >"$T_TMP/$db.out" 2>"$T_TMP/$db.log" ||
		fail "migrate $db $*: $(cat "$T_TMP/$db.log")"
	grep -qF "$says" "$T_TMP/$db.out" || fail "migrate $db $*: $(cat "$T_TMP/$db.out") (not: $says)"
}

# The schema, and the rows the install itself makes (queues, leases,
# the version).  pg_dump 15.14+ writes a random \restrict token.
dump() {
	"$PG_DUMP" --schema-only "$(pg_url "$1")" | grep -Ev '^\\(un)?restrict '
	psql -XAtq "$(pg_url "$1")" -c "SELECT name, shards, kind, retention, retention_days FROM pgoutbox.queues ORDER BY name" \
		-c "SELECT queue, count(*), min(shard), max(shard) FROM pgoutbox.shard_leases GROUP BY queue ORDER BY queue" \
		-c "SELECT max(version) FROM pgoutbox.migrations"
}

same() {
	dump "$2" >"$T_TMP/$2.sql"
	diff -u "$T_TMP/$1.sql" "$T_TMP/$2.sql" >"$T_TMP/$2.diff" ||
		fail "$2 differs from $1: $(head -n 60 "$T_TMP/$2.diff")"
}

day=$(date -u +%F)

# A fresh install from the source.
newdb t_se_fresh
migrate t_se_fresh "from version 0 to $latest"
dump t_se_fresh >"$T_TMP/t_se_fresh.sql"
# Not an empty comparison: the dump holds what sql/schema/ defines.
for obj in 'FUNCTION pgoutbox.send(topic text' 'TABLE pgoutbox.outbox (' 'TRIGGER outbox_notify' \
	'REVOKE ALL ON FUNCTION pgoutbox.send(' 'ATTACH PARTITION pgoutbox.inbox_'; do
	grep -qF "$obj" "$T_TMP/t_se_fresh.sql" || fail "the fresh install has no $obj"
done
for f in "$UPGRADE"/../schema/functions/*.sql; do
	grep -q "^CREATE FUNCTION pgoutbox\.$(basename "$f" .sql)(" "$T_TMP/t_se_fresh.sql" ||
		fail "the fresh install has no function of $f"
done

# Upgrades from every older version as released (steps 001..N by psql):
# each ends equal to the fresh install.  Releases up to 18 made their
# databases by these steps alone; a later release made them from its own
# source, which is gone, and the steps are its nearest stand-in.
for n in $(seq 1 $((latest - 1))); do
	released "t_se_from$n" "$n"
	migrate "t_se_from$n" "from version $n to $latest"
	same t_se_fresh "t_se_from$n"
done
# While 18 is the newest, its database as released is up to date: the
# source must be its schema, function for function, with nothing run.
if [ "$latest" = 18 ]; then
	released t_se_at18 18
	migrate t_se_at18 "up to date (version 18)"
	same t_se_fresh t_se_at18
fi

# And from a middle version made by this binary (migrate --to: the steps
# alone, without the source's definitions).
newdb t_se_to10
migrate t_se_to10 "from version 0 to 10" --to 10
migrate t_se_to10 "from version 10 to $latest"
same t_se_fresh t_se_to10

# The partitions are per UTC day: a run across midnight compares days.
[ "$(date -u +%F)" = "$day" ] || fail "the UTC day changed during the test: run it again"
