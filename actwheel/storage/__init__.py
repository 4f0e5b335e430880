"""actwheel.storage."""
