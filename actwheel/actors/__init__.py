"""actwheel.actors."""
