# rabbitmq.sh — sourced helpers that run a throwaway RabbitMQ node in a
# directory, like redis.sh: its own node name (pgo-test-PID@localhost), a
# free AMQP port on 127.0.0.1 and a free distribution port, its own
# database, logs, config, plugins file and Erlang cookie (HOME) in the
# directory.  It never touches a system rabbitmq-server.  Erlang boots in
# seconds on a small machine: start one node per test file.
#
#   rabbit_start DIR DEFS_JSON   starts the node with DEFS_JSON as its
#                                definitions and RABBIT_EXTRA_CONF's lines
#                                in its rabbitmq.conf; DEFS_JSON has the
#                                users, vhosts, exchanges, queues and
#                                bindings (see rabbit_pw_hash);
#                                sets RABBIT_PORT, RABBIT_NODE, RABBIT_URL
#                                (amqp://relay:s3cr3t@127.0.0.1:PORT/%2f)
#   rabbit_stop                  clean stop (SIGTERM), waits for the exit
#   rabbit_start_again           same node, port and data
#   rabbit_kill9                 crash it
#   rctl ARGS...                 rabbitmqctl against it
#   rabbit_pw_hash PASSWORD      a password_hash for the definitions

rabbit_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

rabbit_pw_hash() {
	python3 -c 'import base64, hashlib, os, sys
salt = os.urandom(4)
print(base64.b64encode(salt + hashlib.sha256(salt + sys.argv[1].encode()).digest()).decode())' "$1"
}

rabbit_env() {
	env HOME="$RABBIT_DIR" \
		RABBITMQ_NODENAME="$RABBIT_NODE" \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT="$RABBIT_PORT" \
		RABBITMQ_DIST_PORT="$RABBIT_DIST_PORT" \
		RABBITMQ_MNESIA_BASE="$RABBIT_DIR/mnesia" \
		RABBITMQ_LOG_BASE="$RABBIT_DIR/log" \
		RABBITMQ_CONFIG_FILE="$RABBIT_DIR/rabbitmq.conf" \
		RABBITMQ_ADVANCED_CONFIG_FILE="$RABBIT_DIR/advanced.config" \
		RABBITMQ_CONF_ENV_FILE="$RABBIT_DIR/rabbitmq-env.conf" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$RABBIT_DIR/enabled_plugins" \
		RABBITMQ_PID_FILE="$RABBIT_DIR/rabbit.pid" \
		"$@"
}

rctl() { rabbit_env "$RABBIT_BIN/rabbitmqctl" -q -n "$RABBIT_NODE" "$@"; }

rabbit_start() {
	local dir=$1 defs=$2
	RABBIT_BIN=/usr/lib/rabbitmq/bin
	[ -x "$RABBIT_BIN/rabbitmq-server" ] || RABBIT_BIN=$(dirname "$(command -v rabbitmq-server 2>/dev/null || echo /nonexistent/x)")
	[ -x "$RABBIT_BIN/rabbitmq-server" ] || { echo "rabbitmq.sh: rabbitmq-server not found (apt-get install rabbitmq-server)" >&2; return 1; }
	RABBIT_DIR=$(mkdir -p "$dir/log" && cd "$dir" && pwd)
	RABBIT_NODE=pgo-test-$$@localhost
	RABBIT_PORT=$(rabbit_free_port)
	RABBIT_DIST_PORT=$(rabbit_free_port)
	RABBIT_URL="amqp://relay:s3cr3t@127.0.0.1:$RABBIT_PORT/%2f"
	cp "$defs" "$RABBIT_DIR/definitions.json"
	cat >"$RABBIT_DIR/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$RABBIT_PORT
load_definitions = $RABBIT_DIR/definitions.json
loopback_users = none
disk_free_limit.absolute = 10MB
log.file.level = info
log.console = false
${RABBIT_EXTRA_CONF:-}
CONF
	echo '[].' >"$RABBIT_DIR/enabled_plugins"
	: >"$RABBIT_DIR/rabbitmq-env.conf"
	export RABBIT_BIN RABBIT_DIR RABBIT_NODE RABBIT_PORT RABBIT_DIST_PORT RABBIT_URL
	rabbit_start_again
}

rabbit_start_again() {
	rm -f "$RABBIT_DIR/rabbit.pid"
	rabbit_env "$RABBIT_BIN/rabbitmq-server" >>"$RABBIT_DIR/server.out" 2>&1 &
	RABBIT_SH_PID=$!
	export RABBIT_SH_PID
	if ! rctl wait --timeout 120 "$RABBIT_DIR/rabbit.pid" >"$RABBIT_DIR/wait.out" 2>&1; then
		echo "rabbitmq.sh: the node did not start" >&2
		cat "$RABBIT_DIR/wait.out" >&2
		tail -n 30 "$RABBIT_DIR/server.out" "$RABBIT_DIR"/log/*.log >&2 2>/dev/null
		return 1
	fi
	RABBIT_PID=$(cat "$RABBIT_DIR/rabbit.pid")
	export RABBIT_PID
}

rabbit_stop() {
	[ -n "${RABBIT_PID:-}" ] || return 0
	kill -TERM "$RABBIT_PID" 2>/dev/null || true
	local i
	for i in $(seq 600); do
		kill -0 "$RABBIT_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$RABBIT_PID" 2>/dev/null || true
	wait "$RABBIT_SH_PID" 2>/dev/null || true
	RABBIT_PID=
}

rabbit_kill9() {
	[ -n "${RABBIT_PID:-}" ] || return 0
	kill -9 "$RABBIT_PID" 2>/dev/null || true
	wait "$RABBIT_SH_PID" 2>/dev/null || true
	RABBIT_PID=
}

# Installs amqplib (tests/amqp/package-lock.json) on first use; sets AMQP_JS.
amqplib_ready() {
	AMQP_JS=$(cd "$(dirname "${BASH_SOURCE[0]}")/amqp" && pwd)
	command -v node >/dev/null || fail "node not found (needed for amqplib)"
	if [ ! -f "$AMQP_JS/node_modules/amqplib/package.json" ] ||
		[ "$AMQP_JS/package-lock.json" -nt "$AMQP_JS/node_modules/.package-lock.json" ]; then
		note "installing amqplib with npm ci in tests/amqp"
		(cd "$AMQP_JS" && flock "$AMQP_JS/package-lock.json" \
			npm ci --no-audit --no-fund --loglevel=error) >"$T_TMP/npm.log" 2>&1 ||
			{ cat "$T_TMP/npm.log" >&2; fail "npm ci in tests/amqp failed"; }
	fi
	export AMQP_JS
}
# The messages of a queue as JSON lines (amqplib, basic.get), acked.
amqp_drain() { node "$AMQP_JS/drain.js" "$RABBIT_URL" "$@"; }
# The number of messages ready in a queue.
amqp_count() { node "$AMQP_JS/count.js" "$RABBIT_URL" "$1" | awk '{print $2}'; }
