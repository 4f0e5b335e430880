"""The built-in executors, one module per action family."""
