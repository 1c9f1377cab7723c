"""The offline provider: a built-in catalog of real missions and a procedural saboteur."""

from generation.offline.provider import OfflineProvider, ProceduralSaboteur

__all__ = ["OfflineProvider", "ProceduralSaboteur"]
