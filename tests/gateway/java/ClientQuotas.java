import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaAlteration.Op;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * Client quotas through the Java Admin client: one "name=value" line per call (the exception's
 * class name and message when it fails). Argument: bootstrap.
 */
public class ClientQuotas {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0],
                                           AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 60000);
        try (Admin admin = Admin.create(props)) {
            ClientQuotaEntity client = entity("client-id", "java-quota");
            ClientQuotaEntity userClient = new ClientQuotaEntity(
                mapOf("user", "ANONYMOUS", "client-id", "java-quota"));
            ClientQuotaEntity defaultUser = entity("user", null);
            print("alter", admin.alterClientQuotas(List.of(
                alteration(client, new Op("producer_byte_rate", 1048576.0),
                           new Op("consumer_byte_rate", 2097152.0)),
                alteration(userClient, new Op("request_percentage", 150.5)),
                alteration(defaultUser, new Op("producer_byte_rate", 4194304.0)))).all());
            print("alterBadKey", admin.alterClientQuotas(List.of(
                alteration(entity("client-id", "java-bad"), new Op("bogus", 1.0)))).all());
            print("alterFraction", admin.alterClientQuotas(List.of(
                alteration(client, new Op("producer_byte_rate", 10.5)))).all());
            print("alterValidateOnly", admin.alterClientQuotas(List.of(
                alteration(client, new Op("request_percentage", 10.0))),
                new AlterClientQuotasOptions().validateOnly(true)).all());
            print("describeClient", describe(admin, ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity("client-id", "java-quota")))));
            print("describeClientAny", describe(admin, ClientQuotaFilter.contains(List.of(
                ClientQuotaFilterComponent.ofEntity("client-id", "java-quota")))));
            print("describeDefaultUser", describe(admin, ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofDefaultEntity("user")))));
            print("describeAnyUser", describe(admin, ClientQuotaFilter.contains(List.of(
                ClientQuotaFilterComponent.ofEntityType("user")))));
            print("remove", admin.alterClientQuotas(List.of(
                alteration(client, new Op("consumer_byte_rate", null)))).all());
            print("describeAll", describe(admin, ClientQuotaFilter.all()));
        }
    }

    static Map<String, String> mapOf(String k1, String v1, String k2, String v2) {
        Map<String, String> out = new TreeMap<>();
        out.put(k1, v1);
        out.put(k2, v2);
        return out;
    }

    static ClientQuotaEntity entity(String type, String name) {
        Map<String, String> parts = new TreeMap<>();
        parts.put(type, name);
        return new ClientQuotaEntity(parts);
    }

    static ClientQuotaAlteration alteration(ClientQuotaEntity entity, Op... ops) {
        return new ClientQuotaAlteration(entity, List.of(ops));
    }

    /** Entities sorted by their text, each as {type=name,...}:{key=value,...}. */
    static KafkaFuture<String> describe(Admin admin, ClientQuotaFilter filter) {
        return admin.describeClientQuotas(filter).entities().thenApply(found -> {
            List<String> out = new ArrayList<>();
            found.forEach((entity, quotas) -> out.add(
                new TreeMap<>(entity.entries()) + ":" + new TreeMap<>(quotas)));
            out.sort(null);
            return String.join(";", out);
        });
    }

    static void print(String name, KafkaFuture<?> future) throws InterruptedException {
        String result;
        try {
            Object value = future.get();
            result = String.valueOf(value);
        } catch (ExecutionException e) {
            result = e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
        }
        System.out.println(name + "=" + result);
    }
}
