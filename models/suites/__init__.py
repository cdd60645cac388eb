"""One module a suite: names, default batch sizes, spec tables, skip rules (no torch)."""
