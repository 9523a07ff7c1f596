import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * Usage: FailoverProducer NAMESRV TOPIC POLL_NAMESRV_MS
 *
 * Sync sends, one at a time, keys p0, p1, ..., until stdin closes; the route is asked of the
 * NameServer every POLL_NAMESRV_MS (the client's pollNameServerInterval, 30 000 by default), so
 * that a new master is found as soon as the NameServer names it. Prints "ACK <epoch ms> <key>
 * <brokerName>" for each send acknowledged SEND_OK, "FAIL <epoch ms> <key>" for one that failed.
 */
public class FailoverProducer {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("PG_FAILOVER");
        producer.setNamesrvAddr(args[0]);
        producer.setInstanceName("failover_" + ProcessHandle.current().pid());
        producer.setPollNameServerInterval(Integer.parseInt(args[2]));
        producer.setSendMsgTimeout(3000);
        producer.start();
        Thread reader = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the caller closes stdin to stop
                }
            } catch (Exception ignored) {
                // stopped either way
            }
            System.exit(0);
        });
        reader.setDaemon(true);
        reader.start();
        byte[] body = new byte[128];
        for (long i = 0; ; i++) {
            String key = "p" + i;
            Message msg = new Message(args[1], "", key, body);
            try {
                SendResult r = producer.send(msg);
                String word = r.getSendStatus() == SendStatus.SEND_OK ? "ACK" : "FAIL";
                System.out.println(word + " " + System.currentTimeMillis() + " " + key + " "
                    + r.getMessageQueue().getBrokerName());
            } catch (Exception e) {
                System.out.println("FAIL " + System.currentTimeMillis() + " " + key);
                Thread.sleep(50);
            }
            System.out.flush();
        }
    }
}
