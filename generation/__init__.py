"""The admission-controlled generation queue, the model providers, the mission pipeline and the
spend ledger."""
