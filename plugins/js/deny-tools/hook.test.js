// The hook itself (hook.js) under Node with a fake host, as a 0.2.0 host
// calls it (event and context) and as a 0.1.0 host does (the event alone):
// the same directives. `node --test` in this folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONTINUE, exportHook, skipTool, witVersion } from '../../../guest-sdk/js/hookbox.js';
import { DenyTools } from './hook.js';

const CONFIG = { paths: '[".env", "*.pem"]', tools: 'shell', surprise: '1' };
const call = (name, args, id = 'call_1') => ({ tag: 'before-tool-call', val: { iteration: 1, call: { id, name, arguments: args } } });
const context = { runId: 'run-1', sessionId: 'run-1', turn: 2, iteration: 1, maxIterations: 10, retries: 0 };

/** Four events through a fresh export; their directives and the host's log. */
function run(withContext) {
  const logs = [];
  const host = {
    log: (level, message) => logs.push([level, message]),
    getConfig: (key) => CONFIG[key],
    configKeys: () => Object.keys(CONFIG).sort(),
  };
  const saved = { ...globalThis.console };
  try {
    const onEvent = exportHook(DenyTools, host);
    const extra = withContext ? [context] : [];
    const got = [
      onEvent({ tag: 'iteration-start', val: { iteration: 1, loopCounter: 1 } }, ...extra),
      onEvent(call('delete_file', '{"path": ".env"}'), ...extra),
      onEvent(call('create_file', '{"path": "test.txt"}', 'call_2'), ...extra),
      onEvent(call('shell', 'not json', 'call_3'), ...extra),
    ];
    return { got, logs, version: witVersion() };
  } finally {
    Object.assign(globalThis.console, saved);
  }
}

for (const [version, withContext] of [['0.2.0', true], ['0.1.0', false]]) {
  test(`declines the same calls as a ${version} host calls it`, () => {
    const { got, logs, version: seen } = run(withContext);
    assert.equal(seen, version);
    assert.deepEqual(got, [
      CONTINUE,
      skipTool('deny-tools: `delete_file` on `.env` is denied (pattern `.env`)'),
      CONTINUE,
      skipTool('deny-tools: tool `shell` is denied'),
    ]);
    assert.deepEqual(logs[0], ['warn', 'deny-tools: unknown config key `surprise` ignored']);
    assert.match(logs[1][1], /^deny-tools: arguments of `shell` \(call call_3\) are not valid JSON/);
    assert.equal(logs.length, 2);
  });
}
