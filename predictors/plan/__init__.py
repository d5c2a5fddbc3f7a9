"""Planning questions over many predictions: ranking sharding plans, sweeps of one
setting, and the largest batch that fits."""
