"""Client quotas (KIP-13, KIP-124, KIP-219): AlterClientQuotas / DescribeClientQuotas's table
(``store``), per-client rates and throttling (``manager``, ``rate``)."""
