# The nats sink over TLS: a nats-server with a certificate of a CA made
# here; the relay verifies it with sink.nats_tls_ca (tls:// URL), and with
# --tlsverify on the server it authenticates with a client certificate
# (sink.nats_tls_cert, sink.nats_tls_key).  A relay without the CA cannot
# connect (logged, events wait without attempts).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../nats.sh"
trap 'cleanup_pids; nats_stop' EXIT
command -v openssl >/dev/null || fail "openssl not found"
P=$T_TMP/pki
mkdir -p "$P"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=pgoutbox-test-ca \
	-keyout "$P/ca.key" -out "$P/ca.pem" 2>/dev/null
cert() { # name CN ext
	openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$P/$1.key" -out "$P/$1.csr" 2>/dev/null
	printf '%s\n' "$3" >"$P/$1.ext"
	openssl x509 -req -in "$P/$1.csr" -CA "$P/ca.pem" -CAkey "$P/ca.key" -CAcreateserial \
		-days 1 -extfile "$P/$1.ext" -out "$P/$1.pem" 2>/dev/null
}
cert server 127.0.0.1 'subjectAltName=IP:127.0.0.1'
cert client relay 'extendedKeyUsage=clientAuth'
t_db
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=300ms
send() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'tls', 'x', jsonb_build_object('i', i) FROM generate_series(1, $1) i"; }

# 1. Server certificate verified with the CA.
export NATS_CA=$P/ca.pem
nats_start "$T_TMP/nats" --tls --tlscert "$P/server.pem" --tlskey "$P/server.key"
js create T 'tls'
send 50
PGOUTBOX_SINK_NATS_TLS_CA=$P/ca.pem start_relay "$T_TMP/relay" --sink nats --nats-url "tls://127.0.0.1:$NATS_PORT"
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(js info T)" = 50 ] || fail "expected 50 events over TLS"

# 2. Without the CA the server's certificate is refused: nothing leaves.
send 10
start_relay "$T_TMP/relay_noca" --sink nats --nats-url "tls://127.0.0.1:$NATS_PORT"
wait_until 15 'grep -q "cannot connect to 127.0.0.1:$NATS_PORT" "$T_TMP/relay_noca.log"'
sleep 0.5
[ "$(pending)" = 10 ] || fail "events left the outbox with an unverified server"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "attempts spent on a TLS failure"
stop_relay "$RELAY_PID"
note "no CA: $(grep -m1 'cannot connect' "$T_TMP/relay_noca.log" | sed 's/.*sink nats: //')"

# 3. A server that wants a client certificate.
nats_stop
export NATS_CERT=$P/client.pem NATS_KEY=$P/client.key
NATS_ARGS+=(--tlsverify --tlscacert "$P/ca.pem")
nats_start_again
PGOUTBOX_SINK_NATS_TLS_CA=$P/ca.pem PGOUTBOX_SINK_NATS_TLS_CERT=$P/client.pem \
	PGOUTBOX_SINK_NATS_TLS_KEY=$P/client.key \
	start_relay "$T_TMP/relay_mtls" --sink nats --nats-url "tls://127.0.0.1:$NATS_PORT"
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(js info T)" = 60 ] || fail "expected 60 events with a client certificate"
note "TLS: server verified with the CA; client certificate accepted"
