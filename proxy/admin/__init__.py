"""min.insync.racks through Kafka's own config APIs (issue 16).

The relay hands DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and
CreateTopics requests to :mod:`.interceptor`; the pure rules (validation,
operations, precedence, what DescribeConfigs shows) are in :mod:`.rules` and
:mod:`.plan`; values live in a compacted topic in the cluster (:mod:`.store`),
shared by every rackguard in front of it, and reach the Produce rule as a new
frozen ``RackRule`` (:func:`.rules.effective_rule`).
"""
