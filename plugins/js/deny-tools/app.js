// deny-tools for hookbox:hooks@0.2.0 (js_deny_tools.wasm with componentize-js,
// js_qjs_deny_tools.wasm with componentize-qjs): the entry file, which binds
// the host; the hook is hook.js.
import * as host from 'hookbox:hooks/host@0.2.0';
import { exportHook } from '../../../guest-sdk/js/hookbox.js';
import { DenyTools } from './hook.js';

export const onEvent = exportHook(DenyTools, host);
