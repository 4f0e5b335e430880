"""actwheel.api."""
