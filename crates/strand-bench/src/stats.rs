//! Latency samples and their percentiles; the server process's CPU time
//! and resident memory from `/proc`.

use std::time::Duration;

/// Latency samples in microseconds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Latencies(Vec<u64>);

impl Latencies {
    pub(crate) fn push(&mut self, d: Duration) {
        self.0
            .push(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    pub(crate) fn push_micros(&mut self, us: u64) {
        self.0.push(us);
    }

    pub(crate) fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The `p`-th percentile (0–100) in milliseconds, 0 when empty.
    pub(crate) fn percentile_ms(&mut self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let rank = ((p / 100.0) * (self.0.len() as f64 - 1.0)).round();
        let index = (rank.max(0.0) as usize).min(self.0.len() - 1);
        self.0[index] as f64 / 1000.0
    }
}

/// CPU time (user + system) of a process in seconds, from
/// `/proc/PID/stat`; `None` when it cannot be read.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of the full line, utime 14 and stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // Linux reports `stat` times in USER_HZ, which is 100 on every
    // mainstream architecture.
    100.0
}

/// Resident memory of a process in bytes, from `/proc/PID/status`.
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_ranks() {
        let mut l = Latencies::default();
        for us in 1..=100 {
            l.push_micros(us * 1000);
        }
        assert!(
            (l.percentile_ms(50.0) - 51.0).abs() < 1e-9
                || (l.percentile_ms(50.0) - 50.0).abs() < 1e-9
        );
        assert!((l.percentile_ms(99.0) - 99.0).abs() < 1e-9);
        assert!((l.percentile_ms(100.0) - 100.0).abs() < 1e-9);
        assert_eq!(Latencies::default().percentile_ms(99.0), 0.0);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(cpu_seconds(me).is_some());
        assert!(rss_bytes(me).is_some_and(|b| b > 0));
    }
}
