"""UDP ingest: datagrams appended to topics as records, through the produce path
(``gateway/produce_path.py``)."""
