import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Usage: MqadminBatch, then one mqadmin command per line on stdin, its arguments separated by tabs.
 *
 * Each command runs through the stock MQAdminStartup (as bin/mqadmin runs it), one after the
 * other in this one JVM, and is followed by a line "@@DONE" on stdout once it has returned, so
 * that the caller can tell which requests each command sent. One JVM for all: a JVM start costs
 * ~3.5 s per command.
 */
public class MqadminBatch {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            if (!line.isBlank()) {
                MQAdminStartup.main0(line.split("\t"), null);
            }
            System.out.println("\n@@DONE");
            System.out.flush();
        }
    }
}
