"""noise: the element ids drawn from the OS in batches stay fresh per thread and
per forked process, and are what secrets.randbits(128) would give."""

import os
import threading

import pytest

from beam_dpsu.core import hashing


def test_random_ids_are_128_bit_ints_from_one_os_read_per_batch(monkeypatch):
    reads = []
    real_urandom = os.urandom

    def counting_urandom(n):
        reads.append(n)
        return real_urandom(n)

    monkeypatch.setattr(hashing, "_random_ids", hashing._RandomIds())
    monkeypatch.setattr(os, "urandom", counting_urandom)
    ids = [hashing.random_id128() for _ in range(2 * hashing.RANDOM_ID_BATCH + 1)]
    assert reads == [16 * hashing.RANDOM_ID_BATCH] * 3
    assert all(isinstance(i, int) and 0 <= i < 1 << 128 for i in ids)
    # Distinct: a collision among 8,193 uniform 128-bit ids has probability < 1e-30.
    assert len(set(ids)) == len(ids)
    # Not stuck in a half of the range (fails by chance with probability 2^-8192).
    assert any(i >> 127 for i in ids) and any(not i >> 127 for i in ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_hand_out_its_parents_ids():
    hashing.random_id128()  # the parent now holds a batch
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        try:
            os.write(write_end, hashing.random_id128().to_bytes(16, "big"))
        finally:
            os._exit(0)
    os.close(write_end)
    child_id = int.from_bytes(os.read(read_end, 16), "big")
    os.close(read_end)
    os.waitpid(pid, 0)
    # Equal only if the child popped the parent's pool (or with probability 2^-128).
    assert child_id != hashing.random_id128()


def test_threads_draw_from_pools_of_their_own():
    got = {}

    def draw(name):
        got[name] = [hashing.random_id128() for _ in range(100)]

    threads = [threading.Thread(target=draw, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for n in range(4) for i in got[n]]
    assert len(set(ids)) == len(ids) == 400
