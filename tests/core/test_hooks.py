"""Hooks: the declared way a lower layer tells a higher one something."""

from __future__ import annotations

from tidings.core.hooks import Hook


def test_a_hook_with_no_listener_does_nothing() -> None:
    hook: Hook[[int]] = Hook("numbers")
    hook(1)  # no listener: nothing happens, nothing fails
    assert "0 listener" in repr(hook)


def test_listeners_run_in_the_order_connected_with_the_callers_arguments() -> None:
    heard: list[tuple[str, int, str]] = []
    hook: Hook[[int, str]] = Hook("pairs")
    hook.connect(lambda n, s: heard.append(("first", n, s)))
    hook.connect(lambda n, s: heard.append(("second", n, s)))
    hook(7, "x")
    assert heard == [("first", 7, "x"), ("second", 7, "x")]
