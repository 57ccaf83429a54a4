// The Rust deny-tools unit tests, for the JavaScript policy: `node --test` in this folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_PATH_KEYS, Policy, normalize } from './policy.js';

const policy = (pairs) => new Policy((key) => pairs[key]);

test('denies listed tools whatever the arguments', () => {
  const p = policy({ tools: '["delete_file", "shell"]' });
  assert.equal(p.check('shell', undefined), 'deny-tools: tool `shell` is denied');
  assert.ok(p.check('delete_file', {}));
  assert.equal(p.check('read_file', { path: '.env' }), undefined);
});

test('a single string is a list of one', () => {
  const p = policy({ tools: 'shell', paths: '.env' });
  assert.ok(p.check('shell', undefined));
  assert.ok(p.check('read_file', { path: '.env' }));
});

test('pattern without slash matches any component', () => {
  const p = policy({ paths: '[".env", "*.pem"]' });
  assert.equal(p.check('delete_file', { path: '.env' }), 'deny-tools: `delete_file` on `.env` is denied (pattern `.env`)');
  for (const path of ['./.env', 'app/.env', '/abs/dir/.env', '.env/inner', 'keys/a.pem']) assert.ok(p.check('read_file', { path }), path);
  for (const path of ['.envrc', 'env', 'a.pem.txt', '']) assert.equal(p.check('read_file', { path }), undefined, path);
});

test('pattern with slash matches the whole relative path', () => {
  const p = policy({ paths: '["config/*.toml", "./secrets/**", "deploy/keys"]' });
  for (const path of ['config/a.toml', './config/a.toml', 'config/./a.toml', 'x/../config/a.toml', 'secrets/a/b/c', 'deploy/keys', 'deploy/keys/id_rsa']) {
    assert.ok(p.check('read_file', { path }), path);
  }
  for (const path of ['config/sub/a.toml', 'app/config/a.toml', 'a.toml', 'deploy/keys2']) assert.equal(p.check('read_file', { path }), undefined, path);
});

test('dot dot does not escape a rule', () => {
  const p = policy({ paths: 'secrets/*' });
  assert.ok(p.check('read_file', { path: 'a/../secrets/key' }));
  assert.equal(p.check('read_file', { path: '../secrets/key' }), undefined);
});

test('path keys default and custom', () => {
  let p = policy({ paths: '.env' });
  for (const key of DEFAULT_PATH_KEYS) assert.ok(p.check('t', { [key]: '.env' }), key);
  assert.equal(p.check('t', { target: '.env' }), undefined);
  p = policy({ paths: '.env', path_keys: '["target"]' });
  assert.ok(p.check('t', { target: '.env' }));
  assert.equal(p.check('t', { path: '.env' }), undefined);
});

test('array arguments and non-string values', () => {
  const p = policy({ paths: '.env', path_keys: 'paths' });
  assert.ok(p.check('t', { paths: ['a.txt', 'b/.env'] }));
  assert.equal(p.check('t', { paths: 3 }), undefined);
  assert.equal(p.check('t', ['.env']), undefined);
  assert.equal(p.check('t', undefined), undefined);
});

test('custom message prefix', () => {
  const p = policy({ paths: '.env', message: 'policy' });
  assert.equal(p.check('read_file', { file: './.env' }), 'policy: `read_file` on `./.env` is denied (pattern `.env`)');
});

test('invalid config is an error', () => {
  assert.throws(() => policy({ paths: '["a["]' }), /invalid glob `a\[`/);
  assert.throws(() => policy({ tools: '[1, 2]' }), /config `tools`/);
  assert.throws(() => policy({ paths: 'a**' }), /single path component/);
});

test('globs beyond the Rust tests', () => {
  const p = policy({ paths: '["[ab]?.key", "**/cache/*", "x/[!0-9]*"]' });
  assert.ok(p.check('t', { path: 'deep/a1.key' }));
  assert.equal(p.check('t', { path: 'c1.key' }), undefined);
  assert.ok(p.check('t', { path: 'cache/x' }));
  assert.ok(p.check('t', { path: 'a/b/cache/x' }));
  assert.ok(p.check('t', { path: 'x/abc' }));
  assert.equal(p.check('t', { path: 'x/1bc' }), undefined);
});

test('normalize paths', () => {
  assert.deepEqual(normalize('./a//b/./c/'), ['a', 'b', 'c']);
  assert.deepEqual(normalize('a/../../b'), ['..', 'b']);
  assert.deepEqual(normalize('/'), []);
});
