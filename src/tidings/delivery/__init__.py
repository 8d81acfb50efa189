"""Delivery: carrying out the outbox into the timeline and aggregate stores."""
