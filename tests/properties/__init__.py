"""Property-based tests (Hypothesis) of admission: quota safety, determinism, folding, replay."""
