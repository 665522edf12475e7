"""A small in-memory itbench domain: registers with a wrong value to be found and fixed."""
