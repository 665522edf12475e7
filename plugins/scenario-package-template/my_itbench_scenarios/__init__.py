"""A community scenario package: data only, registered through one hook."""
