"""actwheel.actions."""
