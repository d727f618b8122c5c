import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * The Java client (kafka-clients, 3.9 or 4.x: the same source compiles against both) behind the
 * JSON-lines contract of compat_tests/contract.py: one request per stdin line, one answer per
 * stdout line. Usage: java ClientDriver BOOTSTRAP
 */
public final class ClientDriver {
    static final Duration POLL = Duration.ofMillis(100);
    static final HexFormat HEX = HexFormat.of();

    final String bootstrap;
    final Admin admin;
    final Map<String, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();

    ClientDriver(String bootstrap) {
        this.bootstrap = bootstrap;
        this.admin = Admin.create(clientProperties(bootstrap));
    }

    /** The bootstrap, and the settings of COMMITGATE_COMPAT_CLIENT_SETTINGS (a properties file). */
    static Properties clientProperties(String bootstrap) {
        Properties props = new Properties();
        String file = System.getenv("COMMITGATE_COMPAT_CLIENT_SETTINGS");
        if (file != null) {
            try (java.io.Reader in = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(file))) {
                props.load(in);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return props;
    }

    public static void main(String[] args) throws Exception {
        ClientDriver driver = new ClientDriver(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            Json answer;
            try {
                answer = new Json().put("ok", driver.handle(JsonReader.parse(line)));
            } catch (Exception e) {
                Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                answer = new Json().put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
            }
            System.out.println(answer);
            System.out.flush();
        }
        driver.consumers.values().forEach(KafkaConsumer::close);
        driver.admin.close();
    }

    Json handle(Map<String, Object> r) throws Exception {
        String topic = (String) r.get("topic");
        switch ((String) r.get("op")) {
            case "hello":
                return new Json().put("client", "java").put("version", AppInfoParser.getVersion());
            case "metadata": {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                List<Integer> partitions = new ArrayList<>();
                d.partitions().forEach(p -> partitions.add(p.partition()));
                return new Json().put("partitions", partitions)
                    .put("brokers", admin.describeCluster().nodes().get().size());
            }
            case "create_topic": {
                @SuppressWarnings("unchecked")
                Map<String, String> configs = (Map<String, String>) (Map<?, ?>) r.get("configs");
                NewTopic spec = new NewTopic(topic, (int) (long) (Long) r.get("partitions"), (short) 1).configs(configs);
                admin.createTopics(List.of(spec)).all().get();
                return new Json();
            }
            case "delete_topic":
                admin.deleteTopics(List.of(topic)).all().get();
                return new Json();
            case "list_topics":
                return new Json().put("topics", new ArrayList<>(admin.listTopics().names().get()));
            case "describe_configs": {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
                Json configs = new Json();
                config.entries().forEach(e -> configs.put(e.name(), e.value()));
                return new Json().put("configs", configs);
            }
            case "alter_config": {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry((String) r.get("name"), (String) r.get("value")),
                    AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
                return new Json();
            }
            case "create_partitions":
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(intOf(r, "total")))).all().get();
                return new Json();
            case "delete_records":
                admin.deleteRecords(Map.of(new TopicPartition(topic, intOf(r, "partition")),
                    RecordsToDelete.beforeOffset((Long) r.get("offset")))).all().get();
                return new Json();
            case "produce":
                return produce(r);
            case "consumer_open":
                return open(r);
            case "poll":
                return poll(r);
            case "commit":
                return commit(r);
            case "consumer_close":
                consumers.remove((String) r.get("name")).close();
                return new Json();
            default:
                throw new IllegalArgumentException("unknown op " + r.get("op"));
        }
    }

    /** Commits the offsets asked for ({partition: offset}), or the positions when none are given. */
    @SuppressWarnings("unchecked")
    Json commit(Map<String, Object> r) {
        KafkaConsumer<byte[], byte[]> consumer = consumers.get((String) r.get("name"));
        Map<String, Object> asked = (Map<String, Object>) r.get("offsets");
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        Json committed = new Json();
        for (TopicPartition tp : consumer.assignment()) {
            String partition = String.valueOf(tp.partition());
            if (asked != null && !asked.containsKey(partition)) {
                continue;
            }
            long offset = asked == null ? consumer.position(tp) : (Long) asked.get(partition);
            offsets.put(tp, new OffsetAndMetadata(offset));
            committed.put(partition, offset);
        }
        consumer.commitSync(offsets);
        return new Json().put("committed", committed);
    }

    @SuppressWarnings("unchecked")
    Json produce(Map<String, Object> r) throws Exception {
        Map<String, Object> config = (Map<String, Object>) r.get("config");
        Properties props = clientProperties(bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        String[][] names = {{"compression", ProducerConfig.COMPRESSION_TYPE_CONFIG},
            {"linger_ms", ProducerConfig.LINGER_MS_CONFIG}, {"batch_bytes", ProducerConfig.BATCH_SIZE_CONFIG},
            {"max_request_bytes", ProducerConfig.MAX_REQUEST_SIZE_CONFIG}, {"acks", ProducerConfig.ACKS_CONFIG},
            {"idempotent", ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG},
            {"transactional_id", ProducerConfig.TRANSACTIONAL_ID_CONFIG}};
        for (String[] name : names) {
            if (config.get(name[0]) != null) {
                props.put(name[1], String.valueOf(config.get(name[0])));
            }
        }  // "partitioner": murmur2 is the Java client's own for keyed records
        boolean transactional = config.get("transactional_id") != null;
        List<Json> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (transactional) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (Object o : (List<Object>) r.get("records")) {
                Map<String, Object> m = (Map<String, Object>) o;
                List<Header> headers = new ArrayList<>();
                for (Object h : (List<Object>) m.get("headers")) {
                    List<Object> pair = (List<Object>) h;
                    headers.add(new RecordHeader((String) pair.get(0), bytesOf(pair.get(1))));
                }
                Long partition = (Long) m.get("partition");
                futures.add(producer.send(new ProducerRecord<>((String) r.get("topic"),
                    partition == null ? null : (int) (long) partition, (Long) m.get("timestamp"),
                    bytesOf(m.get("key")), bytesOf(m.get("value")), headers)));
            }
            producer.flush();
            if (transactional) {
                if (Boolean.TRUE.equals(config.get("abort"))) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata meta = f.get();
                sent.add(new Json().put("partition", meta.partition())
                    .put("offset", meta.hasOffset() ? meta.offset() : -1L));
            }
        }
        return new Json().put("sent", sent);
    }

    /** A regex the broker resolves (KIP-848 v1): SubscriptionPattern, kafka-clients 4.0+, by
     *  reflection so that this file also compiles against 3.9 (whose cell is n/a). */
    static void subscribeBrokerRegex(KafkaConsumer<byte[], byte[]> consumer, String regex)
            throws ReflectiveOperationException {
        Class<?> pattern = Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
        Object subscription = pattern.getConstructor(String.class).newInstance(regex);
        KafkaConsumer.class.getMethod("subscribe", pattern).invoke(consumer, subscription);
    }

    @SuppressWarnings("unchecked")
    Json open(Map<String, Object> r) throws ReflectiveOperationException {
        String group = (String) r.get("group");
        Object protocol = r.get("group_protocol");
        Object start = r.get("start");
        Properties props = clientProperties(bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest".equals(start) ? "latest" : "earliest");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG,
            Boolean.TRUE.equals(r.get("read_committed")) ? "read_committed" : "read_uncommitted");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        if (protocol != null) {
            props.put("group.protocol", protocol);
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        consumers.put((String) r.get("name"), consumer);
        String topic = (String) r.get("topic");
        Json positions = new Json();
        if (r.get("partitions") == null) {
            if ("consumer".equals(protocol) && topic.startsWith("^")) {
                subscribeBrokerRegex(consumer, topic);
            } else {
                consumer.subscribe(List.of(topic));
            }
            return new Json().put("positions", positions);
        }
        List<TopicPartition> tps = new ArrayList<>();
        for (Object p : (List<Object>) r.get("partitions")) {
            tps.add(new TopicPartition(topic, (int) (long) (Long) p));
        }
        consumer.assign(tps);
        if (start instanceof Long offset) {
            tps.forEach(tp -> consumer.seek(tp, offset));
        } else if (start instanceof Map<?, ?> at) {
            Map<TopicPartition, Long> query = new HashMap<>();
            tps.forEach(tp -> query.put(tp, (Long) at.get("timestamp")));
            for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : consumer.offsetsForTimes(query).entrySet()) {
                if (e.getValue() == null) {
                    consumer.seekToEnd(List.of(e.getKey()));
                } else {
                    consumer.seek(e.getKey(), e.getValue().offset());
                }
            }
        }  // "earliest", "latest", "committed": the group's offset, else auto.offset.reset
        for (TopicPartition tp : tps) {
            positions.put(String.valueOf(tp.partition()), consumer.position(tp));
        }
        return new Json().put("positions", positions);
    }

    Json poll(Map<String, Object> r) {
        KafkaConsumer<byte[], byte[]> consumer = consumers.get((String) r.get("name"));
        long count = (Long) r.get("count");
        long deadline = System.currentTimeMillis() + (Long) r.get("max_ms");
        List<Json> out = new ArrayList<>();
        while (out.size() < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> c : consumer.poll(POLL)) {
                List<List<String>> hs = new ArrayList<>();
                for (Header h : c.headers()) {
                    hs.add(Arrays.asList(h.key(), hex(h.value())));
                }
                out.add(new Json().put("partition", c.partition()).put("offset", c.offset())
                    .put("timestamp", c.timestamp()).put("key", hex(c.key())).put("value", hex(c.value()))
                    .put("headers", hs));
            }
        }
        List<Integer> assignment = new ArrayList<>();
        consumer.assignment().forEach(tp -> assignment.add(tp.partition()));
        assignment.sort(null);
        return new Json().put("records", out).put("assignment", assignment);
    }

    static int intOf(Map<String, Object> r, String key) {
        return (int) (long) (Long) r.get(key);
    }

    static byte[] bytesOf(Object hex) {
        return hex == null ? null : HEX.parseHex((String) hex);
    }

    static String hex(byte[] b) {
        return b == null ? null : HEX.formatHex(b);
    }

    /** A small JSON reader: objects (LinkedHashMap), arrays, strings, whole numbers (Long),
     *  booleans and null: what the contract's requests hold. */
    static final class JsonReader {
        final String text;
        int pos;

        JsonReader(String text) {
            this.text = text;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> parse(String line) {
            return (Map<String, Object>) new JsonReader(line).value();
        }

        Object value() {
            skip();
            char c = text.charAt(pos);
            if (c == '{') {
                Map<String, Object> map = new LinkedHashMap<>();
                pos++;
                for (skip(); text.charAt(pos) != '}'; skip()) {
                    String key = (String) value();
                    skip();
                    pos++;  // ':'
                    map.put(key, value());
                    skip();
                    if (text.charAt(pos) == ',') {
                        pos++;
                    }
                }
                pos++;
                return map;
            }
            if (c == '[') {
                List<Object> list = new ArrayList<>();
                pos++;
                for (skip(); text.charAt(pos) != ']'; skip()) {
                    list.add(value());
                    skip();
                    if (text.charAt(pos) == ',') {
                        pos++;
                    }
                }
                pos++;
                return list;
            }
            if (c == '"') {
                return string();
            }
            int end = pos;
            while (end < text.length() && ",}] ".indexOf(text.charAt(end)) < 0) {
                end++;
            }
            String word = text.substring(pos, end);
            pos = end;
            switch (word) {
                case "null": return null;
                case "true": return Boolean.TRUE;
                case "false": return Boolean.FALSE;
                default: return Long.parseLong(word);
            }
        }

        String string() {
            StringBuilder out = new StringBuilder();
            for (pos++; text.charAt(pos) != '"'; pos++) {
                char c = text.charAt(pos);
                if (c == '\\') {
                    char e = text.charAt(++pos);
                    switch (e) {
                        case 'n': out.append('\n'); break;
                        case 't': out.append('\t'); break;
                        case 'r': out.append('\r'); break;
                        case 'b': out.append('\b'); break;
                        case 'f': out.append('\f'); break;
                        case 'u': out.append((char) Integer.parseInt(text.substring(pos + 1, pos + 5), 16)); pos += 4; break;
                        default: out.append(e);
                    }
                } else {
                    out.append(c);
                }
            }
            pos++;
            return out.toString();
        }

        void skip() {
            while (pos < text.length() && Character.isWhitespace(text.charAt(pos))) {
                pos++;
            }
        }
    }

    /** A JSON object built in insertion order; values are null, numbers, booleans, strings,
     *  lists, Json. */
    static final class Json {
        final Map<String, Object> fields = new LinkedHashMap<>();

        Json put(String key, Object value) {
            fields.put(key, value);
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
