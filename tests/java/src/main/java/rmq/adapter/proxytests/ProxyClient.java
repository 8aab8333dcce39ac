/*
 * Programs on the official RocketMQ 5.x Java client, as an application would write them, run by
 * tests/integration/proxy/test_java_client.py against rmq-adapter proxy. Only the endpoint (and,
 * for some scenarios, plaintext instead of the client's default TLS, or credentials) is chosen by
 * the test, through RMQ_TEST_TRANSPORT=plaintext and RMQ_TEST_ACCESS_KEY / RMQ_TEST_SECRET_KEY.
 *
 *   sends <endpoint> <normal topic> <fifo topic> <delay topic>
 *   transactions <endpoint> <topic>           one committed, one rolled back, one left UNKNOWN
 *   recall <endpoint> <topic>                 a timer recalled, another kept
 *   burst <endpoint> <topic> <count> <wait s> transactions one after another (the SIGKILL test)
 *
 * Each result is one line on standard output: SENT, DECIDED, CHECKED, RECALLED, FAILED, DONE.
 */
package rmq.adapter.proxytests;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

public final class ProxyClient {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
    /** What the application decided for each of its transactions: the checker's answers. */
    private static final Map<String, TransactionResolution> DECIDED = new ConcurrentHashMap<>();
    private static volatile boolean checked;

    private ProxyClient() {
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        ClientConfigurationBuilder config = ClientConfiguration.newBuilder()
            .setEndpoints(args[1])
            .setRequestTimeout(Duration.ofSeconds(5));
        if ("plaintext".equals(System.getenv("RMQ_TEST_TRANSPORT"))) {
            config.enableSsl(false);
        }
        String accessKey = System.getenv("RMQ_TEST_ACCESS_KEY");
        if (accessKey != null) {
            config.setCredentialProvider(
                new StaticSessionCredentialsProvider(accessKey, System.getenv("RMQ_TEST_SECRET_KEY")));
        }
        switch (scenario) {
            case "sends" -> sends(config.build(), args[2], args[3], args[4]);
            case "transactions" -> transactions(config.build(), args[2]);
            case "recall" -> recall(config.build(), args[2]);
            case "burst" -> burst(config.build(), args[2], Integer.parseInt(args[3]),
                Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }
        System.out.println("DONE");
        System.exit(0);
    }

    private static Message message(String topic, String body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setTag("TagJ").setKeys(body)
            .addProperty("from", "java").setBody(body.getBytes(StandardCharsets.UTF_8)).build();
    }

    private static void sends(ClientConfiguration config, String normal, String fifo, String delay)
        throws Exception {
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config)
            .setTopics(normal, fifo, delay).build()) {
            SendReceipt receipt = producer.send(message(normal, "normal"));
            System.out.println("SENT NORMAL " + receipt.getMessageId());
            for (int i = 0; i < 3; i++) {
                Message ordered = PROVIDER.newMessageBuilder().setTopic(fifo).setMessageGroup("java-group")
                    .setBody(("fifo-" + i).getBytes(StandardCharsets.UTF_8)).build();
                System.out.println("SENT FIFO " + producer.send(ordered).getMessageId());
            }
            long deliverAt = System.currentTimeMillis() + 2_000;
            Message later = PROVIDER.newMessageBuilder().setTopic(delay).setDeliveryTimestamp(deliverAt)
                .setBody("delay".getBytes(StandardCharsets.UTF_8)).build();
            System.out.println("SENT DELAY " + producer.send(later).getMessageId() + " " + deliverAt);
        }
    }

    private static Producer transactional(ClientConfiguration config, String topic) throws Exception {
        TransactionChecker checker = (MessageView view) -> {
            String id = view.getMessageId().toString();
            TransactionResolution answer = DECIDED.getOrDefault(id, TransactionResolution.ROLLBACK);
            System.out.println("CHECKED " + id + " " + answer);
            checked = true;
            return answer;
        };
        return PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
            .setTransactionChecker(checker).build();
    }

    private static void transactions(ClientConfiguration config, String topic) throws Exception {
        try (Producer producer = transactional(config, topic)) {
            for (String kind : new String[] {"COMMIT", "ROLLBACK", "UNKNOWN"}) {
                Transaction transaction = producer.beginTransaction();
                String id = producer.send(message(topic, kind), transaction).getMessageId().toString();
                if ("COMMIT".equals(kind)) {
                    DECIDED.put(id, TransactionResolution.COMMIT);
                    transaction.commit();
                } else if ("ROLLBACK".equals(kind)) {
                    DECIDED.put(id, TransactionResolution.ROLLBACK);
                    transaction.rollback();
                } else {
                    DECIDED.put(id, TransactionResolution.COMMIT);  // decided, but never told
                }
                System.out.println("DECIDED " + id + " " + kind);
            }
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline && !checked) {
                Thread.sleep(100);
            }
            Thread.sleep(1_000);  // the answer's EndTransaction goes out
        }
    }

    private static void recall(ClientConfiguration config, String topic) throws Exception {
        try (Producer producer = PROVIDER.newProducerBuilder().setClientConfiguration(config)
            .setTopics(topic).build()) {
            long deliverAt = System.currentTimeMillis() + 3_000;
            for (String body : new String[] {"recalled", "kept"}) {
                Message later = PROVIDER.newMessageBuilder().setTopic(topic).setDeliveryTimestamp(deliverAt)
                    .setBody(body.getBytes(StandardCharsets.UTF_8)).build();
                SendReceipt receipt = producer.send(later);
                System.out.println("SENT " + body + " " + receipt.getMessageId());
                if ("recalled".equals(body)) {
                    String recalled = producer.recallMessage(topic, receipt.getRecallHandle())
                        .getMessageId().toString();
                    System.out.println("RECALLED " + recalled);
                }
            }
        }
    }

    private static void burst(ClientConfiguration config, String topic, int count, int waitSeconds)
        throws Exception {
        try (Producer producer = transactional(config, topic)) {
            for (int i = 0; i < count; i++) {
                String id = null;
                try {
                    Transaction transaction = producer.beginTransaction();
                    id = producer.send(message(topic, "burst-" + i), transaction).getMessageId().toString();
                    boolean commit = i % 3 != 0;
                    DECIDED.put(id, commit ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK);
                    if (commit) {
                        transaction.commit();
                    } else {
                        transaction.rollback();
                    }
                    System.out.println("DECIDED " + id + " " + (commit ? "COMMIT" : "ROLLBACK"));
                } catch (Exception e) {
                    // Sent (id known) or not: the checker answers from DECIDED (ROLLBACK if unsent).
                    System.out.println("FAILED " + i + " " + id + " " + e.getClass().getSimpleName());
                }
                Thread.sleep(5);
            }
            Thread.sleep(waitSeconds * 1_000L);  // the check-backs of what a dead proxy held
        }
    }
}
