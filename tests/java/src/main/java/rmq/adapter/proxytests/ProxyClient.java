/*
 * Programs on the official RocketMQ 5.x Java client, as an application would write them, run by
 * tests/integration/proxy/test_java_client.py (producers) and test_java_consumers.py (consumers)
 * against rmq-adapter proxy. Only the endpoint (and, for some scenarios, plaintext instead of the
 * client's default TLS, or credentials) is chosen by the test, through
 * RMQ_TEST_TRANSPORT=plaintext and RMQ_TEST_ACCESS_KEY / RMQ_TEST_SECRET_KEY.
 *
 *   sends <endpoint> <normal topic> <fifo topic> <delay topic>
 *   transactions <endpoint> <topic>           one committed, one rolled back, one left UNKNOWN
 *   recall <endpoint> <topic>                 a timer recalled, another kept
 *   burst <endpoint> <topic> <count> <wait s> transactions one after another (the SIGKILL test)
 *   simple <endpoint> <topic> <group> <count> <lapsed body> <invisible s>
 *                                             a SimpleConsumer acks all but one, which it lets
 *                                             lapse once (not acked) and acks when it is back
 *   push <endpoint> <topic> <group> <tag expression> <count> <failed body or ->
 *                                             a PushConsumer consumes, failing one body once
 *   fifo <endpoint> <topic> <group> <count> <failed body> <failures>
 *                                             a PushConsumer of a FIFO group (the proxy's
 *                                             --fifo-groups), its message groups consumed in
 *                                             parallel, fails one body <failures> times
 *
 * Each result is one line on standard output: SENT, DECIDED, CHECKED, RECALLED, FAILED, DONE;
 * the consumers print RECEIVED id=.. body=.. attempt=.. (push: also tag=, keys=a,b and
 * props=k:v;k:v; fifo: group=.. and at=<ms since start>) for every delivery, in order, and
 * ACKED / LAPSED / CONSUMED / FAILED id=.. body=.. for what they did with it. A consumer ends
 * by itself: once it has what it expects and a few quiet seconds more (anything received again
 * shows), or after 60 s with INCOMPLETE and exit code 1.
 */
package rmq.adapter.proxytests;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
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
    /** How long a consumer scenario may take before it gives up. */
    private static final long CONSUMER_DEADLINE_MS = 60_000;

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
        boolean complete = true;
        switch (scenario) {
            case "sends" -> sends(config.build(), args[2], args[3], args[4]);
            case "transactions" -> transactions(config.build(), args[2]);
            case "recall" -> recall(config.build(), args[2]);
            case "burst" -> burst(config.build(), args[2], Integer.parseInt(args[3]),
                Integer.parseInt(args[4]));
            case "simple" -> complete = simple(config.build(), args[2], args[3],
                Integer.parseInt(args[4]), args[5], Integer.parseInt(args[6]));
            case "push" -> complete = push(config.build(), args[2], args[3], args[4],
                Integer.parseInt(args[5]), args[6]);
            case "fifo" -> complete = fifo(config.build(), args[2], args[3], Integer.parseInt(args[4]),
                args[5], Integer.parseInt(args[6]));
            default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }
        if (!complete) {
            System.out.println("INCOMPLETE");
            System.exit(1);
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

    private static String body(MessageView view) {
        return StandardCharsets.UTF_8.decode(view.getBody().duplicate()).toString();
    }

    private static String seen(MessageView view) {
        return "id=" + view.getMessageId() + " body=" + body(view);
    }

    private static boolean simple(ClientConfiguration config, String topic, String group, int count,
        String lapsed, int invisibleSeconds) throws Exception {
        Duration invisible = Duration.ofSeconds(invisibleSeconds);
        Set<String> acked = new TreeSet<>();
        long deadline = System.currentTimeMillis() + CONSUMER_DEADLINE_MS;
        long quietUntil = Long.MAX_VALUE;  // once all are acked: an ack not taken would show
        try (SimpleConsumer consumer = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(Map.of(topic, FilterExpression.SUB_ALL)).build()) {
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                List<MessageView> views = consumer.receive(16, invisible);
                for (MessageView view : views) {
                    System.out.println("RECEIVED " + seen(view) + " attempt=" + view.getDeliveryAttempt());
                    if (body(view).equals(lapsed) && view.getDeliveryAttempt() == 1) {
                        System.out.println("LAPSED " + seen(view));  // not acked: it comes back
                        continue;
                    }
                    consumer.ack(view);
                    acked.add(body(view));
                    System.out.println("ACKED " + seen(view));
                }
                if (acked.size() >= count && quietUntil == Long.MAX_VALUE) {
                    quietUntil = System.currentTimeMillis() + (invisibleSeconds + 3) * 1_000L;
                }
            }
        }
        return acked.size() >= count;
    }

    private static boolean push(ClientConfiguration config, String topic, String group, String tags,
        int count, String failed) throws Exception {
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        FilterExpression filter = new FilterExpression(tags, FilterExpressionType.TAG);
        try (PushConsumer consumer = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setSubscriptionExpressions(Map.of(topic, filter))
            .setMessageListener(view -> {
                Map<String, String> props = new TreeMap<>(view.getProperties());
                StringBuilder shown = new StringBuilder();
                props.forEach((k, v) -> shown.append(shown.length() == 0 ? "" : ";").append(k).append(':').append(v));
                System.out.println("RECEIVED " + seen(view) + " attempt=" + view.getDeliveryAttempt()
                    + " tag=" + view.getTag().orElse("") + " keys=" + String.join(",", new TreeSet<>(view.getKeys()))
                    + " props=" + shown);
                return failOrConsume(view, failed, 1, consumed);
            }).build()) {
            return awaitConsumed(consumed, count);
        }
    }

    /**
     * A FIFO group's PushConsumer: the proxy tells the client the group is FIFO, so the client
     * consumes each message group's messages one after another and retries a failed one itself,
     * after the retry policy's back-off, with its delivery attempt + 1. The FIFO consume
     * accelerator lets the message groups of one received batch run in parallel, as an
     * application that wants them independent sets it.
     */
    private static boolean fifo(ClientConfiguration config, String topic, String group, int count,
        String failed, int failures) throws Exception {
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        long start = System.currentTimeMillis();
        try (PushConsumer consumer = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setSubscriptionExpressions(Map.of(topic, FilterExpression.SUB_ALL))
            .setEnableFifoConsumeAccelerator(true)
            .setMessageListener(view -> {
                System.out.println("RECEIVED " + seen(view) + " group=" + view.getMessageGroup().orElse("")
                    + " attempt=" + view.getDeliveryAttempt()
                    + " at=" + (System.currentTimeMillis() - start));
                return failOrConsume(view, failed, failures, consumed);
            }).build()) {
            return awaitConsumed(consumed, count);
        }
    }

    /** A push consumer's answer: FAILURE for the first {@code failures} deliveries of {@code failed}. */
    private static ConsumeResult failOrConsume(MessageView view, String failed, int failures,
        Set<String> consumed) {
        if (body(view).equals(failed) && view.getDeliveryAttempt() <= failures) {
            System.out.println("FAILED " + seen(view));
            return ConsumeResult.FAILURE;
        }
        consumed.add(body(view));
        System.out.println("CONSUMED " + seen(view));
        return ConsumeResult.SUCCESS;
    }

    /** Whether a push consumer consumed {@code count} bodies before its deadline. */
    private static boolean awaitConsumed(Set<String> consumed, int count) throws InterruptedException {
        long deadline = System.currentTimeMillis() + CONSUMER_DEADLINE_MS;
        while (System.currentTimeMillis() < deadline && consumed.size() < count) {
            Thread.sleep(100);
        }
        Thread.sleep(3_000);  // an ack not taken, or a message filtered in wrongly, would show
        return consumed.size() >= count;
    }
}
