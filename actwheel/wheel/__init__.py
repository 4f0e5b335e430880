"""actwheel.wheel."""
