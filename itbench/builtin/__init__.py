"""Core parts of itbench, registered as plugins like any other."""
