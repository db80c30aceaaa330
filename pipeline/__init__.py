"""rackguard's offline reports: PySpark jobs over the decision ledger and snapshots.

Invariant: the proxy never imports this package (nor pyspark); this package
only reads what proxy.ledger.recorder wrote (and topic dumps), never the live cluster,
except :mod:`pipeline.dump_offsets`, which reads one topic with kafka-python.
Importing ``pipeline`` itself needs no pyspark: the Spark modules are imported
by the commands that need them.
"""
