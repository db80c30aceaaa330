"""Replica placement against min.insync.racks: audit, planner, KIP-36 assignment (issue 18)."""
