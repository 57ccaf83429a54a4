// spin (test fixture): loops forever at before-tool-call, continues at every
// other event. The JavaScript twin of the Rust adversary's `spin` mode, to
// prove a runaway JS hook is stopped by fuel or the deadline like a Rust one.

import * as host from 'hookbox:hooks/host@0.2.0';
import { Hook, exportHook } from '../../../guest-sdk/js/hookbox.js';

class Spin extends Hook {
  beforeToolCall(event) {
    let n = 0;
    for (;;) n += event.iteration; // never returns
  }
}

export const onEvent = exportHook(Spin, host);
