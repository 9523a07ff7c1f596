import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
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
 * Usage: PopPushConsumer NAMESRV TOPIC GROUP COUNT FAIL_KEY TIMEOUT_SEC
 *
 * The RocketMQ 5.1.1 push consumer with clientRebalance=false (the broker assigns its queues and
 * their mode: POP once SET_MESSAGE_REQUEST_MODE said so), started before a producer sends COUNT
 * messages with keys k0..k(COUNT-1). The message FAIL_KEY answers RECONSUME_LATER once (the client
 * changes its invisible time, the broker revives it). Prints "GOT <key> <reconsumeTimes> <hasPopCk>"
 * per delivery and "RESULT <all seen>" last; exit 0 when every key was consumed successfully.
 */
public class PopPushConsumer {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1], group = args[2], failKey = args[4];
        int count = Integer.parseInt(args[3]);
        int timeoutSec = Integer.parseInt(args[5]);
        long stamp = System.currentTimeMillis();
        Set<String> done = ConcurrentHashMap.newKeySet();
        Map<String, Integer> failed = new ConcurrentHashMap<>();

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName("pop_c_" + stamp);
        consumer.setClientRebalance(false);
        consumer.setPopInvisibleTime(20000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                String key = m.getKeys();
                System.out.printf("GOT %s %d %b%n", key, m.getReconsumeTimes(), m.getProperty("POP_CK") != null);
                System.out.flush();
                if (key.equals(failKey) && failed.putIfAbsent(key, 1) == null) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                done.add(key);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        TimeUnit.SECONDS.sleep(3);  // the first rebalance (QUERY_ASSIGNMENT) and pops under way

        DefaultMQProducer producer = new DefaultMQProducer("PG_POP_" + stamp);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("pop_p_" + stamp);
        producer.start();
        for (int i = 0; i < count; i++) {
            SendResult r = producer.send(new Message(topic, "TagA", "k" + i, ("body-" + i).getBytes("UTF-8")));
            System.out.printf("SENT k%d %s%n", i, r.getSendStatus());
        }
        producer.shutdown();

        long deadline = System.currentTimeMillis() + timeoutSec * 1000L;
        while (done.size() < count && System.currentTimeMillis() < deadline) {
            TimeUnit.MILLISECONDS.sleep(100);
        }
        TimeUnit.MILLISECONDS.sleep(500);  // the acks of the last ones
        consumer.shutdown();
        System.out.printf("RESULT %b%n", done.size() == count);
        System.exit(done.size() == count ? 0 : 1);
    }
}
