from conftest import EngineFactory


def test_publish_reaches_follower(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    feeds.follow("timeline:alice", "user:bob")
    added = feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "photo:1"})
    assert [a.id for a in feeds.read("timeline:alice").results] == [added.id]
