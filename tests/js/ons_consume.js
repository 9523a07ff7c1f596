'use strict';
// ali-ons consumer: consume TOPIC with a fresh GROUP from the first offset until every key of KEYS
// (comma-separated) has arrived, or 60 s; prints one line "RESULT <json>" with what arrived.
// Usage: node ons_consume.js NAMESRV TOPIC GROUP KEYS
const { Consumer } = require('ali-ons');

const [ nameSrv, topic, group, keyList ] = process.argv.slice(2);
const wanted = new Set(keyList.split(','));
const common = { httpclient: {}, nameSrv, accessKeyId: 'ak', accessKeySecret: 'sk' };
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

(async () => {
  const got = [];
  const consumer = new Consumer({ ...common, consumerGroup: group, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    persistConsumerOffsetInterval: 500 });
  consumer.on('error', err => console.error('consumer error:', err.message));
  consumer.subscribe(topic, '*', async msg => {
    got.push(Array.isArray(msg.keys) ? msg.keys.join(' ') : String(msg.keys));
  });
  await consumer.ready();
  const deadline = Date.now() + 60000;
  while ([ ...wanted ].some(k => !got.includes(k)) && Date.now() < deadline) await sleep(100);
  await sleep(2000);  // anything delivered twice would come now
  await consumer.close();
  console.log('RESULT ' + JSON.stringify({ got }));
  process.exit(0);
})().catch(err => {
  console.error('FAILED', err);
  process.exit(1);
});
