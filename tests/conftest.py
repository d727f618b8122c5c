"""Suite-wide settings for every broker the tests start."""
from gateway.launcher import BrokerProcess

# Small files: each test broker reserves its first CommitLog segment with fallocate (1 GiB by
# default) and its first IndexFile (about 420 MB), and a suite run starts dozens of brokers whose
# directories stay until pytest prunes them. 64 MiB segments still hold the 5 MiB records the
# tests send.
BrokerProcess.default_overrides = {"commitlog.segment.bytes": str(64 << 20),
                                   "index.hash.slots": "50000", "index.max.entries": "200000"}
