// KIP-708's example with real Kafka Streams: several KafkaStreams instances in one JVM,
// each with its own bootstrap address (its own sidecar), state directory, client id and
// client tags, rack.aware.assignment.tags=zone,cluster and num.standby.replicas=2, all
// running one stateful topology (a count per key over the input topic's partitions).
//
//   java StreamsKip708 APP INPUT OUTPUT STATE_DIR NAME=BOOTSTRAP,ZONE,CLUSTER ...
//
// Then, one command per line on stdin, each answered by one "RESULT {json}" line:
//   status          every instance's state and KafkaStreams.metadataForLocalThreads():
//                   {"instances": {NAME: {"state", "active": [task], "standby": [task],
//                    "consumers": [consumer client id]}}}
//   close NAME ...  closes those instances (no leave: as if their zone went away)
//   quit            closes the rest and exits
//
// With -Dgroup.protocol=streams the instances use the KIP-1071 streams rebalance protocol
// (the broker assigns): the group's streams.num.standby.replicas (2) and
// streams.rack.aware.assignment.tags (zone,cluster) are set first, through the first
// instance's bootstrap address.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

public class StreamsKip708 {
    static final boolean STREAMS_PROTOCOL = "streams".equals(System.getProperty("group.protocol"));

    static void standbysForTheGroup(String app, String bootstrap) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, app);
            admin.incrementalAlterConfigs(Map.of(group, List.of(
                new AlterConfigOp(new ConfigEntry("streams.num.standby.replicas", "2"),
                                  AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("streams.rack.aware.assignment.tags",
                                                  "zone,cluster"),
                                  AlterConfigOp.OpType.SET))))
                .all().get();
        }
    }
    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String list(Iterable<String> items) {
        StringBuilder sb = new StringBuilder("[");
        for (String s : items) {
            if (sb.length() > 1) sb.append(",");
            sb.append(quote(s));
        }
        return sb.append("]").toString();
    }

    static KafkaStreams start(String app, String input, String output, String stateDir,
                              String name, String bootstrap, String zone, String cluster) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, name);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir + "/" + name);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // only an instance holding the task's whole state counts as caught up (as with
        // production-sized state): a lost active goes to one of its standbys
        p.put(StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG, 0L);
        p.put(StreamsConfig.clientTagPrefix("zone"), zone);
        p.put(StreamsConfig.clientTagPrefix("cluster"), cluster);
        p.put(StreamsConfig.RACK_AWARE_ASSIGNMENT_TAGS_CONFIG, "zone,cluster");
        if (STREAMS_PROTOCOL) {
            p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        } else {
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.start();
        return streams;
    }

    public static void main(String[] args) throws Exception {
        String app = args[0], input = args[1], output = args[2], stateDir = args[3];
        Map<String, KafkaStreams> instances = new LinkedHashMap<>();
        if (STREAMS_PROTOCOL) {
            standbysForTheGroup(app, args[4].split("=", 2)[1].split(",")[0]);
        }
        for (int i = 4; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            String[] parts = kv[1].split(",");
            instances.put(kv[0], start(app, input, output, stateDir, kv[0], parts[0], parts[1],
                                       parts[2]));
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("status")) {
                StringBuilder sb = new StringBuilder("{\"instances\":{");
                boolean first = true;
                for (Map.Entry<String, KafkaStreams> e : instances.entrySet()) {
                    TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
                    List<String> consumers = new ArrayList<>();
                    String state = e.getValue().state().toString();
                    if (e.getValue().state().isRunningOrRebalancing()) {
                        for (ThreadMetadata t : e.getValue().metadataForLocalThreads()) {
                            for (TaskMetadata m : t.activeTasks()) active.add(m.taskId().toString());
                            for (TaskMetadata m : t.standbyTasks()) standby.add(m.taskId().toString());
                            consumers.add(t.consumerClientId());
                        }
                    }
                    if (!first) sb.append(",");
                    first = false;
                    sb.append(quote(e.getKey())).append(":{\"state\":").append(quote(state))
                      .append(",\"active\":").append(list(active))
                      .append(",\"standby\":").append(list(standby))
                      .append(",\"consumers\":").append(list(consumers)).append("}");
                }
                System.out.println("RESULT " + sb.append("}}"));
            } else if (words[0].equals("close")) {
                for (int i = 1; i < words.length; i++) {
                    KafkaStreams s = instances.remove(words[i]);
                    if (s != null) s.close(Duration.ofSeconds(20));
                }
                System.out.println("RESULT {\"closed\":" + (words.length - 1) + "}");
            } else if (words[0].equals("quit")) {
                break;
            }
            System.out.flush();
        }
        for (KafkaStreams s : instances.values()) s.close(Duration.ofSeconds(20));
        System.out.println("RESULT {\"quit\":true}");
        System.out.flush();
        System.exit(0);
    }
}
