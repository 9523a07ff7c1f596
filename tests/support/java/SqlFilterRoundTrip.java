import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Usage: SqlFilterRoundTrip NAMESRV TOPIC COUNT EXPRESSION...
 *
 * Sends COUNT messages to TOPIC: message i has keys "k<i>", tag TagA (even i) or TagB, and the
 * user properties a=i, b=x|y|z (i mod 3), d=i/2 as a decimal, c=true only when i mod 4 is 0.
 * Then one push consumer per EXPRESSION (group SQL_<TOPIC>_<index>, from the first offset,
 * MessageSelector.bySql) consumes until no consumer has received anything for 3 s (6 s at least
 * after the last start). Prints "SENT <count>", then per expression "EXPR <index> <keys sorted,
 * comma-separated>" or "EXPR <index> START_FAILED <message>" when its consumer would not start.
 */
public class SqlFilterRoundTrip {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        long stamp = System.currentTimeMillis();

        DefaultMQProducer producer = new DefaultMQProducer("SQL_P_" + topic);
        producer.setNamesrvAddr(ns);
        producer.setInstanceName("sql_p_" + stamp);
        producer.setSendMsgTimeout(10000);
        producer.start();
        int sent = 0;
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, i % 2 == 0 ? "TagA" : "TagB", "k" + i, ("m" + i).getBytes("UTF-8"));
            m.putUserProperty("a", String.valueOf(i));
            m.putUserProperty("b", new String[] {"x", "y", "z"}[i % 3]);
            m.putUserProperty("d", String.valueOf(i / 2.0));
            if (i % 4 == 0) {
                m.putUserProperty("c", "true");
            }
            SendResult r = producer.send(m);
            if (r.getSendStatus() == SendStatus.SEND_OK) {
                sent++;
            }
        }
        producer.shutdown();
        System.out.printf("SENT %d%n", sent);

        final AtomicLong last = new AtomicLong(System.currentTimeMillis());
        List<DefaultMQPushConsumer> consumers = new ArrayList<DefaultMQPushConsumer>();
        List<Set<String>> received = new ArrayList<Set<String>>();
        List<String> failures = new ArrayList<String>();
        for (int e = 3; e < args.length; e++) {
            final Set<String> keys = new ConcurrentSkipListSet<String>();
            received.add(keys);
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("SQL_" + topic + "_" + (e - 3));
            consumer.setNamesrvAddr(ns);
            consumer.setInstanceName("sql_c_" + stamp + "_" + e);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, MessageSelector.bySql(args[e]));
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    keys.add(m.getKeys());
                }
                last.set(System.currentTimeMillis());
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            try {
                consumer.start();
                consumers.add(consumer);
                failures.add(null);
            } catch (Exception ex) {
                consumer.shutdown();
                failures.add(ex.getMessage().split("\n")[0]);
            }
        }
        long started = System.currentTimeMillis();
        last.set(started);
        // a broker answers a filtered pull only once the consumer's SQL subscription reached it (a
        // heartbeat); on a loaded machine a group's first messages came after 6 s
        while (System.currentTimeMillis() - started < 15000 || System.currentTimeMillis() - last.get() < 4000) {
            Thread.sleep(100);
        }
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.shutdown();
        }
        for (int e = 0; e < received.size(); e++) {
            if (failures.get(e) != null) {
                System.out.printf("EXPR %d START_FAILED %s%n", e, failures.get(e));
            } else {
                System.out.printf("EXPR %d %s%n", e, String.join(",", new TreeSet<String>(received.get(e))));
            }
        }
    }
}
