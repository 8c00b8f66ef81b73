# What the nats sink cannot fix by itself, each with a clear error and
# nothing lost: a refused password (the relay keeps trying, events wait
# without attempts), no stream bound to the subject (retried with an error
# naming the subject, delivered once a stream exists), a full stream with
# discard new (retried with the server's text until there is room), a
# message larger than the stream takes (dead-lettered with the server's
# text), and an NKey user authenticated with the seed file alone.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../nats.sh"
trap 'cleanup_pids; nats_stop' EXIT
export PGOUTBOX_RELAY_RETRY_BASE=100ms PGOUTBOX_RELAY_RETRY_MAX=300ms PGOUTBOX_RELAY_MAX_ATTEMPTS=1000
t_db
send() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT '$1', 'x', jsonb_build_object('i', i) FROM generate_series(1, $2) i"; }

# 1. A wrong password.
export NATS_USER=relay NATS_PASS=right
nats_start "$T_TMP/nats" --user relay --pass right
js create S ok
send ok 10
start_relay "$T_TMP/wrongpw" --sink nats --nats-url "nats://relay:wrong@127.0.0.1:$NATS_PORT" --poll-interval 300ms
wait_until 15 'grep -q "cannot connect to 127.0.0.1:$NATS_PORT: Authorization Violation" "$T_TMP/wrongpw.log"'
grep -q ':wrong@' "$T_TMP/wrongpw.log" && fail "the password appears in the log"
sleep 1
kill -0 "$RELAY_PID" || fail "the relay exited on a refused password"
[ "$(pending)" = 10 ] || fail "events left the outbox with the password refused"
[ "$(q 'SELECT max(attempts) FROM pgoutbox.outbox')" = 0 ] || fail "events spent attempts on a refused password"
stop_relay "$RELAY_PID"
note "wrong password: $(grep -i -m1 'authorization violation' "$T_TMP/wrongpw.log" | sed 's/.*sink nats: //')"

URL="nats://relay:right@127.0.0.1:$NATS_PORT"
start_relay "$T_TMP/relay" --sink nats --nats-url "$URL" --poll-interval 300ms
relay=$RELAY_PID
wait_until 15 '[ "$(pending)" = 0 ]'

# 2. No stream bound to the subject.
send nostream 5
wait_until 15 '[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE last_error LIKE '"'"'%no JetStream stream is bound to subject \"nostream\"%'"'"'")" = 5 ]'
note "no stream: $(q "SELECT last_error FROM pgoutbox.outbox LIMIT 1")"
js create NS 'nostream'
wait_until 15 '[ "$(pending)" = 0 ]'
[ "$(js info NS)" = 5 ] || fail "expected the 5 events in the new stream"

# 3. A full stream with discard new.
js create FULL 'full2' max_msgs=5 'discard="new"'
send full2 10
wait_until 15 '[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE last_error LIKE '"'"'%maximum messages exceeded%'"'"'")" = 5 ]'
[ "$(js info FULL)" = 5 ] || fail "expected 5 messages in the full stream"
note "full: $(q "SELECT last_error FROM pgoutbox.outbox LIMIT 1")"
js update FULL 'full2' max_msgs=100 'discard="new"'
wait_until 15 '[ "$(pending)" = 0 ]'
[ "$(js info FULL)" = 10 ] || fail "expected the 10 events once the stream had room"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters from a full stream"

# 4. A message larger than the stream takes: dead-lettered at once.
js create SMALL 'small' max_msg_size=300
q "INSERT INTO pgoutbox.outbox (topic, type, payload) VALUES ('small', 'x', jsonb_build_object('pad', repeat('x', 500)))"
q "INSERT INTO pgoutbox.outbox (topic, type, payload) VALUES ('small', 'x', '{}')"
wait_until 15 '[ "$(pending)" = 0 ]'
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 1 ] || fail "expected the large event in the dead letters"
q "SELECT last_error FROM pgoutbox.dead_letters" | qgrep "message size exceeds maximum" || fail "dead letter without the server's text: $(q 'SELECT last_error FROM pgoutbox.dead_letters')"
[ "$(js info SMALL)" = 1 ] || fail "expected the small event in the stream"
note "too large: $(q 'SELECT last_error FROM pgoutbox.dead_letters')"
stop_relay "$relay"

# 5. An NKey user: the relay signs with the seed file alone (its public key
# derived from the seed); the documentation's example pair.
nats_stop
cat >"$T_TMP/nkey.conf" <<'CONF'
authorization {
  users = [
    { user: admin, password: adminpw }
    { nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4 }
  ]
}
CONF
echo SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY >"$T_TMP/user.nk"
NATS_PORT=
export NATS_USER=admin NATS_PASS=adminpw
nats_start "$T_TMP/nats_nkey" -c "$T_TMP/nkey.conf"
js create NK 'nk'
send nk 20
start_relay "$T_TMP/relay_nkey" --sink nats --nats-url "$NATS_URL" --nats-nkey "$T_TMP/user.nk"
wait_until 15 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(js info NK)" = 20 ] || fail "expected 20 events through the NKey user"
note "NKey user: 20 events, public key derived from the seed"
