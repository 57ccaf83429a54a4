// Write Hookbox hooks in JavaScript: componentize-js 0.23.0 (StarlingMonkey)
// or componentize-qjs 0.4.5 (QuickJS); the same source builds with both.
//
// A hook is a subclass of `Hook` whose methods, one per event, all default
// to `CONTINUE`; `exportHook` turns it into the `onEvent` export:
//
//   import * as host from 'hookbox:hooks/host@0.2.0';
//   import { CONTINUE, Hook, args, exportHook, log, skipTool } from './hookbox.js';
//
//   class NoRm extends Hook {
//     beforeToolCall(event) {
//       if (event.call.name === 'delete_file') {
//         log.info(`declining delete of ${args(event.call).path}`);
//         return skipTool('Deleting files is disabled here.');
//       }
//       return CONTINUE;
//     }
//   }
//
//   export const onEvent = exportHook(NoRm, host);
//
// Build (QuickJS, recommended: smaller, faster to load and to call):
//   componentize-qjs --wit path/to/hookbox/wit --js app.js --sync --stub-wasi -o no_rm.wasm
// or (StarlingMonkey):
//   componentize-js app.js --wit path/to/hookbox/wit -n hook \
//     -d stdio random clocks http fetch-event -o no_rm.wasm
//
// Why the host module is passed in: componentize-js resolves the WIT import
// `hookbox:hooks/host@0.2.0` only in the entry file, and only with its exact
// version, so this module cannot import it itself. Why `-d stdio random clocks http fetch-event`: the
// result then imports nothing but the hook world (Hookbox refuses
// `wasi:http` and loads `wasi:filesystem` only with a grant); QuickJS's
// `--sync --stub-wasi` likewise (no component-model async, no WASI).
// `console.*` goes to the host log through this module instead. Under
// StarlingMonkey `Date.now()` and `Math.random()` run but are frozen at build
// time; under QuickJS with stubbed WASI, calls that need WASI trap.
//
// Events are the WIT variant as componentize-js maps it: `{tag, val}` with
// camelCase record fields (`event.call.name`, `event.iteration`, and 0.2.0's
// `costEstimated`, `arguments`, `resultData` at tool-call-result, `toolCalls`,
// `reasoning` at final-answer); `u64` fields are BigInt, an absent `option`
// is undefined. Each method receives `val`. One instance of the hook class
// serves every event of a component instance (until a failure: the host then
// starts a fresh instance). A thrown exception is logged at error level with
// its stack and traps the component, like a Rust panic.
//
// The contract is hookbox:hooks@0.2.0: `onEvent(event, context)` also gets
// where the event happens, `{runId, sessionId, turn, iteration,
// maxIterations, retries}` (Numbers); `Hook.onEvent` receives it as its
// second argument and the per-event methods read it as `this.context`. The
// same hook also builds against the frozen 0.1.0 WIT
// (`--wit wit/frozen/hookbox-hooks@0.1.0`, with an entry file that imports
// `hookbox:hooks/host@0.1.0`): the host then passes no context, so `context`
// and `this.context` are null, and returning a 0.2.0 directive (askApproval,
// skipModelCall, postMessage) throws a TypeError naming the version.

let host = null;

function needHost() {
  if (host === null) throw new Error('hookbox.js: no host (call exportHook(HookClass, host) first)');
  return host;
}

// ------------------------------------------------------------ directives

/** `continue`: nothing changes. Honoured everywhere. */
export const CONTINUE = Object.freeze({ tag: 'continue' });

/** `skip-tool`: do not run the tool; answer its slot with `message` (undefined: the host's default). */
export const skipTool = (message) => ({ tag: 'skip-tool', val: message });
/** `replace-arguments`: run the tool with these arguments (an object, sent as JSON, or JSON text). */
export const replaceArguments = (args) => ({
  tag: 'replace-arguments',
  val: typeof args === 'string' ? args : JSON.stringify(args),
});
/** `replace-result`: the model gets `text` as the tool's result. */
export const replaceResult = (text) => ({ tag: 'replace-result', val: text });
/** `replace-content`: one text block instead of the response's content. */
export const replaceContent = (text) => ({ tag: 'replace-content', val: [{ tag: 'text', val: text }] });
/** `replace-user-content`: start the run with one text block instead. */
export const replaceUserContent = (text) => ({ tag: 'replace-user-content', val: [{ tag: 'text', val: text }] });
/**
 * `inject-message`: queue `text` as a user message for the next turn boundary.
 * Valid at every event; at `final-answer` and `run-end` no boundary follows, so
 * the run reports it undelivered. Blank text is a hook failure (`invalid-output`).
 */
export const inject = (text) => ({ tag: 'inject-message', val: text });
/** `retry`: drop the response and ask again with `feedback`. */
export const retry = (feedback) => ({ tag: 'retry', val: feedback });
/** `reject`: end the run with `reason`. */
export const reject = (reason) => ({ tag: 'reject', val: reason });
/** `skip-run`: end the run before any model call. */
export const skipRun = (reason) => ({ tag: 'skip-run', val: reason });
/** `pause`: block at the next safe point until the run is resumed. */
export const pause = () => ({ tag: 'pause' });
/** `abort`: end the run with an aborted error carrying `reason`. */
export const abort = (reason) => ({ tag: 'abort', val: reason });
/**
 * `ask-approval` (0.2.0): park the tool call until the host approves, denies
 * or rewrites it; `reason` is shown to whoever answers. Honoured at before-tool-call.
 */
export const askApproval = (reason) => ({ tag: 'ask-approval', val: reason });
/**
 * `skip-model-call` (0.2.0): end the turn without calling the model (stop
 * reason `skipped`); `reason` is recorded. Honoured at iteration-start.
 */
export const skipModelCall = (reason) => ({ tag: 'skip-model-call', val: reason });
/**
 * `post-message` (0.2.0): send `text` to the session `to` through the host's
 * message bus, if its routing policy allows. Valid at every event.
 */
export const postMessage = (to, text) => ({ tag: 'post-message', val: { to, text } });

/** The directives hookbox:hooks@0.2.0 added: a 0.1.0 build cannot return them. */
export const V0_2_0_DIRECTIVES = Object.freeze(['ask-approval', 'skip-model-call', 'post-message']);

// ------------------------------------------------------------ arguments and config

/** Parses a tool call's argument text; empty or blank text is `{}`. Throws SyntaxError for invalid JSON. */
export function parseArgs(text) {
  const t = text.trim();
  return JSON.parse(t === '' ? '{}' : t);
}

/** The arguments of `call` (a tool call record) as a value, normally an object. */
export const args = (call) => parseArgs(call.arguments);

/**
 * A config value as a list of strings, as the Rust SDK reads it: a JSON array
 * of strings, else the one string itself, or [] for an empty or blank value.
 * An array holding anything but strings throws; text that starts with `[`
 * but is not a JSON array (a glob such as `[ab]*.txt`) is one string.
 */
export function parseStringList(raw) {
  const trimmed = raw.trim();
  if (trimmed === '') return [];
  if (trimmed.startsWith('[')) {
    let value;
    try {
      value = JSON.parse(trimmed);
    } catch {
      value = undefined;
    }
    if (Array.isArray(value)) {
      if (!value.every((v) => typeof v === 'string')) throw new Error(`expected an array of strings, found ${trimmed}`);
      return value;
    }
  }
  return [raw];
}

/** The plugin's configuration: strings as they are, other values as JSON text. */
export const config = {
  /** The raw value of `key`, or undefined when unset. */
  get: (key) => needHost().getConfig(key),
  /** Every key, sorted. */
  keys: () => needHost().configKeys(),
  /** The value of `key` parsed as JSON, or `fallback` when unset. */
  json: (key, fallback) => {
    const raw = needHost().getConfig(key);
    return raw === undefined ? fallback : JSON.parse(raw);
  },
  /** The value of `key` as a list of strings; [] when unset. */
  stringList: (key) => {
    const raw = needHost().getConfig(key);
    return raw === undefined ? [] : parseStringList(raw);
  },
};

// ------------------------------------------------------------ state

/**
 * This plugin's saved state for the current session (the host's get-state /
 * set-state): opaque bytes, kept only when the call that wrote them succeeds.
 */
export const state = {
  /** `{version, data}` (data a Uint8Array) as the last successful call left it, or undefined. */
  get: () => needHost().getState(),
  /** Replaces the state with `data` (a Uint8Array). */
  set: (data) => needHost().setState(data),
  /** The state parsed as JSON, or `fallback` before the first save. */
  getJson: (fallback) => {
    const saved = needHost().getState();
    return saved === undefined ? fallback : JSON.parse(new TextDecoder().decode(saved.data));
  },
  /** Saves `value` as JSON. */
  setJson: (value) => needHost().setState(new TextEncoder().encode(JSON.stringify(value))),
};

// ------------------------------------------------------------ journaled

/**
 * Time, random numbers, UUIDs and waiting that replay the same: the host
 * writes every value to the run's journal and `hookbox replay` gives the hook
 * the same ones (seed 003's journaled random "has methods such as random,
 * uniform, choice and shuffle"). `Math.random()` and `Date.now()` are frozen
 * at build time or trap in a hook: use these.
 */
export const journaled = {
  /** Where draws come from (a function returning a BigInt); null: the host's `random`. */
  draw: null,
  next() {
    return BigInt(this.draw ? this.draw() : needHost().random());
  },
  /** Milliseconds since the Unix epoch (a Number). */
  nowMs() {
    const t = needHost().now();
    return Number(BigInt(t.seconds) * 1000n + BigInt(t.nanoseconds) / 1000000n);
  },
  /** A random BigInt in [0, 2^64). */
  randomU64() {
    return this.next();
  },
  /** A random integer in [0, n) without modulo bias (0 when n <= 0). */
  randbelow(n) {
    if (n <= 0) return 0;
    const big = BigInt(n);
    const zone = (1n << 64n) - ((1n << 64n) % big);
    for (;;) {
      const r = this.next();
      if (r < zone) return Number(r % big);
    }
  },
  /** A random float in [0, 1) with 53 random bits. */
  random() {
    return Number(this.next() >> 11n) / 2 ** 53;
  },
  /** A random float between a and b. */
  uniform(a, b) {
    return a + (b - a) * this.random();
  },
  /** A random element of the non-empty array `items` (throws on an empty one). */
  choice(items) {
    if (items.length === 0) throw new RangeError('cannot choose from an empty array');
    return items[this.randbelow(items.length)];
  },
  /** Shuffles `items` in place (Fisher-Yates); returns it. */
  shuffle(items) {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.randbelow(i + 1);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  },
  /** A random version 4 UUID, hyphenated. */
  uuid4: () => needHost().uuid(),
  /** Waits `ms` milliseconds; the wait counts toward the call's deadline. */
  sleep: (ms) => needHost().sleep(BigInt(ms)),
};

// ------------------------------------------------------------ log

const text = (parts) => parts.map((p) => (typeof p === 'string' ? p : String(p))).join(' ');

/** The host's log, tagged with the plugin's name (`hook_logs` in the run record). */
export const log = {
  trace: (...m) => needHost().log('trace', text(m)),
  debug: (...m) => needHost().log('debug', text(m)),
  info: (...m) => needHost().log('info', text(m)),
  warn: (...m) => needHost().log('warn', text(m)),
  error: (...m) => needHost().log('error', text(m)),
};

// ------------------------------------------------------------ events and the hook

/** The kebab-case event names, in the order of the WIT variant. */
export const EVENT_NAMES = [
  'run-start',
  'iteration-start',
  'request-start',
  'model-response',
  'tool-call-start',
  'before-tool-call',
  'tool-call-result',
  'iteration-complete',
  'final-answer',
  'run-end',
];

const METHODS = Object.fromEntries(
  EVENT_NAMES.map((n) => [n, n.replace(/-([a-z])/g, (_, c) => c.toUpperCase())]),
);

/** The iteration an event belongs to, or undefined for run-start, final-answer, run-end. */
export const eventIteration = (event) => event.val.iteration;

/**
 * A Hookbox hook: one method per event (camelCase: `runStart`, `beforeToolCall`, ...),
 * each returning CONTINUE and reading where the event happens in `this.context`.
 * Override `onEvent(event, context)` to see every `{tag, val}` in one place.
 */
export class Hook {
  /**
   * The current event's context (`{runId, sessionId, turn, iteration, maxIterations,
   * retries}`), set before every call; null in a 0.1.0 build, whose host sends none.
   */
  context = null;
  /** Receives every event and its context (null in a 0.1.0 build); the default calls the method for its kind. */
  onEvent(event, context) {
    return this[METHODS[event.tag]](event.val);
  }
  runStart() { return CONTINUE; }
  iterationStart() { return CONTINUE; }
  requestStart() { return CONTINUE; }
  modelResponse() { return CONTINUE; }
  toolCallStart() { return CONTINUE; }
  beforeToolCall() { return CONTINUE; }
  toolCallResult() { return CONTINUE; }
  iterationComplete() { return CONTINUE; }
  finalAnswer() { return CONTINUE; }
  runEnd() { return CONTINUE; }
}

/**
 * The contract version the component was built against, as its calls show:
 * '0.2.0' once an event came with a context, '0.1.0' once one came without,
 * undefined before the first event.
 */
export const witVersion = () => calledWith;
let calledWith;

/**
 * The `onEvent` export for `HookClass`, served by one lazily created instance.
 * `hostModule` is the entry file's `import * as host from 'hookbox:hooks/host@0.2.0'`
 * (`@0.1.0` in a 0.1.0 build). The export takes the event and, from a 0.2.0
 * host, its context: it sets `hook.context` (null without one) and calls
 * `hook.onEvent(event, context)`. Also sends `console.log/info/debug/warn/error` to the host log.
 */
export function exportHook(HookClass, hostModule) {
  // `import * as host` gives the interface's functions (componentize-js) or a
  // namespace whose default export holds them (componentize-qjs).
  host = typeof hostModule.log === 'function' ? hostModule : hostModule.default;
  if (typeof globalThis.console !== 'object' || globalThis.console === null) globalThis.console = {};
  for (const [method, level] of [['log', 'info'], ['info', 'info'], ['debug', 'debug'], ['warn', 'warn'], ['error', 'error']]) {
    globalThis.console[method] = (...m) => host.log(level, text(m));
  }
  let hook = null;
  return function onEvent(event, context) {
    try {
      const ctx = context === undefined ? null : context;
      calledWith = ctx === null ? '0.1.0' : '0.2.0';
      if (hook === null) hook = new HookClass();
      hook.context = ctx;
      const directive = hook.onEvent(event, ctx);
      if (directive === undefined || directive === null) {
        throw new TypeError(`${HookClass.name}.onEvent returned ${directive}, not a directive`);
      }
      if (ctx === null && V0_2_0_DIRECTIVES.includes(directive.tag)) {
        throw new TypeError(`${directive.tag} needs hookbox:hooks@0.2.0; this hook is built against 0.1.0`);
      }
      return directive;
    } catch (e) {
      host.log('error', `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e} | ${e && e.stack ? e.stack : ''}`);
      throw e;
    }
  };
}
