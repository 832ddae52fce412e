"""Settings, read once from the environment (prefix ``CONCIERGE_``) and an optional ``.env``."""

from config.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
