// A read-process-write loop with the Java client, one transaction per request, for
// tests/gateway/test_txn_read_process_write.py. It speaks the JSON-lines contract of
// compat_tests/contract.py: each request line {"op": "commit"} or {"op": "abort"} runs one round
// (poll the input with read_committed, write each record transformed to the same partition of
// the output, send the consumer's positions to the transaction, then commit or abort it) and is
// answered with what the round wrote and the offsets it sent. After an abort the consumer goes
// back to the group's committed offsets, so the aborted records are processed again.
// Usage: ReadProcessWrite <bootstrap> <group> <transactional id> <input> <output> <max records>
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ReadProcessWrite {
    static final Duration POLL = Duration.ofMillis(200);
    static final int MAX_EMPTY_POLLS = 300;  // a round waits a minute at most for input
    static final Duration TIMEOUT = Duration.ofSeconds(30);
    static final byte[] PREFIX = "out:".getBytes(StandardCharsets.US_ASCII);
    static final HexFormat HEX = HexFormat.of();

    final String output;
    final KafkaConsumer<byte[], byte[]> consumer;
    final KafkaProducer<byte[], byte[]> producer;

    ReadProcessWrite(String[] args) {
        String bootstrap = args[0];
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", args[1]);
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("max.poll.records", args[5]);
        consumer = new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.subscribe(List.of(args[3]));
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", args[2]);
        p.put("linger.ms", "0");
        producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        output = args[4];
    }

    String round(boolean commit) {
        ConsumerRecords<byte[], byte[]> records = poll();
        producer.beginTransaction();
        Map<Integer, List<String>> produced = new TreeMap<>();
        Map<TopicPartition, OffsetAndMetadata> positions = new TreeMap<>(
            (a, b) -> Integer.compare(a.partition(), b.partition()));
        for (ConsumerRecord<byte[], byte[]> r : records) {
            byte[] value = transform(r.value());
            producer.send(new ProducerRecord<>(output, r.partition(), r.key(), value));
            produced.computeIfAbsent(r.partition(), k -> new ArrayList<>())
                .add("[" + hex(r.key()) + ", " + hex(value) + "]");
            positions.put(new TopicPartition(r.topic(), r.partition()),
                          new OffsetAndMetadata(r.offset() + 1));
        }
        producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
        // flushed first: an abort drops the records not sent yet, and the aborted records are
        // to reach the broker (read_uncommitted readers see them)
        producer.flush();
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
            rewind();
        }
        StringBuilder offsets = new StringBuilder();
        positions.forEach((tp, o) -> offsets.append(offsets.length() == 0 ? "" : ", ")
            .append("\"").append(tp.partition()).append("\": ").append(o.offset()));
        StringBuilder out = new StringBuilder();
        produced.forEach((p, list) -> out.append(out.length() == 0 ? "" : ", ")
            .append("\"").append(p).append("\": [").append(String.join(", ", list)).append("]"));
        return "{\"produced\": {" + out + "}, \"offsets\": {" + offsets + "}}";
    }

    ConsumerRecords<byte[], byte[]> poll() {
        for (int i = 0; i < MAX_EMPTY_POLLS; i++) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
            if (!records.isEmpty()) {
                return records;
            }
        }
        throw new IllegalStateException("no input records within " + MAX_EMPTY_POLLS + " polls");
    }

    /** Back to the group's committed offsets (stable: read_committed asks require_stable). */
    void rewind() {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, TIMEOUT);
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata at = committed.get(tp);
            if (at == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, at.offset());
            }
        }
    }

    static byte[] transform(byte[] value) {
        byte[] out = new byte[PREFIX.length + value.length];
        System.arraycopy(PREFIX, 0, out, 0, PREFIX.length);
        System.arraycopy(value, 0, out, PREFIX.length, value.length);
        return out;
    }

    static String hex(byte[] data) {
        return data == null ? "null" : "\"" + HEX.formatHex(data) + "\"";
    }

    static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    void close() {
        producer.close(TIMEOUT);
        consumer.close(TIMEOUT);
    }

    public static void main(String[] args) throws Exception {
        ReadProcessWrite loop = new ReadProcessWrite(args);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in,
                                                                     StandardCharsets.UTF_8));
        try {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String answer;
                try {
                    answer = "{\"ok\": " + loop.round(line.contains("\"commit\"")) + "}";
                } catch (RuntimeException e) {
                    answer = "{\"error\": " + quoted(e.toString().replace('\n', ' ')) + "}";
                }
                System.out.println(answer);
                System.out.flush();
            }
        } finally {
            loop.close();
        }
    }
}
