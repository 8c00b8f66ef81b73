# examples/node (pg): an order and its event in one transaction, a
# send_batch, and a consumer with the inbox, against PostgreSQL and a
# relay (tests/examples.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../examples.sh"
command -v node >/dev/null || fail "node not found"
dir=$EXAMPLES_DIR/node
if [ ! -f "$dir/node_modules/pg/package.json" ] ||
	[ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
	(cd "$dir" && flock "$dir/package-lock.json" npm ci --no-audit --no-fund --loglevel=error) >"$T_TMP/npm.log" 2>&1 ||
		fail "npm ci in examples/node: $(tail -5 "$T_TMP/npm.log")"
fi
examples_run "node '$dir/producer.js'" "node '$dir/consumer.js'"
