"""The de-duplication window: a key claimed once, its waiters, forgetting and eviction."""

from __future__ import annotations

import asyncio

from a2a_bus.transport.dedup import DedupWindow


async def test_dedup_window_claims_once_and_forgets_the_oldest() -> None:
    window = DedupWindow(2)
    assert window.claim(("s", "1")) is None
    original = window.claim(("s", "1"))
    assert original is not None and not original.done()
    window.done(("s", "1"))
    assert original.done()
    assert window.claim(("s", "2")) is None
    assert window.claim(("s", "3")) is None  # evicts ("s", "1")
    assert ("s", "1") not in window
    assert window.claim(("s", "1")) is None
    assert len(window) == 2


async def test_evicting_a_running_claim_releases_its_waiters() -> None:
    window = DedupWindow(1)
    window.claim("a")
    waiter = window.claim("a")
    assert waiter is not None
    window.claim("b")
    await asyncio.wait_for(waiter, 1)


async def test_forget_lets_the_next_copy_through() -> None:
    window = DedupWindow(10)
    window.claim("a")
    window.forget("a")
    assert window.claim("a") is None


async def test_a_key_claimed_again_after_forget_keeps_a_whole_window() -> None:
    window = DedupWindow(2)
    window.claim("a")
    window.forget("a")
    window.claim("b")
    assert window.claim("a") is None  # handled again: its first place is spent
    window.claim("c")  # the oldest live key, "b", leaves; "a" stays
    assert "b" not in window
    assert window.claim("a") is not None
    window.claim("d")
    assert "a" not in window and len(window) == 2


def test_the_window_holds_at_most_its_capacity() -> None:
    window = DedupWindow(100)
    for n in range(1000):
        window.claim(("s", str(n)))
        window.done(("s", str(n)))
        if n % 7 == 0:
            window.forget(("s", str(n)))
    assert len(window) <= 100
    assert ("s", "999") in window and ("s", "899") not in window
