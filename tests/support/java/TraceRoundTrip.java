import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Usage: TraceRoundTrip NAMESRV TOPIC PRODUCER_GROUP CONSUMER_GROUP [TIMEOUT_SEC]
 *
 * Sends one message (tag TagA, keys "KEY1 KEY2") through a producer with message traces on
 * (DefaultMQProducer(group, true)) and consumes it with a traced push consumer
 * (DefaultMQPushConsumer(group, true)) from the first offset; then waits for both trace
 * dispatchers to send their records to RMQ_SYS_TRACE_TOPIC (they send a batch 500 ms after its
 * first record) and shuts both clients down. Prints "MSGID <msgId>" after the send and
 * "RESULT consumed=<true|false>" last; exit 0 when the message was consumed.
 */
public class TraceRoundTrip {
    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: TraceRoundTrip NAMESRV TOPIC PRODUCER_GROUP CONSUMER_GROUP [TIMEOUT_SEC]");
            System.exit(2);
        }
        String ns = args[0], topic = args[1], pg = args[2], cg = args[3];
        int timeoutSec = args.length > 4 ? Integer.parseInt(args[4]) : 60;
        long stamp = System.currentTimeMillis();

        DefaultMQProducer producer = new DefaultMQProducer(pg, true);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("trace_p_" + stamp);
        producer.setSendMsgTimeout(10000);
        producer.start();
        Message message = new Message(topic, "TagA", "KEY1 KEY2", ("traced-" + stamp).getBytes("UTF-8"));
        SendResult sent = producer.send(message);
        final String msgId = sent.getMsgId();
        System.out.printf("MSGID %s%n", msgId);
        System.out.printf("SEND %s %s%n", sent.getSendStatus(), sent.getOffsetMsgId());
        System.out.flush();

        final CountDownLatch consumed = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(cg, true);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName("trace_c_" + stamp);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                if (msgId.equals(m.getMsgId())) {
                    consumed.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean ok = consumed.await(timeoutSec, TimeUnit.SECONDS);
        Thread.sleep(2500); // the trace dispatchers' batches: sent 500 ms after their first record
        consumer.shutdown();
        producer.shutdown();
        System.out.printf("RESULT consumed=%s%n", ok);
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }
}
