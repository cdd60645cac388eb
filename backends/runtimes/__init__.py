"""Stack runtimes: what runs in the child (imports torch and the stack's libraries)."""
