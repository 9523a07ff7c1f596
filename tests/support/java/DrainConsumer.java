import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * Usage: DrainConsumer NAMESRV TOPIC COUNT [TIMEOUT_SEC]
 *
 * For each line read from stdin (a consumer group's name), a fresh push consumer of that group
 * (from the first offset, the client's defaults otherwise) consumes TOPIC until it has COUNT
 * messages or TIMEOUT_SEC (default 120) pass, and shuts down. After each drain it prints
 * "RESULT <count> <seconds from the first message to the last> <seconds from start to the last>".
 * One JVM serves every drain, so that the later drains run compiled code, not the interpreter.
 */
public class DrainConsumer {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        int timeoutSec = args.length > 3 ? Integer.parseInt(args[3]) : 120;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String group; (group = in.readLine()) != null; ) {
            if (!group.isBlank()) {
                drain(ns, topic, group.strip(), count, timeoutSec);
            }
        }
    }

    static void drain(String ns, String topic, String group, int count, int timeoutSec) throws Exception {
        final AtomicInteger seen = new AtomicInteger();
        final AtomicLong first = new AtomicLong(-1);
        final AtomicLong last = new AtomicLong(-1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setInstanceName("drain_" + group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.nanoTime();
            first.compareAndSet(-1, now);
            last.accumulateAndGet(now, Math::max);
            seen.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long started = System.nanoTime();
        consumer.start();
        long deadline = started + timeoutSec * 1_000_000_000L;
        while (seen.get() < count && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        System.out.printf("RESULT %d %.6f %.6f%n", seen.get(), (last.get() - first.get()) / 1e9,
            (last.get() - started) / 1e9);
        System.out.flush();
        consumer.shutdown();
    }
}
