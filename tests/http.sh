# http.sh — sourced helpers that run the webhook receiver of the tests
# (tests/http/receiver.js, node, verifying every request with the
# standardwebhooks package), like redis.sh does for redis-server: a free
# port on 127.0.0.1, its log lines in a directory.
#
#   http_start DIR [VAR=value...]  sets HTTP_DIR, HTTP_PORT, HTTP_URL
#                                  (http or https://127.0.0.1:PORT); the
#                                  receiver's environment (VERIFY_SECRETS,
#                                  TLS_*) goes as arguments
#   http_stop / http_kill9         stop it (SIGTERM) / crash it
#   http_start_again               same port, directory and environment
#   hctl JSON                      POST JSON to /_control (how to fail)
#   HTTP_DIR/requests.ndjson       one line per request (receiver.js)
#   HTTP_DIR/events.ndjson         the events answered 2xx, in order
HTTP_NODE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/http" && pwd)

# Installs standardwebhooks on first use (package-lock.json).
http_npm() {
	command -v node >/dev/null || { echo "http.sh: node not found" >&2; return 1; }
	if [ ! -f "$HTTP_NODE_DIR/node_modules/standardwebhooks/package.json" ] ||
		[ "$HTTP_NODE_DIR/package-lock.json" -nt "$HTTP_NODE_DIR/node_modules/.package-lock.json" ]; then
		(cd "$HTTP_NODE_DIR" && flock "$HTTP_NODE_DIR/package-lock.json" \
			npm ci --no-audit --no-fund --loglevel=error) >&2 ||
			{ echo "http.sh: npm ci in tests/http failed" >&2; return 1; }
	fi
}

http_start() {
	local dir=$1; shift
	http_npm || return 1
	HTTP_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	HTTP_ENV=("$@")
	HTTP_PORT=
	HTTP_SCHEME=http
	for kv in "$@"; do [[ $kv == TLS_CERT=* ]] && HTTP_SCHEME=https; done
	http_start_again || return 1
	HTTP_URL=$HTTP_SCHEME://127.0.0.1:$HTTP_PORT
	export HTTP_DIR HTTP_PORT HTTP_URL
}

http_start_again() {
	rm -f "$HTTP_DIR/port"
	env "${HTTP_ENV[@]}" PORT="${HTTP_PORT:-0}" PORT_FILE="$HTTP_DIR/port" \
		LOG="$HTTP_DIR/requests.ndjson" EVENTS="$HTTP_DIR/events.ndjson" \
		node "$HTTP_NODE_DIR/receiver.js" >>"$HTTP_DIR/receiver.log" 2>&1 &
	HTTP_PID=$!
	export HTTP_PID
	local i
	for i in $(seq 200); do
		if [ -s "$HTTP_DIR/port" ]; then
			HTTP_PORT=$(cat "$HTTP_DIR/port")
			return 0
		fi
		kill -0 "$HTTP_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "http.sh: the receiver did not start" >&2
	tail -n 20 "$HTTP_DIR/receiver.log" >&2
	return 1
}

http_stop() {
	[ -n "${HTTP_PID:-}" ] || return 0
	kill -TERM "$HTTP_PID" 2>/dev/null || true
	wait "$HTTP_PID" 2>/dev/null || true
	HTTP_PID=
}

http_kill9() {
	[ -n "${HTTP_PID:-}" ] || return 0
	kill -9 "$HTTP_PID" 2>/dev/null || true
	wait "$HTTP_PID" 2>/dev/null || true
	HTTP_PID=
}

hctl() {
	curl -sf ${HTTP_CTL_OPTS:-} -X POST --data "$1" "$HTTP_URL/_control" >/dev/null
}

# The distinct event ids answered 2xx, sorted.
http_ok_ids() {
	python3 -c 'import json, sys
for l in open(sys.argv[1]): print(int(json.loads(l)["id"]))' "$HTTP_DIR/events.ndjson" | sort -n | uniq
}
# Requests logged so far.
http_requests() { cat "$HTTP_DIR/requests.ndjson" 2>/dev/null | wc -l; }
# How many of the event ids in file $1 (one a line) were not answered 2xx.
http_missing() {
	python3 -c 'import json, sys
got = {int(json.loads(l)["id"]) for l in open(sys.argv[2])}
print(sum(1 for l in open(sys.argv[1]) if l.strip() and int(l) not in got))' "$1" "$HTTP_DIR/events.ndjson"
}
