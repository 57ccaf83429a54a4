// Seed 003's journaled random "has methods such as random, uniform, choice
// and shuffle": the JavaScript SDK's helpers over a scripted stream of draws.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { journaled } from './hookbox.js';

const scripted = (values) => {
  const it = values[Symbol.iterator]();
  journaled.draw = () => it.next().value;
};

test('randbelow redraws the biased sliver', () => {
  scripted([(1n << 64n) - 1n, 7n]);
  assert.equal(journaled.randbelow(10), 7);
  assert.equal(journaled.randbelow(0), 0);
});

test('random and uniform', () => {
  scripted([0n, (1n << 64n) - 1n, 1n << 63n]);
  assert.equal(journaled.random(), 0);
  const high = journaled.random();
  assert.ok(high > 0.999999 && high < 1);
  assert.equal(journaled.uniform(10, 20), 15);
});

test('choice and shuffle', () => {
  scripted([4n]);
  assert.equal(journaled.choice(['a', 'b', 'c']), 'b');
  assert.throws(() => journaled.choice([]), RangeError);
  let seq = 0n;
  journaled.draw = () => {
    seq = (seq * 6364136223846793005n + 1442695040888963407n) % (1n << 64n);
    return seq;
  };
  const items = Array.from({ length: 50 }, (_, i) => i);
  journaled.shuffle(items);
  assert.deepEqual([...items].sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i));
  assert.notDeepEqual(items, Array.from({ length: 50 }, (_, i) => i));
  journaled.draw = null;
});

test('host calls outside a component throw', () => {
  assert.throws(() => journaled.nowMs(), /no host/);
});
