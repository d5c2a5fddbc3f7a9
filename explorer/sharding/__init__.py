"""Embedding sharding plans ranked side by side: the Sharding dock and Run ▸ Rank Shardings."""
from .install import ShardingController, install_sharding
from .view import ShardingView

__all__ = ["ShardingController", "ShardingView", "install_sharding"]
