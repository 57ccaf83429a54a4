// deny-tools for the frozen hookbox:hooks@0.1.0 (js_deny_tools_v0_1_0.wasm,
// built with --wit wit/frozen/hookbox-hooks@0.1.0): app.js but for the host
// import's version, the one name componentize-js binds it under.
import * as host from 'hookbox:hooks/host@0.1.0';
import { exportHook } from '../../../guest-sdk/js/hookbox.js';
import { DenyTools } from './hook.js';

export const onEvent = exportHook(DenyTools, host);
