import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client (kafka-clients) against a broker given by address: runs every scenario of
 * tests/gateway/client_scenarios.py in one JVM and prints one JSON line per scenario, with what
 * was sent and what was read back. The Python test judges the lines; this driver only reports.
 * Usage: java ClientDriver BOOTSTRAP TOPIC_PREFIX
 */
public final class ClientDriver {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int LARGE_BYTES = 5 * 1024 * 1024;
    static final String LARGE_TOPIC_MAX = String.valueOf(8 * 1024 * 1024);
    static final long BASE_TS = 1_000_000L;
    static final int MIDDLE = 25;
    static final Duration POLL = Duration.ofMillis(200);
    static final long CONSUME_DEADLINE_MS = 30_000;
    static final HexFormat HEX = HexFormat.of();

    final String bootstrap;
    final String prefix;
    final Admin admin;

    ClientDriver(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) {
        ClientDriver driver = new ClientDriver(args[0], args[1]);
        for (String codec : CODECS) {
            driver.run("codec-" + codec, () -> driver.codec(codec));
        }
        driver.run("keys", driver::keys);
        driver.run("nulls", driver::nulls);
        driver.run("large", driver::large);
        driver.run("too-large", driver::tooLarge);
        driver.run("offsets", driver::offsets);
        driver.run("acks", driver::acks);
        driver.run("idempotent", driver::idempotent);
        driver.run("auto-create", driver::autoCreate);
        driver.run("log-append-time", driver::logAppendTime);
        driver.admin.close();
    }

    void run(String scenario, Supplier<Json> body) {
        Json out;
        try {
            out = body.get();
        } catch (RuntimeException e) {
            out = new Json().put("error", String.valueOf(e));
        }
        System.out.println(new Json().put("scenario", scenario).merge(out));
        System.out.flush();
    }

    // ---- scenarios ----------------------------------------------------------------------------

    Json codec(String codec) {
        String topic = create("codec-" + codec, 1, Map.of());
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            byte[] value = new byte[i * 37 % 2000];
            Arrays.fill(value, (byte) (i % 251));
            records.add(record(topic, bytes("key-" + i), value,
                new RecordHeader("h", bytes(String.valueOf(i))), new RecordHeader("i", bytes("x"))));
        }
        Properties props = producerProps();
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        Json out = roundTrip(topic, 1, props, records);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("earliest")) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seek(tp, MIDDLE);  // inside a batch: the broker returns the whole batch
            return out.put("from_middle", offsetsOf(pollUntil(consumer, records.size() - MIDDLE)));
        }
    }

    Json logAppendTime() {
        String topic = create("log-append-time", 1, Map.of("message.timestamp.type", "LogAppendTime"));
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            records.add(new ProducerRecord<>(topic, 0, BASE_TS + i, null, bytes("lat-" + i)));
        }
        Properties props = producerProps();
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "gzip");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        produceAll(props, records);
        List<Long> timestamps = new ArrayList<>();
        List<Boolean> appendTime = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : consume(topic, 1, records.size(), "earliest")) {
            timestamps.add(r.timestamp());
            appendTime.add(r.timestampType() == TimestampType.LOG_APPEND_TIME);
        }
        return new Json().put("topic", topic).put("timestamps", timestamps)
            .put("log_append_time", appendTime);
    }

    Json autoCreate() {
        String topic = prefix + "-auto-created";  // not created: the producer's metadata creates it
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            records.add(new ProducerRecord<>(topic, bytes("auto-" + i)));
        }
        return roundTrip(topic, 1, producerProps(), records);
    }

    Json keys() {
        String topic = create("keys", 4, Map.of());
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            records.add(new ProducerRecord<>(topic, bytes("k-" + i), bytes("v-" + i)));
        }
        return roundTrip(topic, 4, producerProps(), records).put("partitions", 4);
    }

    Json nulls() {
        String topic = create("nulls", 1, Map.of());
        List<ProducerRecord<byte[], byte[]>> records = List.of(
            record(topic, null, bytes("v")),
            record(topic, bytes("k"), null),
            record(topic, null, null),
            record(topic, bytes("k2"), bytes(""), new RecordHeader("empty", new byte[0]),
                new RecordHeader("null", (byte[]) null)));
        return roundTrip(topic, 1, producerProps(), records);
    }

    Json large() {
        String topic = create("large", 1, Map.of("max.message.bytes", LARGE_TOPIC_MAX));
        byte[] value = largeValue();
        Properties props = producerProps();
        props.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, LARGE_TOPIC_MAX);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            RecordMetadata meta = get(producer.send(new ProducerRecord<>(topic, value)));
            List<ConsumerRecord<byte[], byte[]>> got = consume(topic, 1, 1, "earliest");
            byte[] read = got.isEmpty() ? new byte[0] : got.get(0).value();
            return new Json().put("topic", topic).put("offset", meta.offset())
                .put("sent_sha256", sha256(value)).put("sent_size", value.length)
                .put("received_sha256", sha256(read)).put("received_size", read.length);
        }
    }

    Json tooLarge() {
        String topic = create("too-large", 1, Map.of());
        Properties props = producerProps();
        props.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, LARGE_TOPIC_MAX);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            get(producer.send(new ProducerRecord<>(topic, largeValue())));
            return new Json().put("topic", topic).put("refused", (String) null);
        } catch (RuntimeException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            return new Json().put("topic", topic).put("refused", cause.getClass().getSimpleName());
        }
    }

    Json offsets() {
        String topic = create("offsets", 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps());
             KafkaConsumer<byte[], byte[]> latest = consumer("latest")) {
            for (int i = 0; i < 5; i++) {
                get(producer.send(new ProducerRecord<>(topic, 0, BASE_TS + i * 1000L, null,
                    bytes("old-" + i))));
            }
            latest.assign(List.of(tp));
            long latestPosition = latest.position(tp);
            for (int i = 5; i < 8; i++) {
                get(producer.send(new ProducerRecord<>(topic, 0, BASE_TS + i * 1000L, null,
                    bytes("new-" + i))));
            }
            List<Long> latestOffsets = offsetsOf(pollUntil(latest, 3));
            List<Long> earliestOffsets = offsetsOf(consume(topic, 1, 8, "earliest"));
            List<Json> byTime = new ArrayList<>();
            for (long query : new long[] {0L, BASE_TS + 4500, BASE_TS + 7000, BASE_TS + 99_000}) {
                OffsetAndTimestamp found = latest.offsetsForTimes(Map.of(tp, query)).get(tp);
                byTime.add(new Json().put("query", query)
                    .put("offset", found == null ? null : found.offset())
                    .put("timestamp", found == null ? null : found.timestamp()));
            }
            return new Json().put("topic", topic).put("latest_position", latestPosition)
                .put("latest_received", latestOffsets).put("earliest_received", earliestOffsets)
                .put("by_time", byTime)
                .put("beginning", latest.beginningOffsets(List.of(tp)).get(tp))
                .put("end", latest.endOffsets(List.of(tp)).get(tp));
        }
    }

    Json acks() {
        String topic = create("acks", 1, Map.of());
        List<Json> sent = new ArrayList<>();
        for (String acks : new String[] {"0", "1", "all"}) {
            Properties props = producerProps();
            props.put(ProducerConfig.ACKS_CONFIG, acks);
            props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, acks.equals("all") ? "true" : "false");
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
                for (int i = 0; i < 10; i++) {
                    ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, bytes("acks-" + acks),
                        bytes(acks + "-" + i));
                    RecordMetadata meta = get(producer.send(r));
                    sent.add(describe(meta.partition(), meta.offset(), r.key(), r.value(), r.headers()));
                }
            }
        }
        return new Json().put("topic", topic).put("sent", sent)
            .put("received", describeAll(consume(topic, 1, 30, "earliest")));
    }

    Json idempotent() {
        String topic = create("idempotent", 1, Map.of());
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            records.add(new ProducerRecord<>(topic, bytes("id-" + i), bytes("value-" + i)));
        }
        Properties props = producerProps();  // the Java client's defaults: idempotent, acks=all
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "512");  // several batches, so sequences advance
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return roundTrip(topic, 1, props, records);
    }

    // ---- helpers -------------------------------------------------------------------------------

    String create(String name, int partitions, Map<String, String> configs) {
        String topic = prefix + "-" + name;
        NewTopic spec = new NewTopic(topic, partitions, (short) 1).configs(configs);
        get(admin.createTopics(List.of(spec)).all());
        return topic;
    }

    Json roundTrip(String topic, int partitions, Properties props,
                   List<ProducerRecord<byte[], byte[]>> records) {
        List<Json> sent = produceAll(props, records);
        List<ConsumerRecord<byte[], byte[]>> got = consume(topic, partitions, records.size(), "earliest");
        return new Json().put("topic", topic).put("sent", sent).put("received", describeAll(got));
    }

    /** Sends ``records`` together (batched as the producer likes); what the broker answered. */
    List<Json> produceAll(Properties props, List<ProducerRecord<byte[], byte[]>> records) {
        List<Json> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : records) {
                futures.add(producer.send(r));
            }
            producer.flush();
            for (int i = 0; i < records.size(); i++) {
                RecordMetadata meta = get(futures.get(i));
                ProducerRecord<byte[], byte[]> r = records.get(i);
                sent.add(describe(meta.partition(), meta.offset(), r.key(), r.value(), r.headers()));
            }
        }
        return sent;
    }

    static ProducerRecord<byte[], byte[]> record(String topic, byte[] key, byte[] value,
                                                 Header... headers) {
        return new ProducerRecord<>(topic, null, null, key, value, List.of(headers));
    }

    Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return props;
    }

    KafkaConsumer<byte[], byte[]> consumer(String reset) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }

    /** Reads ``expected`` records from every partition of ``topic`` (assign, no group). */
    List<ConsumerRecord<byte[], byte[]>> consume(String topic, int partitions, int expected, String reset) {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(reset)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            return pollUntil(consumer, expected);
        }
    }

    static List<ConsumerRecord<byte[], byte[]>> pollUntil(KafkaConsumer<byte[], byte[]> consumer, int expected) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + CONSUME_DEADLINE_MS;
        while (out.size() < expected && System.currentTimeMillis() < deadline) {
            consumer.poll(POLL).forEach(out::add);
        }
        return out;
    }

    static List<Long> offsetsOf(List<ConsumerRecord<byte[], byte[]>> records) {
        List<Long> out = new ArrayList<>();
        records.forEach(r -> out.add(r.offset()));
        return out;
    }

    static List<Json> describeAll(List<ConsumerRecord<byte[], byte[]>> records) {
        List<Json> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            out.add(describe(r.partition(), r.offset(), r.key(), r.value(), r.headers()));
        }
        return out;
    }

    static Json describe(int partition, long offset, byte[] key, byte[] value, Iterable<Header> headers) {
        List<List<String>> hs = new ArrayList<>();
        for (Header h : headers) {
            hs.add(Arrays.asList(h.key(), hex(h.value())));
        }
        return new Json().put("partition", partition).put("offset", offset).put("key", hex(key))
            .put("value", hex(value)).put("headers", hs);
    }

    static byte[] largeValue() {
        byte[] value = new byte[LARGE_BYTES];
        for (int i = 0; i < value.length; i++) {
            value[i] = (byte) (i * 31 + i / 4096);
        }
        return value;
    }

    static <T> T get(Future<T> future) {
        try {
            return future.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        } catch (ExecutionException e) {
            throw new IllegalStateException(e.getCause());
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String hex(byte[] b) {
        return b == null ? null : HEX.formatHex(b);
    }

    static String sha256(byte[] b) {
        try {
            return HEX.formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A JSON object built in insertion order; values are null, numbers, booleans, strings,
     *  lists, Json. */
    static final class Json {
        final Map<String, Object> fields = new java.util.LinkedHashMap<>();

        Json put(String key, Object value) {
            fields.put(key, value);
            return this;
        }

        Json merge(Json other) {
            fields.putAll(other.fields);
            return this;
        }

        @Override
        public String toString() {
            StringBuilder out = new StringBuilder();
            write(out, this);
            return out.toString();
        }

        static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else if (value instanceof Json json) {
                out.append('{');
                String sep = "";
                for (Map.Entry<String, Object> e : json.fields.entrySet()) {
                    out.append(sep);
                    write(out, e.getKey());
                    out.append(':');
                    write(out, e.getValue());
                    sep = ",";
                }
                out.append('}');
            } else if (value instanceof List<?> list) {
                out.append('[');
                for (int i = 0; i < list.size(); i++) {
                    out.append(i == 0 ? "" : ",");
                    write(out, list.get(i));
                }
                out.append(']');
            } else {
                out.append('"');
                for (char c : value.toString().toCharArray()) {
                    if (c == '"' || c == '\\') {
                        out.append('\\').append(c);
                    } else if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
                out.append('"');
            }
        }
    }
}
