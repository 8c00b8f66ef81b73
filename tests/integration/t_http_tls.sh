# The http sink over TLS, with a CA, a server and a client certificate made
# by openssl here: verification is on (the system's CAs do not know the
# test CA: a clear error in the log, no attempt spent, nothing delivered),
# sink.http_ca_file makes it verify; with mutual TLS the receiver refuses a
# relay without sink.http_cert/http_key and takes one with them.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../http.sh"
trap 'cleanup_pids; http_stop' EXIT

pki=$T_TMP/pki
mkdir -p "$pki"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
(
	cd "$pki"
	openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=pgoutbox-test-ca
	openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=127.0.0.1
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
	openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext
	openssl req "${ec[@]}" -keyout client.key -out client.csr -subj /CN=pgoutbox-relay
	printf 'extendedKeyUsage=clientAuth\n' >client.ext
	openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext
) >"$T_TMP/openssl.log" 2>&1 || { cat "$T_TMP/openssl.log" >&2; fail "openssl"; }

SECRET=whsec_$(openssl rand -base64 32)
export PGOUTBOX_SINK_HTTP_SECRET=$SECRET PGOUTBOX_RELAY_RETRY_BASE=100ms
t_db
send() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT '$1', 'x', jsonb_build_object('i', i) FROM generate_series(1, $2) i RETURNING id" | sort -n; }

# 1. TLS: the test CA is unknown without sink.http_ca_file.
http_start "$T_TMP/recv" VERIFY_SECRETS="$SECRET" TLS_KEY="$pki/server.key" TLS_CERT="$pki/server.pem"
[[ $HTTP_URL == https://* ]] || fail "the receiver is not on https"
sent=$(send tls 50)
start_relay "$T_TMP/relay1" --sink http --http-url "$HTTP_URL/tls" --poll-interval 200ms
wait_until 20 'grep -q "TLS failed" "$T_TMP/relay1.log"'
grep "TLS failed" "$T_TMP/relay1.log" | sed -n 1p | qgrep "certificate" ||
	fail "the TLS error does not say what is wrong: $(grep "TLS failed" "$T_TMP/relay1.log" | head -1)"
grep -q "ERROR" "$T_TMP/relay1.log" || fail "a verification failure is not logged as an error"
[ "$(q "SELECT max(attempts) FROM pgoutbox.outbox")" = 0 ] || fail "a TLS failure spent attempts"
[ "$(http_requests)" = 0 ] || fail "requests arrived although verification failed"
note "unverified: $(grep -o 'TLS failed: .*' "$T_TMP/relay1.log" | head -1)"
stop_relay "$RELAY_PID"
start_relay "$T_TMP/relay2" --sink http --http-url "$HTTP_URL/tls" --http-ca-file "$pki/ca.pem" --poll-interval 200ms
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(http_missing <(echo "$sent"))" = 0 ] || fail "TLS: events missing"
grep -q '"valid":false' "$HTTP_DIR/requests.ndjson" && fail "a request did not verify"
note "with sink.http_ca_file: 50 of 50 delivered over TLS"
http_stop

# 2. Mutual TLS: the receiver asks for a client certificate of the CA.
http_start "$T_TMP/recv_mtls" VERIFY_SECRETS="$SECRET" TLS_KEY="$pki/server.key" \
	TLS_CERT="$pki/server.pem" TLS_CA="$pki/ca.pem"
sent=$(send mtls 50)
start_relay "$T_TMP/relay3" --sink http --http-url "$HTTP_URL/mtls" --http-ca-file "$pki/ca.pem" --poll-interval 200ms
wait_until 20 'grep -q "sink down" "$T_TMP/relay3.log"'
[ "$(q "SELECT max(attempts) FROM pgoutbox.outbox")" = 0 ] || fail "a refused handshake spent attempts"
[ "$(http_requests)" = 0 ] || fail "requests arrived without a client certificate"
note "no client certificate: $(grep -o 'sink down.*' "$T_TMP/relay3.log" | head -1)"
stop_relay "$RELAY_PID"
PGOUTBOX_SINK_HTTP_CERT=$pki/client.pem PGOUTBOX_SINK_HTTP_KEY=$pki/client.key \
	start_relay "$T_TMP/relay4" --sink http --http-url "$HTTP_URL/mtls" --http-ca-file "$pki/ca.pem" --poll-interval 200ms
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(http_missing <(echo "$sent"))" = 0 ] || fail "mTLS: events missing"
grep -q '"valid":false' "$HTTP_DIR/requests.ndjson" && fail "a request did not verify"
note "mutual TLS: 50 of 50 delivered with the client certificate"
