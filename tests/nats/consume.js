// consume.js URL STREAM N — reads N messages of a JetStream stream with the
// nats npm client through a durable pull consumer (explicit acks) and
// prints one JSON line per message: {seq, subject, headers, data}.
// NATS_USER and NATS_PASS authenticate.  Used
// by tests/integration/t_nats_sink.sh as a consumer no one here wrote.
const { connect, AckPolicy, DeliverPolicy } = require('nats');

(async () => {
  const [url, stream, n] = [process.argv[2], process.argv[3], Number(process.argv[4])];
  // user and password from NATS_USER / NATS_PASS (nats.js does not read
  // them from the URL).
  const opts = { servers: url };
  if (process.env.NATS_USER) {
    opts.user = process.env.NATS_USER;
    opts.pass = process.env.NATS_PASS;
  }
  const nc = await connect(opts);
  const jsm = await nc.jetstreamManager();
  await jsm.consumers.add(stream, {
    durable_name: 'node-check',
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
  });
  const consumer = await nc.jetstream().consumers.get(stream, 'node-check');
  let got = 0;
  const deadline = Date.now() + 30000;
  while (got < n && Date.now() < deadline) {
    const batch = await consumer.fetch({ max_messages: Math.min(500, n - got), expires: 2000 });
    for await (const m of batch) {
      const headers = {};
      if (m.headers) {
        for (const k of m.headers.keys()) headers[k] = m.headers.get(k);
      }
      process.stdout.write(JSON.stringify({
        seq: m.seq, subject: m.subject, headers, data: m.string(),
      }) + '\n');
      m.ack();
      got++;
    }
  }
  await nc.drain();
  if (got < n) {
    process.stderr.write(`consume.js: got ${got} of ${n} messages\n`);
    process.exit(1);
  }
})().catch((e) => {
  process.stderr.write(`consume.js: ${e.stack || e}\n`);
  process.exit(1);
});
