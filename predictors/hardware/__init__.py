"""Hardware: datasheet figures of devices (specs), achievable peaks, and platforms (which
devices, how many, and the links between them)."""
