"""The live loss watch (docs/losswatch.md): which acknowledged records Kafka lost, with
their offsets, within seconds of the election that lost them."""
