"""Security: TLS toward clients and brokers, SASL (the proxy's own login and the clients'
passthrough gate), connection limits and rate-limited logging of bad input.

The modules here hold no sockets: they build SSL contexts, keep the current
certificate, and make decisions as pure functions over small values; the relay
and the poller do the I/O.
"""
