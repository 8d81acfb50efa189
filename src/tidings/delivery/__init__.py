"""Delivery: carrying out the outbox into the timeline and group stores."""
