"""The read side: pages of flat and aggregated feeds, and who reads what.

Delivery (:mod:`tidings.delivery`) writes the timeline and aggregate stores;
this package reads them, falls back to the canonical store where they are
incomplete (a capped or idle feed, a pulled source), and notes the reads
that decide how later deliveries treat each feed.
"""
