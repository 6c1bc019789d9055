"""The spin before each call's start event (harness/timing.py, Spin): sized from the entry's
recent host time so that a slow Python wrapper never leaves the GPU idle inside the timed
window, at the rate read off the calls' own spins."""

from __future__ import annotations

from grader.harness.timing import MAX_SPIN_US, SPIN_CYCLES, SPIN_HOST_WINDOW, Spin


def test_the_shortest_spin_until_a_rate_is_known() -> None:
    spin = Spin()
    assert spin.cycles() == SPIN_CYCLES
    spin.recent.append(5000.0)  # a slow call, but no spin measured yet: no rate
    assert spin.cycles() == SPIN_CYCLES


def test_the_spin_covers_twice_the_slowest_recent_host_time() -> None:
    spin = Spin()
    spin.saw(host_us=100.0, cycles=SPIN_CYCLES, spin_us=500.0)  # 2000 cycles per µs
    assert spin.cycles() == SPIN_CYCLES  # 100 µs of host time: the shortest spin covers it
    spin.saw(host_us=630.0, cycles=SPIN_CYCLES, spin_us=500.0)
    assert spin.cycles() == int(2 * 630.0 * 2000.0)
    for _ in range(SPIN_HOST_WINDOW):  # the slow call leaves the window
        spin.saw(host_us=50.0, cycles=SPIN_CYCLES, spin_us=500.0)
    assert spin.cycles() == SPIN_CYCLES


def test_the_fastest_rate_seen_and_a_bound_on_the_spin() -> None:
    spin = Spin()
    spin.saw(host_us=10.0, cycles=SPIN_CYCLES, spin_us=2900.0)  # idle clocks: 345 per µs
    spin.saw(host_us=10.0, cycles=SPIN_CYCLES, spin_us=505.0)  # boosted: 1980 per µs
    assert spin.cycles_per_us == SPIN_CYCLES / 505.0
    spin.saw(host_us=1e9, cycles=SPIN_CYCLES, spin_us=2900.0)  # a call that hangs the host
    assert spin.cycles() == int(MAX_SPIN_US * SPIN_CYCLES / 505.0)
    spin.saw(host_us=10.0, cycles=SPIN_CYCLES, spin_us=0.0)  # no reading: the rate stays
    assert spin.cycles_per_us == SPIN_CYCLES / 505.0
