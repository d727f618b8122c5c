// Two Java consumers (kafka-clients 3.9) with group.protocol=consumer (KIP-848) in one group,
// each in its own thread, reading a topic from the start and committing after every poll.
// Usage: ConsumerProtocolGroup <bootstrap> <group> <topic> <records> <partitions>
// Each member polls until every record was seen by one of them and it holds a strict, non-empty
// part of the partitions (the group is split), then waits for the other to get there too, and
// closes (leaving the group). One JSON line reports what each member held and read.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ConsumerProtocolGroup {
    static final int MAX_POLLS = 1200;  // 100 ms each: two minutes at most
    static final Duration POLL = Duration.ofMillis(100);

    final String bootstrap, group, topic;
    final int records, partitions;
    final Set<String> seen = ConcurrentHashMap.newKeySet();  // "partition:offset"
    final CountDownLatch split = new CountDownLatch(2);

    ConsumerProtocolGroup(String[] args) {
        bootstrap = args[0];
        group = args[1];
        topic = args[2];
        records = Integer.parseInt(args[3]);
        partitions = Integer.parseInt(args[4]);
    }

    public static void main(String[] args) throws Exception {
        ConsumerProtocolGroup run = new ConsumerProtocolGroup(args);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<String>> members = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            final String name = "member-" + i;
            members.add(pool.submit(() -> run.member(name)));
        }
        List<String> reports = new ArrayList<>();
        for (Future<String> member : members) {
            reports.add(member.get(5, TimeUnit.MINUTES));
        }
        pool.shutdown();
        System.out.println("{\"scenario\": \"consumer_protocol_group\", \"seen\": " + run.seen.size()
                + ", \"members\": [" + String.join(", ", reports) + "]}");
    }

    String member(String name) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", "consumer");
        props.put("client.id", name);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        Set<Integer> held = new TreeSet<>();
        int read = 0;
        String error = null;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            boolean counted = false;
            for (int poll = 0; poll < MAX_POLLS && split.getCount() > 0; poll++) {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    seen.add(record.partition() + ":" + record.offset());
                    read++;
                }
                consumer.commitSync();
                Set<Integer> now = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) {
                    now.add(tp.partition());
                }
                if (!counted && seen.size() >= records && !now.isEmpty() && now.size() < partitions) {
                    held = now;
                    counted = true;
                    split.countDown();
                }
            }
        } catch (Exception e) {
            error = e.toString();
        }
        return "{\"client\": \"" + name + "\", \"held\": " + held + ", \"read\": " + read
                + ", \"error\": " + (error == null ? "null" : "\"" + error.replace("\"", "'") + "\"")
                + "}";
    }
}
