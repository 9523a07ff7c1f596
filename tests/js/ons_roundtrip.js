'use strict';
// ali-ons against rmq serve: send COUNT messages, then consume them with a fresh group; the message
// with key "ons2" is answered ACTION_RETRY once and must come back through the retry topic.
// Usage: node ons_roundtrip.js NAMESRV TOPIC GROUP COUNT; prints one line "RESULT <json>".
const { Producer, Consumer, Message } = require('ali-ons');

const [ nameSrv, topic, group, count ] = process.argv.slice(2);
const n = parseInt(count, 10);
// httpclient is only used to look up name servers over HTTP; the keys are not checked by rmq serve
const common = { httpclient: {}, nameSrv, accessKeyId: 'ak', accessKeySecret: 'sk' };
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

(async () => {
  const producer = new Producer({ ...common, producerGroup: 'PG_ONS' });
  await producer.ready();
  const sent = [];
  for (let i = 0; i < n; i++) {
    const msg = new Message(topic, i % 2 ? 'TagOdd' : 'TagEven', `ons-body-${i}-` + 'é'.repeat(i));
    msg.keys = [ `ons${i}` ];
    const r = await producer.send(msg);
    sent.push({ key: `ons${i}`, status: r.sendStatus, msgId: r.msgId, queue: Number(r.messageQueue.queueId),
      offset: Number(r.queueOffset) });
  }
  await producer.close();

  const got = [];
  const consumer = new Consumer({ ...common, consumerGroup: group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    persistConsumerOffsetInterval: 500 });
  consumer.on('error', err => console.error('consumer error:', err.message));
  consumer.subscribe(topic, '*', async msg => {
    const key = Array.isArray(msg.keys) ? msg.keys.join(' ') : String(msg.keys);
    got.push({ key, tags: msg.tags, body: msg.body.toString(), times: msg.reconsumeTimes, msgId: msg.msgId });
    if (key === 'ons2' && msg.reconsumeTimes === 0) return Consumer.ACTION_RETRY;
  });
  await consumer.ready();
  const deadline = Date.now() + 40000;
  while (got.length < n + 1 && Date.now() < deadline) await sleep(100);
  await sleep(1000);
  await consumer.close();
  console.log('RESULT ' + JSON.stringify({ sent, got }));
  process.exit(0);
})().catch(err => {
  console.error('FAILED', err);
  process.exit(1);
});
