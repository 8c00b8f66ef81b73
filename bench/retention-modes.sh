#!/usr/bin/env bash
# bench/retention-modes.sh — the figures of issue 7 per retention mode (not
# part of make bench; about 6 minutes): drain of 100,000 events (concurrent
# and ordered), a snapshot held 30 s under 40,000 events/s, and drain after
# 2,000,000 events went through, for delete and archive mode, on one
# throwaway cluster.  Needs the release build (make build).
# Results of a run: bench/results/retention-2026-11-30.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh
unset PG_PORT
DIR=$(mktemp -d /tmp/pgoutbox-retention.XXXXXX)
chmod 755 "$DIR"
pg_start "$DIR/pg" shared_buffers=256MB fsync=on synchronous_commit=on max_wal_size=4GB checkpoint_timeout=30min >/dev/null
trap 'pg_stop; rm -rf "$DIR"' EXIT
B=build/bench/pgoutbox-bench
RELAY="build/pgoutbox relay --sink stdout --batch 1000 --in-flight 2"
for mode in delete archive; do
	psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE a_$mode"
	U=$(pg_url a_$mode)
	build/pgoutbox migrate --db "$U" >/dev/null 2>&1
	build/pgoutbox maintain --db "$U" --retention $mode >/dev/null 2>&1
	echo "== $mode: drain 100000, concurrent, median of 3"
	$B drain --events 100000 --relays 1 --repeat 3 --timeout 120 --relay-cmd "$RELAY --mode concurrent" --db "$U" 2>&1 | grep -E "events_per_s|seconds" | tail -2
	echo "== $mode: drain 100000, ordered, median of 3"
	$B drain --events 100000 --relays 1 --repeat 3 --timeout 120 --relay-cmd "$RELAY" --db "$U" 2>&1 | grep -E "events_per_s" | tail -1
	psql -XAtq "$U" -c "TRUNCATE pgoutbox.outbox" -c CHECKPOINT
	echo "== $mode: held xmin 30 s at 40000/s, then 10 s"
	$B latency --hold-xmin --seconds 30 --after 10 --rate 40000 --producers 2 --per-tx 100 --insert --window 5 --warmup 1 --grace 60 --relay-cmd "$RELAY" --db "$U" 2>&1 | grep -E "during_|after_|lost|rate_ach"
	psql -XAtq "$U" -c "TRUNCATE pgoutbox.outbox" -c CHECKPOINT
	echo "== $mode: history 2,000,000 then drain 100000 (concurrent), median of 3"
	$B history --history 2000000 --events 100000 --repeat 3 --timeout 300 --relay-cmd "$RELAY --mode concurrent" --db "$U" 2>&1 | grep -E "fresh_|history_|after_" 
	[ $mode = archive ] && psql -XAtq "$U" -c "SELECT (SELECT count(*) FROM pgoutbox.outbox_archive), pg_size_pretty(sum(pg_total_relation_size(inhrelid))) FROM pg_inherits WHERE inhparent = 'pgoutbox.outbox_archive'::regclass" 2>/dev/null || true
done
