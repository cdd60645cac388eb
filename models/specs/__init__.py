"""Spec dataclasses and constants shared by a suite and its builder (no torch)."""
