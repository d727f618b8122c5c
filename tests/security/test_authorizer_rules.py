"""Kafka's authorization rules on the broker's own objects (no process): deny beats allow,
implied operations, literal / wildcard / prefixed patterns, principal and host wildcards, super
users, allow.everyone.if.no.acl.found; the filters of DescribeAcls and DeleteAcls; Kafka's
refusals of bad bindings; the principal mapping rules of client certificates."""
from __future__ import annotations

import pytest

from commitgate.gateway.security.acl_store import (
    ALL,
    ALLOW,
    ANY,
    CLUSTER,
    DENY,
    GROUP,
    LITERAL,
    MATCH,
    PREFIXED,
    TOPIC,
    AclBinding,
    AclFilter,
    AclStore,
    creation_error,
)
from commitgate.gateway.security.authorizer import (
    ALTER,
    ALTER_CONFIGS,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    READ,
    WRITE,
    Authorizer,
)
from commitgate.gateway.security.principal_rules import map_name, parse_rules

ALICE = "User:alice"


def _authorizer(tmp_path, *bindings: AclBinding, allow_if_none: bool = False) -> Authorizer:
    store = AclStore(tmp_path)
    if bindings:
        store.add(list(bindings))
    return Authorizer(store, True, ("User:root",), allow_if_none)


def _acl(name: str, operation: int, permission: int = ALLOW, pattern: int = LITERAL,
         principal: str = ALICE, host: str = "*", kind: int = TOPIC) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, operation, permission)


def test_deny_beats_allow_and_all_covers_every_operation(tmp_path):
    auth = _authorizer(tmp_path, _acl("orders", ALL), _acl("orders", WRITE, DENY))
    assert auth.allowed(ALICE, "10.0.0.1", READ, TOPIC, "orders")
    assert not auth.allowed(ALICE, "10.0.0.1", WRITE, TOPIC, "orders")
    assert auth.allowed(ALICE, "10.0.0.1", DESCRIBE, TOPIC, "orders")  # a deny implies nothing


def test_operations_imply_describe_and_alter_configs_implies_describe_configs(tmp_path):
    auth = _authorizer(tmp_path, _acl("a", READ), _acl("b", ALTER_CONFIGS), _acl("c", ALTER))
    assert auth.allowed(ALICE, "h", DESCRIBE, TOPIC, "a")
    assert not auth.allowed(ALICE, "h", WRITE, TOPIC, "a")
    assert auth.allowed(ALICE, "h", DESCRIBE_CONFIGS, TOPIC, "b")
    assert not auth.allowed(ALICE, "h", DESCRIBE, TOPIC, "b")
    assert auth.allowed(ALICE, "h", DESCRIBE, TOPIC, "c")


def test_literal_wildcard_and_prefixed_patterns(tmp_path):
    auth = _authorizer(tmp_path, _acl("logs-", READ, pattern=PREFIXED),
                       _acl("*", DESCRIBE), _acl("exact", WRITE))
    assert auth.allowed(ALICE, "h", READ, TOPIC, "logs-2026")
    assert not auth.allowed(ALICE, "h", READ, TOPIC, "log")
    assert auth.allowed(ALICE, "h", DESCRIBE, TOPIC, "anything")
    assert not auth.allowed(ALICE, "h", WRITE, TOPIC, "exact-not")
    assert not auth.allowed(ALICE, "h", READ, GROUP, "logs-2026")  # another resource type


def test_principal_and_host_wildcards_and_super_users(tmp_path):
    auth = _authorizer(tmp_path, _acl("t", READ, principal="User:*", host="10.0.0.7"))
    assert auth.allowed("User:bob", "10.0.0.7", READ, TOPIC, "t")
    assert not auth.allowed("User:bob", "10.0.0.8", READ, TOPIC, "t")
    assert auth.allowed("User:root", "anywhere", ALTER, CLUSTER, "kafka-cluster")


def test_a_resource_no_acl_covers_follows_allow_everyone_if_no_acl_found(tmp_path):
    assert not _authorizer(tmp_path).allowed(ALICE, "h", READ, TOPIC, "t")
    assert _authorizer(tmp_path / "open", allow_if_none=True).allowed(ALICE, "h", READ, TOPIC,
                                                                      "t")
    # an ACL for somebody else covers it: no longer "no ACL found"
    covered = _authorizer(tmp_path / "other", _acl("t", READ, principal="User:bob"),
                          allow_if_none=True)
    assert not covered.allowed(ALICE, "h", READ, TOPIC, "t")


def test_authorized_operations_are_the_principals_own(tmp_path):
    auth = _authorizer(tmp_path, _acl("t", READ))
    supported = sum(1 << op for op in (READ, WRITE, DESCRIBE))
    assert auth.operations(ALICE, "h", TOPIC, "t", supported) == (1 << READ) | (1 << DESCRIBE)


def test_filters_match_as_kafkas_and_deletions_persist(tmp_path):
    store = AclStore(tmp_path)
    bindings = [_acl("logs-", READ, pattern=PREFIXED), _acl("*", DESCRIBE),
                _acl("logs-a", WRITE), _acl("g", READ, kind=GROUP)]
    store.add(bindings)
    match = AclFilter(TOPIC, "logs-a", MATCH, None, None, ANY, ANY)
    assert set(store.describe(match)) == set(bindings[:3])
    literal = AclFilter(ANY, "logs-", LITERAL, None, None, ANY, ANY)
    assert store.describe(literal) == []
    [removed] = store.delete([AclFilter(ANY, None, ANY, ALICE, None, READ, ALLOW)])
    assert set(removed) == {bindings[0], bindings[3]}
    assert set(AclStore(tmp_path).bindings) == {bindings[1], bindings[2]}


@pytest.mark.parametrize("binding,refusal", [
    (AclBinding(TOPIC, "t", MATCH, ALICE, "*", READ, ALLOW), "Invalid patternType"),
    (AclBinding(TOPIC, "", LITERAL, ALICE, "*", READ, ALLOW), "should not be empty"),
    (AclBinding(TOPIC, "t", LITERAL, "alice", "*", READ, ALLOW), "Could not parse principal"),
    (AclBinding(TOPIC, "t", LITERAL, ALICE, "*", ANY, ALLOW), "Invalid operation"),
    (AclBinding(TOPIC, "t", LITERAL, ALICE, "*", READ, ANY), "Invalid permissionType"),
    (AclBinding(CLUSTER, "c", LITERAL, ALICE, "*", ALTER, ALLOW), "kafka-cluster"),
])
def test_bad_bindings_are_refused_with_kafkas_words(binding, refusal):
    assert refusal in creation_error(binding)


def test_principal_mapping_rules():
    rules = parse_rules(r"RULE:^CN=([^,]+),OU=apps,.*$/$1/L, RULE:^CN=(.*?),.*$/svc-$1/,DEFAULT")
    assert map_name(rules, "CN=Alice,OU=apps,O=Example") == "alice"
    assert map_name(rules, "CN=orders,OU=batch,O=Example") == "svc-orders"
    assert map_name(rules, "O=Example") == "O=Example"  # DEFAULT
    with pytest.raises(PermissionError):
        map_name(parse_rules("RULE:^CN=x$/x/"), "CN=y")
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        parse_rules("RULE:unterminated")
