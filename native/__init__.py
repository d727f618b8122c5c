"""What the optional C helpers of ``protocol/`` and ``engine/`` share, in neither layer: the C
headers both include (``body_scanner.h``, ``big_endian.h``) and ``c_helpers``, the switch
(``COMMITGATE_NO_C``) that says which helpers are in use."""
