"""UDP ingest: datagrams appended to topics as records, through Produce's append path."""
