"""Bus tests: one contract suite over every bus kind, plus server and NATS specifics."""
