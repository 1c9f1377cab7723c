"""What every package shares: the named-query loader and the domain map."""
