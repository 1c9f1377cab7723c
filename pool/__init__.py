"""The warm pool: serving missions, per-user instances, retirement, the domain guard and
replenishment."""
