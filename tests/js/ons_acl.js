'use strict';
// ali-ons with ACL keys against rmq serve (tests/test_acl_interop.py).
// Usage: node ons_acl.js NAMESRV TOPIC GROUP ACCESS_KEY SECRET_KEY COUNT [send|roundtrip]
// send: COUNT sends, each recorded as {key, status} or {key, error}; roundtrip: then consume them with
// GROUP from the first offset. Every error answer the producer saw (it retries them quietly) is
// recorded as {code, message}. Prints one line "RESULT <json>".
const { Producer, Consumer, Message } = require('ali-ons');

const [ nameSrv, topic, group, accessKeyId, accessKeySecret, count, mode ] = process.argv.slice(2);
const n = parseInt(count, 10);
// httpclient is only used to look up name servers over HTTP
const common = { httpclient: {}, nameSrv, accessKeyId, accessKeySecret };
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

(async () => {
  const producer = new Producer({ ...common, producerGroup: 'PG_ONS_ACL' });
  producer.on('error', err => console.error('producer error:', err.message));
  await producer.ready();
  const answers = [];
  const kernel = producer.sendKernelImpl.bind(producer);
  producer.sendKernelImpl = async (...args) => {
    try {
      return await kernel(...args);
    } catch (err) {
      answers.push({ name: err.name, code: err.code, message: err.message });
      throw err;
    }
  };
  const sent = [];
  for (let i = 0; i < n; i++) {
    const msg = new Message(topic, 'TagAcl', `ons-acl-${i}`);
    msg.keys = [ `onsacl${i}` ];
    try {
      const r = await producer.send(msg);
      sent.push({ key: `onsacl${i}`, status: r.sendStatus, msgId: r.msgId });
    } catch (err) {
      sent.push({ key: `onsacl${i}`, error: err.message });
    }
  }
  let closeError = null;
  try {
    await producer.close(); // unregisters the producer: refused too with wrong keys
  } catch (err) {
    closeError = { code: err.code, message: err.message };
  }

  const got = [];
  if (mode === 'roundtrip') {
    const consumer = new Consumer({ ...common, consumerGroup: group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
      persistConsumerOffsetInterval: 500 });
    consumer.on('error', err => console.error('consumer error:', err.message));
    consumer.subscribe(topic, '*', async msg => {
      got.push({ key: Array.isArray(msg.keys) ? msg.keys.join(' ') : String(msg.keys), body: msg.body.toString() });
    });
    await consumer.ready();
    const deadline = Date.now() + 30000;
    while (got.length < n && Date.now() < deadline) await sleep(100);
    await sleep(500);
    await consumer.close();
  }
  console.log('RESULT ' + JSON.stringify({ sent, answers, closeError, got }));
  process.exit(0);
})().catch(err => {
  console.error('FAILED', err);
  process.exit(1);
});
