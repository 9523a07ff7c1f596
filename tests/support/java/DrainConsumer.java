import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * Usage: DrainConsumer NAMESRV TOPIC GROUP COUNT [TIMEOUT_SEC]
 *
 * A fresh push consumer group (from the first offset, the client's defaults otherwise) consumes
 * TOPIC until it has COUNT messages or TIMEOUT_SEC (default 120) pass. Prints
 * "RESULT <count> <seconds from the first message to the last> <seconds from start to the last>".
 */
public class DrainConsumer {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        int timeoutSec = args.length > 4 ? Integer.parseInt(args[4]) : 120;
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
            Thread.sleep(5);
        }
        System.out.printf("RESULT %d %.6f %.6f%n", seen.get(), (last.get() - first.get()) / 1e9,
            (last.get() - started) / 1e9);
        consumer.shutdown();
    }
}
