// A SimpleConsumer of the RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs) against rmq serve's
// gRPC endpoint, for tests/broker/test_grpc_consume_more.py. Arguments: endpoint topic group.
// Receives once (nothing), sends node-0..2 with a producer, receives and acks them, then receives
// once more (nothing).
// Prints RESULT {json}.
'use strict';
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

(async () => {
  const [endpoints, topic, consumerGroup] = process.argv.slice(2);
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup, subscriptions: new Map([[topic, '*']]), awaitDuration: 5000, requestTimeout: 10000,
  });
  await consumer.startup();
  // One receive before producing: a group without offsets is started at each queue's end, and the
  // 5.1 proxy's first POP of such a group takes only the newest message of each queue. Right after
  // startup the proxy may not have the client's settings yet (an error): tried again.
  for (let i = 0; i < 5; i++) {
    try {
      await consumer.receive(16, 20000);
      break;
    } catch (err) {
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 10000 });
  await producer.startup();
  const sent = [];
  for (let i = 0; i < 3; i++) {
    const receipt = await producer.send({ topic, tag: 'T', body: Buffer.from(`node-${i}`) });
    sent.push(receipt.messageId);
  }
  await producer.shutdown();
  const got = [];
  const deadline = Date.now() + 30000;
  while (got.length < 3 && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 20000)) {
      await consumer.ack(m);
      got.push(m);
    }
  }
  const again = await consumer.receive(16, 20000);
  await consumer.shutdown();
  got.sort((a, b) => a.body.toString().localeCompare(b.body.toString()));
  console.log('RESULT ' + JSON.stringify({
    sent,
    ids: got.map((m) => m.messageId),
    received: got.map((m) => m.body.toString()),
    attempts: got.map((m) => m.deliveryAttempt),
    again: again.length,
  }));
  process.exit(0);
})().catch((err) => {
  console.error('ERROR', err);
  process.exit(1);
});
