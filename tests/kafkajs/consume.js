// consume.js BROKERS TOPIC COUNT — reads COUNT messages of TOPIC with a
// kafkajs consumer group from the beginning and prints each as a kcat -J
// like JSON line (topic, partition, offset, key, payload, headers as
// [name, value, ...]), for tests/kafka_check.py.  Exits 1 after 40 s.
const { Kafka, logLevel } = require('kafkajs');

const [brokers, topic, count] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'pgoutbox-test', brokers: brokers.split(','), logLevel: logLevel.ERROR });
const consumer = kafka.consumer({ groupId: 'kafkajs-test-' + process.pid });
let seen = 0;
setTimeout(() => { console.error(`timeout after ${seen} messages`); process.exit(1); }, 40000);

(async () => {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      const headers = [];
      for (const [k, v] of Object.entries(message.headers || {})) {
        for (const one of Array.isArray(v) ? v : [v]) headers.push(k, one === null || one === undefined ? null : one.toString());
      }
      console.log(JSON.stringify({
        topic, partition, offset: Number(message.offset),
        key: message.key === null ? null : message.key.toString(),
        payload: message.value.toString(), headers,
      }));
      // All read: exit at once (the mock cluster does not answer
      // LeaveGroup, so disconnect() would wait for its timeout).
      if (++seen >= Number(count)) process.exit(0);
    },
  });
})().catch((e) => { console.error(e); process.exit(1); });
