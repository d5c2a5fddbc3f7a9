"""Device specifications, platform presets, kernel cost models and CPU overheads."""
