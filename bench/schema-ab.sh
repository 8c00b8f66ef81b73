#!/usr/bin/env bash
# schema-ab.sh BUILD FROM TO [ROUNDS] — one send() per transaction under
# two schema versions of pgoutbox, interleaved on one throwaway
# PostgreSQL (a database each, migrated by BUILD with --to FROM and --to
# TO), with pgbench (-M prepared, 5 s per run, 8 clients then 1), and a
# plain one-row INSERT as the limit.  For claims that a migration made
# send() cheaper, measured side by side (docs/benchmarks.md, "Morning of
# 2026-12-03"):
#   bench/schema-ab.sh build 16 17 3
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: bench/schema-ab.sh BUILD FROM TO [ROUNDS]}
FROM=${2:?usage: bench/schema-ab.sh BUILD FROM TO [ROUNDS]}
TO=${3:?usage: bench/schema-ab.sh BUILD FROM TO [ROUNDS]}
ROUNDS=${4:-3}
. scripts/pg.sh
TMP=$(mktemp -d /tmp/pgoutbox-schema-ab.XXXXXX)
chmod 755 "$TMP"
cleanup() { pg_stop; rm -rf "$TMP"; }
trap cleanup EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=on \
	max_wal_size=4GB checkpoint_timeout=30min >/dev/null
for v in "$FROM" "$TO"; do
	psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE v$v" >/dev/null
	"$BUILD/pgoutbox" migrate --db "$(pg_url "v$v")" --to "$v" >/dev/null 2>&1
	psql -XAtq "$(pg_url "v$v")" -c "CREATE TABLE bench_plain (id bigserial PRIMARY KEY, payload jsonb)"
done
echo "SELECT pgoutbox.send(:topic, :key, :type, :payload::jsonb);" >"$TMP/send.sql"
echo "INSERT INTO bench_plain (payload) VALUES (:payload::jsonb);" >"$TMP/plain.sql"
P='{"id": 42, "customer": "c-1001", "total": 99.5, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}], "note": "benchmark payload of about two hundred bytes ......"}'
run() { # DB SCRIPT CLIENTS -> tps
	pgbench -n -T 5 -c "$3" -j "$([ "$3" -gt 1 ] && echo 2 || echo 1)" -M prepared \
		-D topic=orders -D key=k1 -D type=order.created -D "payload=$P" \
		-f "$TMP/$2.sql" "$(pg_url "$1")" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1
}
printf '%-6s %-8s %7s %12s %12s %6s %5s\n' round clients limit "send v$FROM" "send v$TO" "v$FROM" "v$TO"
for r in $(seq "$ROUNDS"); do
	for c in 8 1; do
		limit=$(run "v$FROM" plain "$c")
		a=$(run "v$FROM" send "$c")
		b=$(run "v$TO" send "$c")
		printf '%-6s %-8s %7.0f %12.0f %12.0f %6.2f %5.2f\n' "$r" "$c" "$limit" "$a" "$b" \
			"$(echo "$a / $limit" | bc -l)" "$(echo "$b / $limit" | bc -l)"
		for v in "$FROM" "$TO"; do
			psql -XAtq "$(pg_url "v$v")" -c "TRUNCATE pgoutbox.outbox, bench_plain"
		done
	done
done
