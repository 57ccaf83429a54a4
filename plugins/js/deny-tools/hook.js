// deny-tools in JavaScript: the same hook as plugins/deny-tools (Rust). At
// before-tool-call it answers skip-tool for a denied tool name or a path
// argument matching a `paths` glob, with the same reason text; every other
// event continues. Config: tools, paths, path_keys, message (see policy.js
// and plugins/README.md). An invalid config throws at the first
// before-tool-call (a trap failure), as the Rust plugin panics.
//
// The hook imports no WIT interface, so it runs under Node too (hook.test.js)
// and serves both contract versions: app.js exports it for
// hookbox:hooks@0.2.0, app_v0_1_0.js for the frozen 0.1.0 (componentize-js
// binds the host only under its exact versioned name, in the entry file).
// It reads no event context.

import { CONTINUE, Hook, args, config, log, skipTool } from '../../../guest-sdk/js/hookbox.js';
import { CONFIG_KEYS, Policy } from './policy.js';

/** The deny-tools hook: declines at before-tool-call what its policy denies. */
export class DenyTools extends Hook {
  beforeToolCall(event) {
    if (!this.policy) {
      for (const key of config.keys()) {
        if (!CONFIG_KEYS.includes(key)) log.warn(`deny-tools: unknown config key \`${key}\` ignored`);
      }
      this.policy = new Policy(config.get);
    }
    const call = event.call;
    let parsed;
    try {
      parsed = args(call);
    } catch (e) {
      log.warn(`deny-tools: arguments of \`${call.name}\` (call ${call.id}) are not valid JSON, path rules skipped: ${e.message}`);
    }
    const reason = this.policy.check(call.name, parsed);
    return reason === undefined ? CONTINUE : skipTool(reason);
  }
}
