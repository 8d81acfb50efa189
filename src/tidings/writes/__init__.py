"""The writes behind the public verbs: publishing, following, reactions,
users and objects, rules. Each writes the canonical store first, then hands
what must reach feeds to the deliverer (:mod:`tidings.delivery`) and what
must reach live readers to hooks it was given."""
