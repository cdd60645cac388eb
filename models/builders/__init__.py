"""One module a suite: builds its torch modules (child only; imports torch)."""
