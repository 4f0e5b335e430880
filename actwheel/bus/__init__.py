"""actwheel.bus."""
