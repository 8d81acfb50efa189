"""The canonical store: SQL tables every feed can be rebuilt from."""
