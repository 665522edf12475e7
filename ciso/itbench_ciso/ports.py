"""Port offsets inside a CISO trial's block (the domain reserves two ports per trial)."""

#: The cloud family's AWS endpoint (moto server).
PORT_AWS = 0
#: The OPA server, when ``--policy-engine opa`` starts one.
PORT_OPA = 1
