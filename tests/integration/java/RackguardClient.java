// Official Java client (kafka-clients) driver for the rackguard integration tests.
//
// Usage: java -cp <jars>:<classes> RackguardClient <mode> key=value...
//   produce  bootstrap= topic= n= [partitions=]        idempotent, acks=all
//   consume  bootstrap= topic= group= n= [timeout_ms=]  group consumer, commitSync
//   admin    bootstrap= [topic=] [create=1] [partitions=]  describe cluster, list topics
//   configs  bootstrap= topic= value= lowered=   createTopics with min.insync.racks=value,
//            describeConfigs, incrementalAlterConfigs to lowered, describeConfigs again
//   member   bootstrap= topic= group= seconds= [rack=] [client_id=] [group_protocol=]
//            [assignor=range|cooperative-sticky]
//            a group member for the given time (client.rack = rack when given;
//            group_protocol=consumer: KIP-848's ConsumerGroupHeartbeat, default classic);
//            prints the partitions assigned to it at the end
//   create-assigned  bootstrap= topic= assignment=1,2;3,4 [kind=topics|partitions]
//            [count=] [validate=1]   createTopics / createPartitions with explicit
//            replica assignments (';' between partitions); reports the error class
//   stream   bootstrap= topic= seconds= acked=FILE [rate=] [prefix=]
//            idempotent, acks=all, for the given time at about rate records/s; each
//            acknowledged record's "value partition offset" is appended to FILE
// Common: hold=1 prints the result line, then waits for a line on stdin
// before closing the clients (so a test can inspect live connections).
// Prints exactly one line starting with "RESULT " followed by JSON.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class RackguardClient {
    static Map<String, String> opts = new HashMap<>();

    static String opt(String k, String dflt) {
        String v = opts.get(k);
        if (v == null && dflt == null) throw new IllegalArgumentException("missing " + k + "=");
        return v == null ? dflt : v;
    }

    static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String node(Node n) {
        return "{\"id\":" + n.id() + ",\"host\":" + q(n.host()) + ",\"port\":" + n.port()
            + ",\"rack\":" + q(n.rack()) + "}";
    }

    static void emit(String json) throws Exception {
        System.out.println("RESULT " + json);
        System.out.flush();
        if ("1".equals(opts.get("hold"))) {
            new BufferedReader(new InputStreamReader(System.in)).readLine();
        }
    }

    static Properties base() {
        Properties p = new Properties();
        p.put("bootstrap.servers", opt("bootstrap", null));
        p.put("client.id", "rackguard-java");
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "15000");
        p.put("reconnect.backoff.max.ms", "1000");
        // prop.<name>=<value>: any client property (security.protocol, sasl.jaas.config, ...)
        for (Map.Entry<String, String> e : opts.entrySet()) {
            if (e.getKey().startsWith("prop.")) p.put(e.getKey().substring(5), e.getValue());
        }
        return p;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        switch (mode) {
            case "produce": produce(); break;
            case "consume": consume(); break;
            case "admin": admin(); break;
            case "create-assigned": createAssigned(); break;
            case "stream": stream(); break;
            case "configs": configs(); break;
            case "member": member(); break;
            default: throw new IllegalArgumentException("mode " + mode);
        }
    }

    static String described(Admin admin, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource),
            new DescribeConfigsOptions().includeSynonyms(true)).all().get().get(resource);
        ConfigEntry e = config.get("min.insync.racks");
        if (e == null) return "null";
        return "{\"value\":" + q(e.value()) + ",\"source\":" + q(e.source().name())
            + ",\"synonyms\":" + e.synonyms().size() + "}";
    }

    // min.insync.racks through the Java AdminClient: create, describe, alter, describe
    static void configs() throws Exception {
        String topic = opt("topic", null);
        try (Admin admin = Admin.create(base())) {
            NewTopic nt = new NewTopic(topic, 1, (short) 3)
                .configs(Map.of("min.insync.racks", opt("value", null)));
            admin.createTopics(List.of(nt)).all().get();
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            String created = described(admin, resource);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("min.insync.racks", opt("lowered", null)),
                AlterConfigOp.OpType.SET)))).all().get();
            String altered = described(admin, resource);
            String refused;
            try {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("min.insync.racks", "zero"), AlterConfigOp.OpType.SET))))
                    .all().get();
                refused = "null";
            } catch (java.util.concurrent.ExecutionException e) {
                refused = q(e.getCause().getClass().getSimpleName() + ": "
                    + e.getCause().getMessage());
            }
            emit("{\"mode\":\"configs\",\"created\":" + created + ",\"altered\":" + altered
                + ",\"refused\":" + refused + "}");
        }
    }

    // an idempotent acks=all producer of string keys and values
    static Properties idempotent(String deliveryTimeoutMs, String maxBlockMs) {
        Properties p = base();
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", opt("delivery_timeout_ms", deliveryTimeoutMs));
        p.put("max.block.ms", maxBlockMs);
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    static String jsonStrings(List<String> items) {
        StringBuilder b = new StringBuilder("[");
        synchronized (items) {
            for (String e : items) {
                if (b.length() > 1) b.append(',');
                b.append(q(e));
            }
        }
        return b.append(']').toString();
    }

    static void produce() throws Exception {
        Properties p = idempotent("20000", "15000");
        String topic = opt("topic", null);
        int n = Integer.parseInt(opt("n", "10"));
        AtomicInteger acked = new AtomicInteger();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        SortedMap<Integer, Long> lastOffset = Collections.synchronizedSortedMap(new TreeMap<>());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        try {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "java-" + i), (md, e) -> {
                    if (e != null) {
                        errors.add(e.getClass().getSimpleName() + ": " + e.getMessage());
                    } else {
                        acked.incrementAndGet();
                        lastOffset.merge(md.partition(), md.offset(), Math::max);
                    }
                });
            }
            producer.flush();
            StringBuilder offs = new StringBuilder("{");
            for (Map.Entry<Integer, Long> e : lastOffset.entrySet()) {
                if (offs.length() > 1) offs.append(',');
                offs.append('"').append(e.getKey()).append("\":").append(e.getValue());
            }
            offs.append('}');
            emit("{\"mode\":\"produce\",\"sent\":" + n + ",\"acked\":" + acked.get()
                + ",\"last_offsets\":" + offs + ",\"errors\":" + jsonStrings(errors) + "}");
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
    }

    static void stream() throws Exception {
        Properties p = idempotent("120000", "60000");
        String topic = opt("topic", null);
        String prefix = opt("prefix", "java-");
        long seconds = Long.parseLong(opt("seconds", "60"));
        int rate = Integer.parseInt(opt("rate", "200"));
        boolean stamped = opt("stamped", "0").equals("1");  // a 4th field: ack time (ms)
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        java.io.PrintWriter out = new java.io.PrintWriter(
            new java.io.FileWriter(opt("acked", null), true), false);
        int sent = 0;
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        try {
            long start = System.nanoTime();
            long end = start + seconds * 1_000_000_000L;
            while (System.nanoTime() < end) {
                long due = start + (long) sent * 1_000_000_000L / rate;
                long wait = due - System.nanoTime();
                if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                String value = prefix + sent;
                producer.send(new ProducerRecord<>(topic, value, value), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        if (errors.size() < 20) errors.add(e.getClass().getSimpleName() + ": "
                            + e.getMessage());
                    } else {
                        acked.incrementAndGet();
                        synchronized (out) {
                            out.println(value + " " + md.partition() + " " + md.offset()
                                + (stamped ? " " + System.currentTimeMillis() : ""));
                        }
                    }
                });
                sent++;
            }
            producer.flush();
        } finally {
            producer.close(Duration.ofSeconds(30));
            synchronized (out) { out.close(); }
        }
        emit("{\"mode\":\"stream\",\"sent\":" + sent + ",\"acked\":" + acked.get()
            + ",\"failed\":" + failed.get() + ",\"errors\":" + jsonStrings(errors) + "}");
    }

    static void consume() throws Exception {
        Properties p = base();
        p.put("group.id", opt("group", null));
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("max.poll.interval.ms", "10000");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        String topic = opt("topic", null);
        int n = Integer.parseInt(opt("n", "10"));
        long deadline = System.nanoTime()
            + TimeUnit.MILLISECONDS.toNanos(Long.parseLong(opt("timeout_ms", "20000")));
        int count = 0;
        String firstValue = null;
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        try {
            consumer.subscribe(Collections.singletonList(topic));
            while (count < n && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (firstValue == null) firstValue = r.value();
                    count++;
                }
            }
            consumer.commitSync(Duration.ofSeconds(10));
            Set<TopicPartition> parts = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> committed =
                consumer.committed(parts, Duration.ofSeconds(10));
            long total = 0;
            for (OffsetAndMetadata om : committed.values()) if (om != null) total += om.offset();
            emit("{\"mode\":\"consume\",\"consumed\":" + count + ",\"first\":" + q(firstValue)
                + ",\"committed_total\":" + total + ",\"assigned\":" + parts.size() + "}");
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
    }

    static void member() throws Exception {
        Properties p = base();
        p.put("client.id", opt("client_id", "rackguard-java"));
        p.put("group.id", opt("group", null));
        p.put("client.rack", opt("rack", ""));
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("max.poll.interval.ms", "10000");
        String protocol = opt("group_protocol", "classic");
        p.put("group.protocol", protocol);
        if (protocol.equals("classic")) {  // the broker's settings in a KIP-848 group
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "500");
            p.put("partition.assignment.strategy",
                "cooperative-sticky".equals(opt("assignor", "range"))
                    ? CooperativeStickyAssignor.class.getName()
                    : RangeAssignor.class.getName());
        }
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long deadline = System.nanoTime()
            + TimeUnit.SECONDS.toNanos(Long.parseLong(opt("seconds", "10")));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        try {
            consumer.subscribe(Collections.singletonList(opt("topic", null)));
            while (System.nanoTime() < deadline) consumer.poll(Duration.ofMillis(100));
            List<Integer> parts = new ArrayList<>();
            for (TopicPartition tp : consumer.assignment()) parts.add(tp.partition());
            Collections.sort(parts);
            emit("{\"mode\":\"member\",\"partitions\":" + parts + "}");
        } finally {
            consumer.close(Duration.ofSeconds(5));
        }
    }

    static void admin() throws Exception {
        Properties p = base();
        try (Admin admin = Admin.create(p)) {
            String topic = opts.get("topic");
            if (topic != null && "1".equals(opts.get("create"))) {
                int parts = Integer.parseInt(opt("partitions", "1"));
                admin.createTopics(List.of(new NewTopic(topic, parts, (short) 1)))
                    .all().get(15, TimeUnit.SECONDS);
            }
            DescribeClusterResult dc = admin.describeCluster();
            StringBuilder nodes = new StringBuilder("[");
            for (Node nd : dc.nodes().get(15, TimeUnit.SECONDS)) {
                if (nodes.length() > 1) nodes.append(',');
                nodes.append(node(nd));
            }
            nodes.append(']');
            Node controller = dc.controller().get(15, TimeUnit.SECONDS);
            String clusterId = dc.clusterId().get(15, TimeUnit.SECONDS);
            StringBuilder topics = new StringBuilder("[");
            for (String t : new TreeSet<>(admin.listTopics().names().get(15, TimeUnit.SECONDS))) {
                if (topics.length() > 1) topics.append(',');
                topics.append(q(t));
            }
            topics.append(']');
            StringBuilder leaders = new StringBuilder("[");
            if (topic != null) {
                TopicDescription td = admin.describeTopics(List.of(topic))
                    .allTopicNames().get(15, TimeUnit.SECONDS).get(topic);
                for (TopicPartitionInfo pi : td.partitions()) {
                    if (leaders.length() > 1) leaders.append(',');
                    leaders.append("{\"partition\":").append(pi.partition())
                        .append(",\"leader\":").append(pi.leader() == null ? "null" : node(pi.leader()))
                        .append('}');
                }
            }
            leaders.append(']');
            emit("{\"mode\":\"admin\",\"cluster_id\":" + q(clusterId) + ",\"controller\":"
                + (controller == null ? "null" : node(controller)) + ",\"nodes\":" + nodes
                + ",\"topics\":" + topics + ",\"leaders\":" + leaders + "}");
        }
    }

    static void createAssigned() throws Exception {
        List<List<Integer>> parts = new ArrayList<>();
        for (String part : opt("assignment", null).split(";")) {
            List<Integer> replicas = new ArrayList<>();
            for (String b : part.split(",")) replicas.add(Integer.parseInt(b.trim()));
            parts.add(replicas);
        }
        String topic = opt("topic", null);
        boolean validate = "1".equals(opts.get("validate"));
        String error = null;
        String message = null;
        try (Admin admin = Admin.create(base())) {
            try {
                if ("partitions".equals(opt("kind", "topics"))) {
                    int count = Integer.parseInt(opt("count", null));
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(count, parts)),
                            new CreatePartitionsOptions().validateOnly(validate))
                        .all().get(15, TimeUnit.SECONDS);
                } else {
                    Map<Integer, List<Integer>> assignment = new HashMap<>();
                    for (int i = 0; i < parts.size(); i++) assignment.put(i, parts.get(i));
                    admin.createTopics(List.of(new NewTopic(topic, assignment)),
                            new CreateTopicsOptions().validateOnly(validate))
                        .all().get(15, TimeUnit.SECONDS);
                }
            } catch (java.util.concurrent.ExecutionException e) {
                error = e.getCause().getClass().getSimpleName();
                message = e.getCause().getMessage();
            }
        }
        emit("{\"mode\":\"create-assigned\",\"error\":" + q(error) + ",\"message\":"
            + q(message) + "}");
    }
}
