//! [`HookPre`] and [`HookInstance`]: a component's `bindgen!` types of the
//! version it declares, one arm per frozen version, so that loading and
//! calling never match on versions outside this file. A call lowers the
//! host's event (and, from 0.2.0, its context) with that version's
//! conversions (`crate::convert`) and lifts the directive back.

use hookbox_contract::{Directive, Event, EventContext};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::{WitVersion, v0_1_0, v0_2_0};
use crate::convert;
use crate::ctx::HookCtx;

/// A component's imports resolved once and its `on-event` export
/// type-checked, with the bindings of its version.
#[derive(Clone)]
pub(crate) enum HookPre {
    /// A `hookbox:hooks@0.1.0` component.
    V0_1_0(v0_1_0::HookPre<HookCtx>),
    /// A `hookbox:hooks@0.2.0` component.
    V0_2_0(v0_2_0::HookPre<HookCtx>),
}

/// One instance of a component, with the bindings of its version.
pub(crate) enum HookInstance {
    /// A `hookbox:hooks@0.1.0` instance.
    V0_1_0(v0_1_0::Hook),
    /// A `hookbox:hooks@0.2.0` instance.
    V0_2_0(v0_2_0::Hook),
}

impl HookPre {
    /// Type-checks `pre`'s `on-event` export against `version`'s types.
    ///
    /// Errors: the export is missing or has another type (the caller reports
    /// it as a wrong world).
    pub(crate) fn new(version: WitVersion, pre: InstancePre<HookCtx>) -> wasmtime::Result<HookPre> {
        Ok(match version {
            WitVersion::V0_1_0 => HookPre::V0_1_0(v0_1_0::HookPre::new(pre)?),
            WitVersion::V0_2_0 => HookPre::V0_2_0(v0_2_0::HookPre::new(pre)?),
        })
    }

    /// A new instance in `store` (runs the component's start functions).
    pub(crate) async fn instantiate_async(&self, store: &mut Store<HookCtx>) -> wasmtime::Result<HookInstance> {
        Ok(match self {
            HookPre::V0_1_0(pre) => HookInstance::V0_1_0(pre.instantiate_async(store).await?),
            HookPre::V0_2_0(pre) => HookInstance::V0_2_0(pre.instantiate_async(store).await?),
        })
    }
}

impl HookInstance {
    /// Calls `on-event` with `event` (and `context`, for a version that takes
    /// it), lowered without copying its text, and lifts the directive.
    ///
    /// Errors: whatever the call raised (a trap, fuel, the epoch deadline).
    pub(crate) async fn call_on_event(
        &self,
        store: &mut Store<HookCtx>,
        event: &Event,
        context: &EventContext,
    ) -> wasmtime::Result<Directive> {
        match self {
            HookInstance::V0_1_0(hook) => {
                let lists = convert::v0_1_0::WitLists::new(event);
                let d = hook.call_on_event(store, lists.event(event)).await?;
                Ok(convert::v0_1_0::directive_from_wit(d))
            }
            HookInstance::V0_2_0(hook) => {
                let lists = convert::v0_2_0::WitLists::new(event);
                let d = hook.call_on_event(store, lists.event(event), convert::v0_2_0::context(context)).await?;
                Ok(convert::v0_2_0::directive_from_wit(d))
            }
        }
    }
}
