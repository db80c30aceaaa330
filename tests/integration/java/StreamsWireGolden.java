// Golden bytes of Kafka Streams' assignment data, written by Kafka Streams' own classes:
// the SubscriptionInfo a member puts in its JoinGroup (every version, 1 to the latest),
// the AssignmentInfo the leader sends in SyncGroup (every version), and both inside the
// consumer protocol's envelope, as the stream assignor hands them to the consumer.
// Prints one JSON object: {"name": "hex", ...}. tests/unit/protocol/streams_golden.json
// is its output; tests/integration/test_streams_golden.py runs it and compares.
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.assignment.AssignmentInfo;
import org.apache.kafka.streams.processor.internals.assignment.StreamsAssignmentProtocolVersions;
import org.apache.kafka.streams.processor.internals.assignment.SubscriptionInfo;
import org.apache.kafka.streams.state.HostInfo;

public class StreamsWireGolden {
    static final UUID PROCESS = UUID.fromString("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");

    static String hex(ByteBuffer buf) {
        ByteBuffer b = buf.duplicate();
        b.rewind();
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) sb.append(String.format("%02x", b.get() & 0xff));
        return sb.toString();
    }

    static Map<TaskId, Long> offsetSums(boolean named) {
        Map<TaskId, Long> sums = new LinkedHashMap<>();
        String topology = named ? "orders-topology" : null;
        sums.put(new TaskId(0, 0, topology), -2L);   // running active (Task.LATEST_OFFSET)
        sums.put(new TaskId(0, 3, topology), 1234L); // state on disk (standby or former task)
        sums.put(new TaskId(1, 2, topology), 7L);
        return sums;
    }

    static Map<String, String> tags() {
        Map<String, String> tags = new TreeMap<>();
        tags.put("cluster", "k8s-cluster1");
        tags.put("zone", "eu-central-1a");
        return tags;
    }

    static AssignmentInfo assignment(int version) {
        List<TaskId> active = new ArrayList<>();
        active.add(new TaskId(0, 0));
        active.add(new TaskId(1, 2));
        Map<TaskId, Set<TopicPartition>> standby = new LinkedHashMap<>();
        standby.put(new TaskId(0, 3), Set.of(new TopicPartition("app-store-changelog", 3)));
        standby.put(new TaskId(1, 4), Set.of(new TopicPartition("words", 4)));
        Map<HostInfo, Set<TopicPartition>> byHost = new LinkedHashMap<>();
        byHost.put(new HostInfo("host-a", 8080), Set.of(new TopicPartition("words", 0)));
        Map<HostInfo, Set<TopicPartition>> standbyByHost = new LinkedHashMap<>();
        standbyByHost.put(new HostInfo("host-b", 8081), Set.of(new TopicPartition("words", 3)));
        int common = StreamsAssignmentProtocolVersions.LATEST_SUPPORTED_VERSION;
        return new AssignmentInfo(version, common, active, standby, byHost, standbyByHost,
                                  version >= 4 ? 0 : 0);
    }

    public static void main(String[] args) {
        int latest = StreamsAssignmentProtocolVersions.LATEST_SUPPORTED_VERSION;
        Map<String, String> out = new LinkedHashMap<>();
        out.put("latest", Integer.toString(latest));
        for (int v = 1; v <= latest; v++) {
            SubscriptionInfo info = new SubscriptionInfo(
                v, latest, new ProcessId(PROCESS), v >= 2 ? "host-a:8080" : null,
                offsetSums(false), (byte) 5, 0, tags());
            out.put("subscription_v" + v, hex(info.encode()));
        }
        SubscriptionInfo named = new SubscriptionInfo(
            latest, latest, new ProcessId(PROCESS), "host-a:8080", offsetSums(true),
            (byte) 1, 0, tags());
        out.put("subscription_named", hex(named.encode()));
        SubscriptionInfo untagged = new SubscriptionInfo(
            latest, latest, new ProcessId(PROCESS), null, offsetSums(false), (byte) 0, 0,
            new TreeMap<>());
        out.put("subscription_untagged", hex(untagged.encode()));
        for (int v = 1; v <= latest; v++) {
            out.put("assignment_v" + v, hex(assignment(v).encode()));
        }
        ByteBuffer user = named.encode();
        ConsumerPartitionAssignor.Subscription sub = new ConsumerPartitionAssignor.Subscription(
            List.of("words"), user, List.of(new TopicPartition("words", 1)), 4,
            java.util.Optional.of("eu-central-1a"));
        out.put("envelope_subscription", hex(ConsumerProtocol.serializeSubscription(sub)));
        ConsumerPartitionAssignor.Assignment asg = new ConsumerPartitionAssignor.Assignment(
            List.of(new TopicPartition("words", 0), new TopicPartition("words", 2)),
            assignment(latest).encode());
        out.put("envelope_assignment", hex(ConsumerProtocol.serializeAssignment(asg)));
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, String> e : out.entrySet()) {
            if (!first) sb.append(",\n ");
            first = false;
            sb.append('"').append(e.getKey()).append("\": \"").append(e.getValue()).append('"');
        }
        System.out.println(sb.append("}"));
    }
}
