// One send of the RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs) to rmq serve's gRPC
// endpoint, for tests/broker/test_grpc_client5.py. Arguments: endpoint topic. Prints RESULT {json}.
'use strict';
const { Producer } = require('rocketmq-client-nodejs');

(async () => {
  const [endpoints, topic] = process.argv.slice(2);
  // with topics, startup waits for the endpoint's Telemetry settings
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 10000 });
  await producer.startup();
  const receipt = await producer.send({
    topic,
    tag: 'TagNode',
    keys: ['kn1', 'kn2'],
    properties: new Map([['from', 'node']]),
    body: Buffer.from('hello from node'),
  });
  await producer.shutdown();
  console.log('RESULT ' + JSON.stringify({ messageId: receipt.messageId, offset: String(receipt.offset) }));
  process.exit(0);
})().catch((err) => {
  console.error('ERROR', err);
  process.exit(1);
});
