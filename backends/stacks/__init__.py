"""Stack declarations: one module per stack, each exposing `STACK` (parent-safe)."""
