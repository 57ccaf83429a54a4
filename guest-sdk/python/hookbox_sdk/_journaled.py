"""``hookbox_sdk.journaled``: time, random numbers, UUIDs and waiting that
replay the same (re-exported by the package; see its docs)."""

import hookbox_sdk as _sdk  # the package binds the host; read at call time


class journaled:
    """Time, random numbers, UUIDs and waiting that replay the same: the host
    writes every value to the run's journal and ``hookbox replay`` gives the
    hook the same ones (seed 003's ``agents.now()``, ``agents.random`` with
    "methods such as random, uniform, choice and shuffle", ``agents.uuid4()``).
    Python's own ``random`` module is seeded at build time and ``time.time()``
    traps in a hook: use these."""

    #: Where draws come from: the host's ``random`` import (replaced in unit tests).
    _draw = None

    @staticmethod
    def _next():
        return journaled._draw() if journaled._draw is not None else _sdk._need_host().random()

    @staticmethod
    def now_ms():
        """Milliseconds since the Unix epoch."""
        t = _sdk._need_host().now()
        return t.seconds * 1000 + t.nanoseconds // 1_000_000

    @staticmethod
    def random_u64():
        """A random integer in ``[0, 2**64)``."""
        return journaled._next()

    @staticmethod
    def randbelow(n):
        """A random integer in ``[0, n)`` without modulo bias (0 when ``n <= 0``)."""
        if n <= 0:
            return 0
        zone = (1 << 64) - (1 << 64) % n
        while True:
            r = journaled._next()
            if r < zone:
                return r % n

    @staticmethod
    def random():
        """A random float in ``[0, 1)`` (53 random bits), like ``random.random()``."""
        return (journaled._next() >> 11) / float(1 << 53)

    @staticmethod
    def uniform(a, b):
        """A random float between ``a`` and ``b``, like ``random.uniform``."""
        return a + (b - a) * journaled.random()

    @staticmethod
    def choice(seq):
        """A random element of the non-empty sequence ``seq``, like
        ``random.choice`` (``IndexError`` when it is empty)."""
        if len(seq) == 0:
            raise IndexError("cannot choose from an empty sequence")
        return seq[journaled.randbelow(len(seq))]

    @staticmethod
    def shuffle(items):
        """Shuffles the list ``items`` in place (Fisher-Yates), like ``random.shuffle``."""
        for i in range(len(items) - 1, 0, -1):
            j = journaled.randbelow(i + 1)
            items[i], items[j] = items[j], items[i]

    @staticmethod
    def uuid4():
        """A random version 4 UUID, hyphenated."""
        return _sdk._need_host().uuid()

    @staticmethod
    def sleep(ms):
        """Waits ``ms`` milliseconds; the wait counts toward the call's deadline."""
        _sdk._need_host().sleep(int(ms))
