// Drives the official RocketMQ 5 Node.js client (rocketmq-client-nodejs, gRPC) against a rocketq
// broker's grpc port. Prints one JSON object per line; exits non-zero when a step failed.
//   node grpc_client.js produce ENDPOINT TOPIC COUNT PREFIX
//   node grpc_client.js consume ENDPOINT TOPIC GROUP COUNT TIMEOUT_S
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function produce(endpoints, topic, count, prefix) {
  const producer = new Producer({ endpoints, requestTimeout: 10000 });
  await producer.startup();
  const sent = [];
  try {
    for (let i = 0; i < count; i++) {
      const receipt = await producer.send({
        topic, tag: 'node', keys: [`nk${i}`], properties: new Map([['origin', 'node']]),
        body: Buffer.from(`${prefix}-${i}`),
      });
      sent.push({ body: `${prefix}-${i}`, id: receipt.messageId });
    }
  } finally {
    await producer.shutdown();
  }
  emit({ sent });
  return 0;
}

async function consume(endpoints, topic, group, count, timeoutS) {
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, requestTimeout: 10000, awaitDuration: 3000,
    subscriptions: new Map().set(topic, '*'),
  });
  await consumer.startup();
  const got = [];
  const deadline = Date.now() + timeoutS * 1000;
  try {
    while (got.length < count && Date.now() < deadline) {
      const messages = await consumer.receive(16, 30000);
      for (const m of messages) {
        got.push({ body: m.body.toString(), tag: m.tag, props: Object.fromEntries(m.properties || []) });
        await consumer.ack(m);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  emit({ received_all: got });
  return got.length >= count ? 0 : 1;
}

async function main() {
  const [cmd, ...a] = process.argv.slice(2);
  if (cmd === 'produce') return produce(a[0], a[1], Number(a[2]), a[3]);
  if (cmd === 'consume') return consume(a[0], a[1], a[2], Number(a[3]), Number(a[4]));
  throw new Error(`unknown command ${cmd}`);
}

main().then(code => process.exit(code), err => {
  emit({ error: String(err && err.stack || err) });
  process.exit(2);
});
