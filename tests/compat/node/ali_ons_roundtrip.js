'use strict';
// Drives the npm RocketMQ client `ali-ons` against a name server, for tests/compat.
//
//   node ali_ons_roundtrip.js NAMESRV TOPIC GROUP COUNT [options]
//
//   --mode roundtrip|produce|consume   default roundtrip (produce COUNT, then push-consume them)
//   --broker HOST:PORT                 create TOPIC on this broker first (UPDATE_AND_CREATE_TOPIC):
//                                      ali-ons cannot send to a topic the name server does not know
//   --queues N                         queue count for --broker topic creation (default 4)
//   --tags A,B                         tags used round robin on produced messages (default TagA,TagB)
//   --prefix TEXT                      body prefix; body i is "<prefix>-<i>" (default ali-ons)
//   --timeout SECONDS                  give up after this long (default 45)
//   --no-auth                          send no AccessKey/Signature (by default dummy keys are set,
//                                      as every real ali-ons user does)
//   --access-key AK --secret-key SK    sign with these instead of the dummy keys (ACL tests)
//
// A send the broker refuses is reported as {"event":"sendError","code":N,"message":...}.
//   --property K=V                     user property on every produced message (repeatable)
//   --stop-file PATH                   consume: be one member of the group: print {"event":"started"}
//                                      once the consumer is ready, {"event":"owned","queues":[...]}
//                                      whenever its allocation of TOPIC changes, consume until PATH
//                                      exists, then exit 0 if at least COUNT (may be 0) distinct
//                                      messages arrived
//
// stdout carries only JSON lines: {"event":"sent",...} per sent message, {"event":"received",...}
// per delivered message (duplicates included), then one {"event":"summary",...}. Exit 0 when all
// COUNT messages were sent and (unless produce-only) COUNT distinct messages were received; exit 2
// on timeout, 1 on any other failure. ali-ons' own log lines go to stderr.

const fs = require('fs');
const { Producer, Consumer, Message } = require('ali-ons');

const USAGE = 'usage: node ali_ons_roundtrip.js NAMESRV TOPIC GROUP COUNT [--mode roundtrip|produce|consume]' +
  ' [--broker ADDR] [--queues N] [--tags A,B] [--prefix P] [--timeout S] [--no-auth]' +
  ' [--access-key AK --secret-key SK]' +
  ' [--property K=V] [--stop-file PATH]';

function parseArgs(argv) {
  const positional = [];
  const opts = {
    mode: 'roundtrip', broker: null, queues: 4, tags: [ 'TagA', 'TagB' ],
    prefix: 'ali-ons', timeout: 45, auth: true, properties: {}, stopFile: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--mode': opts.mode = next(); break;
      case '--broker': opts.broker = next(); break;
      case '--queues': opts.queues = parseInt(next(), 10); break;
      case '--tags': opts.tags = next().split(',').filter(Boolean); break;
      case '--prefix': opts.prefix = next(); break;
      case '--timeout': opts.timeout = Number(next()); break;
      case '--no-auth': opts.auth = false; break;
      case '--access-key': opts.accessKey = next(); break;
      case '--secret-key': opts.secretKey = next(); break;
      case '--property': {
        const pair = next();
        const eq = pair.indexOf('=');
        if (eq <= 0) throw new Error(`--property wants K=V, got ${pair}`);
        opts.properties[pair.slice(0, eq)] = pair.slice(eq + 1);
        break;
      }
      case '--stop-file': opts.stopFile = next(); break;
      default:
        if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`);
        positional.push(arg);
    }
  }
  if (positional.length !== 4) throw new Error(USAGE);
  const [ nameSrv, topic, group, count ] = positional;
  if (![ 'roundtrip', 'produce', 'consume' ].includes(opts.mode)) throw new Error(USAGE);
  return Object.assign(opts, { nameSrv, topic, group, count: parseInt(count, 10) });
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// ali-ons logs through an injected logger; stdout stays reserved for the JSON protocol above.
const stderrLogger = {
  info() {},
  debug() {},
  warn(...args) { console.error('[ali-ons warn]', ...args); },
  error(...args) { console.error('[ali-ons error]', ...args); },
};

function clientOptions(opts) {
  const base = {
    nameSrv: opts.nameSrv,
    // Only used to look up name servers over HTTP (onsAddr); nameSrv makes it dead code, but the
    // constructor asserts it is present.
    httpclient: { request: async () => { throw new Error('no HTTP address server in tests'); } },
    logger: stderrLogger,
  };
  if (opts.auth) {
    base.accessKey = opts.accessKey || 'rocketq-compat-ak';
    base.secretKey = opts.secretKey || 'rocketq-compat-sk';
  }
  return base;
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// ali-ons retries a send refused with NO_PERMISSION and then throws only "Send [n] times, still
// failed": report each broker answer as {"event":"sendError","code":...,"message":...}.
function reportSendErrors(producer) {
  const kernel = producer.sendKernelImpl.bind(producer);
  producer.sendKernelImpl = async (...args) => {
    try {
      return await kernel(...args);
    } catch (err) {
      emit({ event: 'sendError', name: err && err.name, code: err && err.code, message: err && err.message });
      throw err;
    }
  };
}

// ali-ons has no public "create topic"; its MQClientAPI does, and this is what a user would call.
async function ensureTopic(producer, opts, deadline) {
  const client = producer._mqClient;
  await client.createTopic(opts.broker, 'TBW102', {
    topicName: opts.topic, readQueueNums: opts.queues, writeQueueNums: opts.queues,
    perm: 6, topicFilterType: 'SINGLE_TAG', topicSysFlag: 0, order: false,
  }, 5000);
  // The broker registers the new topic with the name server on its own schedule; wait for the route.
  for (;;) {
    try {
      const route = await client.getTopicRouteInfoFromNameServer(opts.topic, 3000);
      if (route && route.queueDatas && route.queueDatas.length) return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`route of ${opts.topic} never appeared: ${err.message}`);
    }
    if (Date.now() > deadline) throw new Error(`route of ${opts.topic} never appeared`);
    await sleep(200);
  }
}

async function produce(producer, opts, summary) {
  for (let i = 0; i < opts.count; i++) {
    const tags = opts.tags[i % opts.tags.length];
    const body = `${opts.prefix}-${i}`;
    const msg = new Message(opts.topic, tags, body);
    msg.keys = [ `key-${i}` ];
    for (const [ key, value ] of Object.entries(opts.properties)) msg.properties[key] = value;
    const result = await producer.send(msg);
    summary.sent++;
    emit({
      event: 'sent', msgId: result.msgId, sendStatus: result.sendStatus, body, tags, keys: `key-${i}`,
      queue: { brokerName: result.messageQueue.brokerName, queueId: Number(result.messageQueue.queueId) },
      queueOffset: result.queueOffset,
    });
  }
}

function consume(opts, summary, onAll) {
  const consumer = new Consumer(Object.assign(clientOptions(opts), {
    consumerGroup: opts.group,
    // Offsets are new for the group; "first" keeps the test independent of the broker's answer.
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  }));
  consumer.on('error', err => console.error('[consumer error]', err && err.message));
  const seen = new Set();
  consumer.subscribe(opts.topic, '*', async (msg, mq) => {
    const key = msg.msgId;
    emit({
      event: 'received', msgId: msg.msgId, topic: msg.topic,
      body: msg.body ? msg.body.toString('utf8') : '', tags: msg.tags || null, keys: msg.keys || null,
      queue: { brokerName: mq ? mq.brokerName : null, queueId: msg.queueId }, queueOffset: msg.queueOffset,
      reconsumeTimes: msg.reconsumeTimes, sysFlag: msg.sysFlag, bornHost: msg.bornHost, storeHost: msg.storeHost,
      properties: msg.properties,
    });
    summary.delivered++;
    if (!seen.has(key)) {
      seen.add(key);
      summary.received = seen.size;
      if (seen.size >= opts.count) onAll();
    }
  });
  return consumer;
}

async function closeQuietly(client) {
  if (!client) return;
  await Promise.race([ client.close().catch(() => undefined), sleep(3000) ]);
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    console.error(err.message);
    process.exit(64);
  }
  const summary = { event: 'summary', mode: opts.mode, expected: opts.count, sent: 0, received: 0, delivered: 0 };
  const started = Date.now();
  const deadline = started + opts.timeout * 1000;
  let producer = null;
  let consumer = null;
  let finished = false;
  const finish = async (code, error) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    summary.ok = code === 0;
    summary.elapsedMs = Date.now() - started;
    if (error) summary.error = error;
    emit(summary);
    await closeQuietly(consumer);
    await closeQuietly(producer);
    process.exit(code);
  };
  const timer = setTimeout(() => finish(2, `timeout after ${opts.timeout}s`), opts.timeout * 1000);

  try {
    if (opts.mode !== 'consume' || opts.broker) {
      producer = new Producer(Object.assign(clientOptions(opts), { producerGroup: `${opts.group}_PRODUCER` }));
      producer.on('error', err => console.error('[producer error]', err && err.message));
      reportSendErrors(producer);
      await producer.ready();
      if (opts.broker) await ensureTopic(producer, opts, deadline);
    }
    if (opts.mode !== 'consume') await produce(producer, opts, summary);
    if (opts.mode === 'produce') return finish(0);
    if (opts.stopFile) {
      let enough = opts.count === 0;
      consumer = consume(opts, summary, () => { enough = true; });
      await consumer.ready();
      emit({ event: 'started', group: opts.group, topic: opts.topic, pid: process.pid });
      // ali-ons answers no GET_CONSUMER_RUNNING_INFO, so its allocation is told here instead.
      let owned = null;
      while (!fs.existsSync(opts.stopFile)) {
        const queues = [ ...consumer.processQueueTable.values() ]
          .filter(entry => entry && entry.messageQueue.topic === opts.topic)
          .map(entry => Number(entry.messageQueue.queueId))
          .sort((a, b) => a - b);
        if (JSON.stringify(queues) !== owned) {
          owned = JSON.stringify(queues);
          emit({ event: 'owned', topic: opts.topic, queues });
        }
        await sleep(50);
      }
      return finish(enough ? 0 : 2, enough ? undefined : `stopped with ${summary.received} of ${opts.count}`);
    }
    await new Promise(resolve => {
      consumer = consume(opts, summary, resolve);
    });
    await finish(0);
  } catch (err) {
    await finish(1, err && (err.stack || err.message || String(err)));
  }
}

main();
