"""The model side: a scenario's blocks compiled to a torch module (workload, embedding
blocks, collectives as ops), the captured op graph of one step, its memory, the sharding
plan of its embedding tables, and its footprint."""
