// The JavaScript SDK against both contract versions, under Node with a fake
// host: hookbox:hooks@0.2.0's directives and event context, and a 0.1.0
// build's fallback (no context; a 0.2.0 directive is refused by name).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CONTINUE,
  Hook,
  V0_2_0_DIRECTIVES,
  askApproval,
  exportHook,
  postMessage,
  skipModelCall,
  skipTool,
  witVersion,
} from './hookbox.js';

/** A host that keeps log lines; exportHook's console redirection is undone after `fn`. */
function withHost(fn) {
  const logs = [];
  const host = { log: (level, message) => logs.push([level, message]) };
  const saved = { ...globalThis.console };
  try {
    return fn(host, logs);
  } finally {
    Object.assign(globalThis.console, saved);
  }
}

const beforeToolCall = (name) => ({
  tag: 'before-tool-call',
  val: { iteration: 1, call: { id: 'call_1', name, arguments: '{}' } },
});
const context = (fields) => ({ runId: 'run-1', sessionId: 'run-1', turn: 1, iteration: 1, maxIterations: 10, retries: 0, ...fields });

class Recorder extends Hook {
  static instances = [];
  constructor() {
    super();
    this.seen = [];
    Recorder.instances.push(this);
  }
  onEvent(event, ctx) {
    this.seen.push(['onEvent', event.tag, ctx]);
    return super.onEvent(event, ctx);
  }
  beforeToolCall(event) {
    this.seen.push(['beforeToolCall', event.call.name, this.context]);
    return skipTool(`turn ${this.context ? this.context.turn : 'none'}`);
  }
}

test('the 0.2.0 directives', () => {
  assert.deepEqual(askApproval('shell needs a human'), { tag: 'ask-approval', val: 'shell needs a human' });
  assert.deepEqual(skipModelCall('cached'), { tag: 'skip-model-call', val: 'cached' });
  assert.deepEqual(postMessage('reviewer', 'done'), { tag: 'post-message', val: { to: 'reviewer', text: 'done' } });
  assert.deepEqual(V0_2_0_DIRECTIVES, ['ask-approval', 'skip-model-call', 'post-message']);
});

test('a 0.2.0 host passes the context to onEvent and the methods', () => {
  withHost((host) => {
    const onEvent = exportHook(Recorder, host);
    const first = context({ turn: 3 });
    const second = context({ turn: 3, iteration: 2, retries: 1 });
    assert.deepEqual(onEvent(beforeToolCall('shell'), first), skipTool('turn 3'));
    assert.equal(onEvent({ tag: 'iteration-start', val: { iteration: 2, loopCounter: 1 } }, second), CONTINUE);
    assert.equal(witVersion(), '0.2.0');
    assert.deepEqual(Recorder.instances.at(-1).seen, [
      ['onEvent', 'before-tool-call', first],
      ['beforeToolCall', 'shell', first],
      ['onEvent', 'iteration-start', second],
    ]);
  });
});

test('a 0.1.0 host calls with the event alone: the context is null', () => {
  withHost((host) => {
    const onEvent = exportHook(Recorder, host);
    assert.deepEqual(onEvent(beforeToolCall('shell')), skipTool('turn none'));
    assert.equal(witVersion(), '0.1.0');
    assert.deepEqual(Recorder.instances.at(-1).seen.map((s) => s[2]), [null, null]);
  });
});

test('a 0.2.0 directive in a 0.1.0 build throws, naming the version; in 0.2.0 it passes', () => {
  class Asker extends Hook {
    beforeToolCall() {
      return askApproval('why');
    }
  }
  withHost((host, logs) => {
    const onEvent = exportHook(Asker, host);
    assert.throws(() => onEvent(beforeToolCall('x')), /ask-approval needs hookbox:hooks@0\.2\.0; this hook is built against 0\.1\.0/);
    assert.equal(logs[0][0], 'error');
    assert.deepEqual(onEvent(beforeToolCall('x'), context()), askApproval('why'));
  });
});

test('an onEvent override taking the event alone still works and reads this.context', () => {
  class OldStyle extends Hook {
    onEvent() {
      return skipTool(`turn ${this.context ? this.context.turn : 'none'}`);
    }
  }
  withHost((host) => {
    const onEvent = exportHook(OldStyle, host);
    assert.deepEqual(onEvent(beforeToolCall('x'), context({ turn: 7 })), skipTool('turn 7'));
    assert.deepEqual(onEvent(beforeToolCall('x')), skipTool('turn none'));
  });
});

test('returning nothing is logged and thrown', () => {
  class Silent extends Hook {
    beforeToolCall() {}
  }
  withHost((host, logs) => {
    assert.throws(() => exportHook(Silent, host)(beforeToolCall('x'), context()), /Silent.onEvent returned undefined/);
    assert.equal(logs.length, 1);
    assert.match(logs[0][1], /^TypeError: Silent.onEvent returned undefined, not a directive/);
  });
});
