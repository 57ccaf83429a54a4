//! Where the CPU went: the workers, PostgreSQL, the load generator, the machine.

use std::collections::HashMap;

/// `utime + stime` of process `pid` (`self` for this one), in clock ticks.
pub(crate) fn proc_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the
    // last ')', with field 3 (proc(5)'s numbering): utime is 14, stime 15.
    let rest: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(14) + field(15)
}

/// Where the CPU went, at one moment: the workers', PostgreSQL's processes'
/// (by pid), this process's, and the machine's busy and total ticks.
pub(crate) struct CpuSnapshot {
    pub(crate) workers: u64,
    pub(crate) postgres: HashMap<String, u64>,
    pub(crate) bench: u64,
    pub(crate) machine: (u64, u64),
}

impl CpuSnapshot {
    pub(crate) fn take(pids: &[u32]) -> CpuSnapshot {
        let mut postgres = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().to_string();
            if pid.bytes().all(|b| b.is_ascii_digit())
                && std::fs::read_to_string(entry.path().join("comm")).is_ok_and(|c| c.trim() == "postgres")
            {
                let ticks = proc_ticks(&pid);
                postgres.insert(pid, ticks);
            }
        }
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let cpu: Vec<u64> =
            stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal: idle, iowait and steal are not busy.
        let total: u64 = cpu.iter().take(8).sum();
        let idle: u64 = [3, 4, 7].iter().filter_map(|&i| cpu.get(i)).sum();
        CpuSnapshot {
            workers: pids.iter().map(|p| proc_ticks(&p.to_string())).sum(),
            postgres,
            bench: proc_ticks("self"),
            machine: (total.saturating_sub(idle), total),
        }
    }

    /// CPU ms (at 100 ticks/s) of the workers, PostgreSQL and this process
    /// since `before`, and the machine's busy share (0 to 1).
    pub(crate) fn since(&self, before: &CpuSnapshot) -> (f64, f64, f64, f64) {
        let pg: u64 =
            self.postgres.iter().map(|(pid, t)| t.saturating_sub(*before.postgres.get(pid).unwrap_or(&0))).sum();
        let busy = self.machine.0.saturating_sub(before.machine.0) as f64;
        let total = self.machine.1.saturating_sub(before.machine.1).max(1) as f64;
        (
            self.workers.saturating_sub(before.workers) as f64 * 10.0,
            pg as f64 * 10.0,
            self.bench.saturating_sub(before.bench) as f64 * 10.0,
            busy / total,
        )
    }
}
