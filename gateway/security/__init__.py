"""Kafka's security model: listeners by security protocol, TLS, SASL and the credentials it
checks against. ``listeners`` parses Kafka's listener settings, ``tls`` builds the listeners' TLS
contexts and names mutual-TLS principals, ``sasl`` runs a connection's authentication,
``scram_store`` keeps the salted SCRAM credentials on disk."""
