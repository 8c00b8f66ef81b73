# `make try-kafka` and `make try-nats` (scripts/try.sh, issue 44 item 17):
# each starts its broker, a relay and, for Kafka, a throwaway PostgreSQL,
# and exits 0 only when the three events it sends were read back by a
# client the project did not write (kcat; the nats npm client).  Here the
# events must also show in its output, and nothing may be left running or
# on disk.  NATS runs on the test's database (--db), twice: a second run
# on the same database counts only its own events.
. "$(dirname "$0")/../lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
before=$(ls -d /tmp/pgoutbox-try.* 2>/dev/null | sort || true)
try_sink() {
	local out=$1; shift
	local rc=0
	"$root/scripts/try.sh" "$@" --bin "$PGO_BIN" >"$out" 2>&1 || rc=$?
	[ "$rc" = 0 ] || fail "try.sh $*: exit $rc: $(tail -20 "$out")"
	grep -q "done: 3 events went from PostgreSQL through the relay into $1" "$out" ||
		fail "try.sh $*: no done line: $(tail -5 "$out")"
}

try_sink "$T_TMP/kafka.out" kafka
# kcat's lines: partition, offset, key, headers, then the value.
[ "$(grep -c '^partition .* key o-1 headers id=[0-9]*,type=order\.' "$T_TMP/kafka.out")" = 2 ] ||
	fail "kafka: kcat did not show o-1's two events: $(cat "$T_TMP/kafka.out")"
grep -q 'type=order.paid,.*traceparent=00-4bf92f' "$T_TMP/kafka.out" || fail "kafka: no traceparent header"
grep -qF '{"total": 7, "order_id": 2}' "$T_TMP/kafka.out" || fail "kafka: o-2's value did not arrive"
note "try-kafka: 3 events read by kcat from the mock cluster"

t_db
for run in 1 2; do
	try_sink "$T_TMP/nats$run.out" nats --db "$DATABASE_URL"
	[ "$(grep -c '^{"seq":[0-9]*,"subject":"try.orders"' "$T_TMP/nats$run.out")" = 3 ] ||
		fail "nats run $run: the nats npm client did not print 3 messages: $(cat "$T_TMP/nats$run.out")"
	grep -qF '"Pgoutbox-Type":"order.paid"' "$T_TMP/nats$run.out" || fail "nats run $run: no order.paid"
done
[ "$(q "SELECT count(*) FROM pgoutbox.outbox")" = 0 ] || fail "events left in the outbox"
note "try-nats: 3 events read by the nats npm client, twice on one database"

after=$(ls -d /tmp/pgoutbox-try.* 2>/dev/null | sort || true)
[ "$after" = "$before" ] || fail "try.sh left $(comm -13 <(echo "$before") <(echo "$after"))"
# Its PostgreSQL and nats-server name its directory; its kafka_mock holds
# files there open.
left=$(pgrep -af pgoutbox-try || true)
for p in $(pgrep -x kafka_mock || true); do
	for f in /proc/"$p"/fd/*; do
		case $(readlink "$f" 2>/dev/null) in
		/tmp/pgoutbox-try.*) left="$left kafka_mock $p"; break ;;
		esac
	done
done
[ -z "$left" ] || fail "try.sh left running: $left"
