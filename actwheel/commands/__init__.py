"""CLI subcommands. Each module exposes ``register(subparsers)`` which adds its parser
and sets ``handler`` (``Callable[[argparse.Namespace], int]``) as a default."""
