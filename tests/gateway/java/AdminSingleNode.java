import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The admin calls a single broker answers, through the Java Admin client: one "name=value" line
 * per call (the exception's class name when it fails). Arguments: bootstrap, an existing topic
 * with 2 partitions, the broker's log directory, the broker id.
 */
public class AdminSingleNode {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        String logDir = args[2];
        int node = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            AclBinding acl = new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ,
                                       AclPermissionType.ALLOW));
            print("createAcls", admin.createAcls(List.of(acl)).all());
            print("describeAcls", admin.describeAcls(AclBindingFilter.ANY).values());
            print("deleteAcls", admin.deleteAcls(List.of(AclBindingFilter.ANY)).all());
            print("electLeaders", admin.electLeaders(ElectionType.PREFERRED, Set.of(p0))
                .partitions().thenApply(m -> m.get(p0).map(e -> e.getClass().getSimpleName())
                                            .orElse("none")));
            print("alterReassignment", admin.alterPartitionReassignments(
                Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(node))))).all());
            print("cancelReassignment", admin.alterPartitionReassignments(
                Map.of(p1, Optional.empty())).all());
            print("listReassignments", admin.listPartitionReassignments().reassignments()
                .thenApply(Map::size));
            print("alterReplicaLogDirs", admin.alterReplicaLogDirs(
                Map.of(new TopicPartitionReplica(topic, 0, node), logDir)).all());
            print("describeProducers", admin.describeProducers(List.of(p0)).partitionResult(p0)
                .thenApply(AdminSingleNode::producers));
            print("describeTopics", admin.describeTopics(List.of(topic)).allTopicNames()
                .thenApply(m -> describe(m.get(topic))));
        }
    }

    static String producers(PartitionProducerState state) {
        StringBuilder out = new StringBuilder();
        for (ProducerState p : state.activeProducers()) {
            out.append(p.producerId()).append('/').append(p.producerEpoch()).append('/')
               .append(p.lastSequence()).append('/').append(p.coordinatorEpoch().orElse(-1))
               .append('/').append(p.currentTransactionStartOffset().orElse(-1)).append(';');
        }
        return out.toString();
    }

    static String describe(TopicDescription description) {
        StringBuilder out = new StringBuilder(description.name());
        for (TopicPartitionInfo p : description.partitions()) {
            out.append(' ').append(p.partition()).append(':').append(p.leader().id())
               .append(p.replicas().size()).append(p.isr().size());
        }
        return out.toString();
    }

    static void print(String name, KafkaFuture<?> future) {
        String value;
        try {
            value = String.valueOf(future.get());
        } catch (ExecutionException e) {
            value = e.getCause().getClass().getSimpleName();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            value = "interrupted";
        }
        System.out.println(name + "=" + value);
        System.out.flush();
    }
}
