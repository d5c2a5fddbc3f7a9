"""The prediction pipeline and its simulator: a captured graph per rank, costed, walked
by CPU threads and streams that meet in collectives, into a Timeline."""
