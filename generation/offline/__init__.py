"""The offline provider: a built-in catalog of real missions and a procedural saboteur."""
