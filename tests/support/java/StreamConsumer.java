import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Usage: StreamConsumer NAMESRV TOPIC GROUP
 *
 * A push consumer of TOPIC from the first offset until stdin closes; prints "GOT <key> <brokerName>
 * <queueId> <queueOffset>" for every message delivered (redeliveries too).
 */
public class StreamConsumer {
    public static void main(String[] args) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[2]);
        consumer.setNamesrvAddr(args[0]);
        consumer.setInstanceName("stream_" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.subscribe(args[1], "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            StringBuilder out = new StringBuilder();
            for (MessageExt m : msgs) {
                out.append("GOT ").append(m.getKeys()).append(' ').append(m.getBrokerName()).append(' ')
                    .append(m.getQueueId()).append(' ').append(m.getQueueOffset()).append('\n');
            }
            synchronized (System.out) {
                System.out.print(out);
                System.out.flush();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        while (System.in.read() >= 0) {
            // the caller closes stdin to stop
        }
        consumer.shutdown();
    }
}
