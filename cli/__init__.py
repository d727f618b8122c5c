"""The ``commitgate`` command-line application: the top of the house. It drives gateway/,
bench/, compat_tests/ and pipeline/; nothing imports it."""
