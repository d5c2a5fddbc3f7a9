"""The platform canvas: devices and links of the platform, edited on the Platform tab."""
from .page import PlatformPage
from .scene import PlatformScene, default_link, effective_graph

__all__ = ["PlatformPage", "PlatformScene", "default_link", "effective_graph"]
