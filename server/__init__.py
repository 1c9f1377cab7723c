"""The HTTP API, authentication, settings, the command line, the database pool and migrations."""
