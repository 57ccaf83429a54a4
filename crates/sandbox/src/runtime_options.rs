//! [`RuntimeOptions`]: `[runtime]` in hookbox.toml, how the engine
//! allocates instances and bounds compilation, and the wasmtime [`Config`]
//! they make (shared by [`crate::HookRuntime`] and the compile worker, whose
//! engine must be configured the same).

use serde::Serialize;
use wasmtime::Config;

use crate::error::LoadError;
use crate::options::WASM_PAGE_BYTES;

/// How the runtime allocates instances (`[runtime]` in hookbox.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeOptions {
    /// Use wasmtime's pooling instance allocator (default `true`): slots for
    /// instances, memories, tables and fiber stacks are reserved once (address
    /// space only) and reused, so creating an instance costs no mmap/munmap
    /// (about 1.3–2× cheaper in our measurements, and no IPI storms under
    /// concurrency). `false` allocates each instance on demand.
    pub pooling: bool,
    /// With pooling: how many instances may be live at once across all runs
    /// (default 1,000; one per (run, plugin) while the run is in flight). Past
    /// it an instantiation fails with an `instantiate` failure, handled by the
    /// plugin's fail policy. Each slot reserves address space (about 4 GiB per
    /// linear memory, not resident) and keeps nothing resident when idle.
    pub max_instances: u32,
    /// The largest linear memory any plugin may have, in bytes (default
    /// 4 GiB, the wasm32 maximum; a plugin's `limits.memory_bytes` above it is
    /// a load error). With pooling each memory slot reserves this much address
    /// space, so a host that keeps tens of thousands of instances lowers it
    /// (e.g. 256 MiB); below 4 GiB wasmtime compiles bounds checks into
    /// memory accesses instead of relying on guard pages.
    pub max_memory_bytes: u64,
    /// Map each instance's initial memory copy-on-write from the compiled
    /// image (default true): instantiation is 2–4× faster, at two more memory
    /// mappings per instance. Turn it off to hold tens of thousands of live
    /// instances under Linux's `vm.max_map_count` (65,530 by default).
    pub copy_on_write: bool,
    /// The largest plugin file (or byte upload) the runtime reads and
    /// compiles, in bytes (default 64 MiB; the largest plugin we ship, Python
    /// with its interpreter, is 18.5 MiB). A bigger file is refused before it
    /// is read, so it bounds what loading allocates and, roughly linearly,
    /// what compiling it costs in time and memory.
    pub max_component_bytes: u64,
    /// The address space a compile worker may use, in bytes (default 4 GiB;
    /// `RLIMIT_AS`): a component that makes the compiler need more fails to
    /// load with a `compile` error. Applies when the runtime compiles in a
    /// worker process ([`HookRuntime::compile_worker`]; the `hookbox` binary
    /// always does).
    pub compile_memory_bytes: u64,
    /// How long a compile worker may take, in ms (default 120,000), wall
    /// clock; its CPU time is capped at the same number of seconds per core.
    /// Past it the worker is killed and the load fails with a `compile`
    /// error. Applies with a worker, as `compile_memory_bytes`.
    pub compile_timeout_ms: u64,
}

/// Default [`RuntimeOptions::max_component_bytes`]: 64 MiB.
pub const DEFAULT_MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// Default [`RuntimeOptions::compile_memory_bytes`]: 4 GiB.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 4 << 30;

/// Default [`RuntimeOptions::compile_timeout_ms`]: 120 s.
pub const DEFAULT_COMPILE_TIMEOUT_MS: u64 = 120_000;

/// The wasm32 address space: 4 GiB.
const WASM32_MAX_MEMORY: u64 = 1 << 32;

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            pooling: true,
            max_instances: 1_000,
            max_memory_bytes: WASM32_MAX_MEMORY,
            copy_on_write: true,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            compile_memory_bytes: DEFAULT_COMPILE_MEMORY_BYTES,
            compile_timeout_ms: DEFAULT_COMPILE_TIMEOUT_MS,
        }
    }
}

impl RuntimeOptions {
    /// The wasmtime configuration for these options.
    pub(crate) fn config(&self) -> Result<Config, LoadError> {
        if self.compile_timeout_ms == 0 || self.compile_memory_bytes == 0 {
            return Err(LoadError::Engine(format!(
                "[runtime] compile_timeout_ms = {} and compile_memory_bytes = {} must both be at least 1 \
                 (a limit of 0 would stop every compile)",
                self.compile_timeout_ms, self.compile_memory_bytes
            )));
        }
        let mut config = Config::new();
        config.consume_fuel(true).epoch_interruption(true).concurrency_support(false);
        if !(WASM_PAGE_BYTES..=WASM32_MAX_MEMORY).contains(&self.max_memory_bytes) {
            return Err(LoadError::Engine(format!(
                "[runtime] max_memory_bytes = {} must be between one 64 KiB page ({WASM_PAGE_BYTES}) and 4 GiB ({WASM32_MAX_MEMORY})",
                self.max_memory_bytes
            )));
        }
        if self.max_memory_bytes < WASM32_MAX_MEMORY {
            config.memory_reservation(self.max_memory_bytes);
        }
        config.memory_init_cow(self.copy_on_write);
        if self.pooling {
            if self.max_instances == 0 {
                return Err(LoadError::Engine("[runtime] max_instances must be at least 1".into()));
            }
            let n = self.max_instances;
            let mut pool = wasmtime::PoolingAllocationConfig::new();
            // Per component: a Rust wasip2 guest has 3 core instances, 1 memory and 2 tables;
            // Python and JavaScript components have more modules (each 1 memory, up to a few tables).
            pool.total_component_instances(n)
                .total_core_instances(n.saturating_mul(8))
                .total_memories(n.saturating_mul(2))
                .total_tables(n.saturating_mul(8))
                // A store keeps the fiber stack of its last async call until it is
                // dropped (wasmtime 48), so every live instance holds one.
                .total_stacks(n)
                .max_tables_per_module(4)
                .max_memories_per_module(2)
                // The same ceiling as the resource limiter's table cap.
                .table_elements(100_000)
                .max_memory_size(usize::try_from(self.max_memory_bytes).unwrap_or(usize::MAX));
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        }
        Ok(config)
    }
}
