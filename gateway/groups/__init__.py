"""The group coordinator: classic consumer groups and their committed offsets, kept durable in
the internal ``__consumer_offsets`` topic."""
