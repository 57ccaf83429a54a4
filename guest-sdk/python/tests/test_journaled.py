"""Seed 003's journaled random "has methods such as random, uniform, choice
and shuffle": the Python SDK's helpers over a scripted stream of draws."""

import unittest

from hookbox_sdk import journaled


class JournaledRandom(unittest.TestCase):
    def draws(self, values):
        it = iter(values)
        journaled._draw = lambda: next(it)

    def tearDown(self):
        journaled._draw = None

    def test_randbelow_redraws_the_biased_sliver(self):
        self.draws([(1 << 64) - 1, 7])
        self.assertEqual(journaled.randbelow(10), 7)
        self.assertEqual(journaled.randbelow(0), 0)

    def test_random_and_uniform(self):
        self.draws([0, (1 << 64) - 1, 1 << 63])
        self.assertEqual(journaled.random(), 0.0)
        self.assertTrue(0.999999 < journaled.random() < 1.0)
        self.assertEqual(journaled.uniform(10, 20), 15.0)

    def test_choice_and_shuffle(self):
        self.draws([4])
        self.assertEqual(journaled.choice(["a", "b", "c"]), "b")
        with self.assertRaises(IndexError):
            journaled.choice([])
        seq = [0]

        def lcg():
            seq[0] = (seq[0] * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            return seq[0]

        journaled._draw = lcg
        items = list(range(50))
        journaled.shuffle(items)
        self.assertEqual(sorted(items), list(range(50)))
        self.assertNotEqual(items, list(range(50)))

    def test_host_calls_outside_a_component_raise(self):
        with self.assertRaises(RuntimeError):
            journaled.now_ms()


if __name__ == "__main__":
    unittest.main()
