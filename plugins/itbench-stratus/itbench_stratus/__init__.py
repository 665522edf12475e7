"""A STRATUS-style SRE agent for itbench (see ``itbench_stratus.agent``)."""
