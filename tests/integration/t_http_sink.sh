# The http sink against a real HTTP server (tests/http/receiver.js) that
# verifies every request with `standardwebhooks`, the Standard Webhooks
# spec's own library: every event arrives once acknowledged, with
# webhook-id = Idempotency-Key = the event id, the event's traceparent and
# tracestate, extra headers, and a signature that verifies with each of two
# secrets (rotation); the receiver refuses a bad signature (so the check
# can fail).  Then sink.http_batch = 10 with CloudEvents bodies: JSON
# arrays, one verdict each.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../http.sh"
trap 'cleanup_pids; http_stop' EXIT

OLD=whsec_$(openssl rand -base64 32)
NEW=whsec_$(openssl rand -base64 24)
http_start "$T_TMP/recv" VERIFY_SECRETS="$OLD $NEW"
t_db
export PGOUTBOX_SINK_HTTP_SECRET="$OLD $NEW"
export PGOUTBOX_SINK_HTTP_HEADERS="X-Extra: one | Authorization: Bearer t0ken"

# The receiver verifies for real: a wrong signature gets 401.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$HTTP_URL/x" \
	-H 'webhook-id: 1' -H "webhook-timestamp: $(date +%s)" \
	-H 'webhook-signature: v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' --data '{}')
[ "$code" = 401 ] || fail "the receiver accepted a bad signature ($code)"
: >"$HTTP_DIR/requests.ndjson"

# 1. One event a request, the event body, 16 in flight.
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers)
   SELECT 'orders', 'k' || (i % 7), 'order.created', jsonb_build_object('i', i),
          jsonb_build_object('traceparent', format('00-%s-00f067aa0ba902b7-01', lpad(to_hex(i), 32, '0')),
                             'tracestate', 'pgo=' || i)
   FROM generate_series(1, 300) i RETURNING id" | sort -n >"$T_TMP/sent1"
start_relay "$T_TMP/relay1" --sink http --http-url "$HTTP_URL/hooks/{topic}" --poll-interval 200ms
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
grep -q 'posting to http://127.0.0.1' "$T_TMP/relay1.log" || fail "no start line in the relay log"
grep -q "${OLD#whsec_}\|${NEW#whsec_}\|t0ken" "$T_TMP/relay1.log" && fail "a secret is in the relay log"
http_ok_ids >"$T_TMP/got1"
cmp -s "$T_TMP/sent1" "$T_TMP/got1" || fail "delivered ids differ from the sent ones ($(wc -l <"$T_TMP/got1") of 300)"
python3 - "$HTTP_DIR/requests.ndjson" <<'PY' || fail "a request is not as the spec says"
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    n += 1
    assert r["valid"], ("signature", r)
    assert r["status"] == 200, r
    assert len(r["events"]) == 1, r
    i = r["events"][0]
    assert r["id"] == str(i) and r["idem"] == str(i), r
    assert r["path"] == "/hooks/orders", r
    assert r["ctype"] == "application/json", r
    assert r["extra"] == "one", r
    assert len(r["sig"].split(" ")) == 2 and all(s.startswith("v1,") for s in r["sig"].split(" ")), r
    assert r["traceparent"].startswith("00-") and r["traceparent"].endswith("-00f067aa0ba902b7-01"), r
    assert r["tracestate"].startswith("pgo="), r
assert n >= 300, n
print("  %d requests, all verified with both secrets" % n, file=sys.stderr)
PY

# 2. Ten events a request as CloudEvents (a batch: a JSON array).
: >"$HTTP_DIR/requests.ndjson"
: >"$HTTP_DIR/events.ndjson"
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'orders', 'k' || i, 'order.paid', jsonb_build_object('i', i)
   FROM generate_series(1, 200) i RETURNING id" | sort -n >"$T_TMP/sent2"
start_relay "$T_TMP/relay2" --sink http --http-url "$HTTP_URL/ce" --http-batch 10 --http-body cloudevents --poll-interval 200ms
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
http_ok_ids >"$T_TMP/got2"
cmp -s "$T_TMP/sent2" "$T_TMP/got2" || fail "CloudEvents batches: delivered ids differ from the sent ones"
python3 - "$HTTP_DIR/requests.ndjson" "$HTTP_DIR/events.ndjson" <<'PY' || fail "a CloudEvents batch is not as expected"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
for r in reqs:
    assert r["valid"] and r["status"] == 200, r
    assert r["ctype"] == "application/cloudevents-batch+json", r
    assert 1 <= len(r["events"]) <= 10, r
    ev = r["events"]
    want = str(ev[0]) if len(ev) == 1 else "%d-%d" % (ev[0], ev[-1])
    assert r["id"] == want, (r["id"], want)
assert any(len(r["events"]) == 10 for r in reqs), "no full batch"
for l in open(sys.argv[2]):
    e = json.loads(l)
    assert e["specversion"] == "1.0" and e["type"] == "order.paid", e
    assert e["source"] == "/pgoutbox/outbox" and e["subject"].startswith("k"), e
    assert e["data"]["i"] >= 1, e
print("  %d CloudEvents requests for 200 events" % len(reqs), file=sys.stderr)
PY
