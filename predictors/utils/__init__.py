"""Small helpers every layer uses: atomic file writes, error metrics, cancellation and
progress, byte formatting, and pausing the garbage collector around torch work."""
