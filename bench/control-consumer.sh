#!/usr/bin/env bash
# control-consumer.sh INTERVAL_MS [TABLE] — the least a consumer of the
# rows can do, for bench/consume-control.sh: pgbench, one client, one
# statement every INTERVAL_MS milliseconds with synchronous_commit off (as
# the relay commits):
#
#   WITH d AS (DELETE FROM TABLE WHERE id > :hw RETURNING id, payload)
#   SELECT max(id), ... FROM d
#
# so each statement takes what was committed since the last one through
# the primary key, from the highest id it took so far.  No order, no
# claim floor, no LISTEN, no sink, no output: a row committed after one
# with a higher id is never taken (the consumer does less than any real
# one, which is the point of a floor).  TABLE is bench_plain (default) or
# pgoutbox.outbox.  pgoutbox-bench's --relay-cmd starts it and stops it
# with SIGTERM, and wants exit status 0.
set -u
cd "$(dirname "$0")/.." || exit 2
INTERVAL=${1:?usage: control-consumer.sh INTERVAL_MS [TABLE]}
TABLE=${2:-bench_plain}
case $INTERVAL in '' | *[!0-9]*)
	echo "control-consumer.sh: INTERVAL_MS is a whole number" >&2
	exit 2
	;;
esac
case $TABLE in bench_plain | pgoutbox.outbox) ;; *)
	echo "control-consumer.sh: TABLE is bench_plain or pgoutbox.outbox" >&2
	exit 2
	;;
esac
. scripts/pg.sh
BIN=$(pg_bindir) || exit 2
SCRIPT=$(mktemp /tmp/pgoutbox-consumer.XXXXXX)
cat >"$SCRIPT" <<EOF
WITH d AS (DELETE FROM $TABLE WHERE id > :hw RETURNING id, payload) SELECT coalesce(max(id), :hw) AS hw, coalesce(sum(length(payload::text)), 0) AS bytes FROM d \gset
\sleep $INTERVAL ms
EOF
PGOPTIONS="-c synchronous_commit=off" "$BIN/pgbench" -n -c 1 -T 86400 \
	-M prepared -D hw=0 -f "$SCRIPT" "${DATABASE_URL:?}" >/dev/null &
p=$!
trap 'kill $p 2>/dev/null; wait $p 2>/dev/null; rm -f "$SCRIPT"; exit 0' TERM INT
wait $p
echo "control-consumer.sh: pgbench ended on its own" >&2
rm -f "$SCRIPT"
exit 1
