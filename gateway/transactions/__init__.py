"""The transaction coordinator (KIP-98): transactional ids, their log (``__transaction_state``)
and the markers that end a transaction in its partitions."""
