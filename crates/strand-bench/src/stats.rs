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
    resident(pid).map(|m| m.vm_rss)
}

/// A process's resident memory in bytes, from `/proc/PID/status`: all of
/// it (`VmRSS`) and its anonymous part (`RssAnon`: heap and stacks, not
/// file pages or shared memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Resident {
    pub(crate) rss_anon: u64,
    pub(crate) vm_rss: u64,
}

impl Resident {
    /// Both figures added up over the processes; `None` without
    /// processes or when one cannot be read.
    pub(crate) fn of(pids: &[u32]) -> Option<Resident> {
        if pids.is_empty() {
            return None;
        }
        pids.iter().try_fold(Resident::default(), |sum, pid| {
            let m = resident(*pid)?;
            Some(Resident {
                rss_anon: sum.rss_anon + m.rss_anon,
                vm_rss: sum.vm_rss + m.vm_rss,
            })
        })
    }
}

/// [`Resident`] of one process.
pub(crate) fn resident(pid: u32) -> Option<Resident> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_resident(&status)
}

/// [`Resident`] from the text of a `/proc/PID/status` file, whose lines
/// read `VmRSS:\t    3956 kB`; `None` when either line is missing or
/// malformed.
pub(crate) fn parse_resident(status: &str) -> Option<Resident> {
    Some(Resident {
        rss_anon: status_kib(status, "RssAnon:")? * 1024,
        vm_rss: status_kib(status, "VmRSS:")? * 1024,
    })
}

/// The value of the `/proc/PID/status` line `key` (with its colon), in
/// KiB as the kernel writes it.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    let rest = status.lines().find_map(|l| l.strip_prefix(key))?;
    let mut words = rest.split_whitespace();
    let kib = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(kib),
        _ => None,
    }
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
        let both = Resident::of(&[me, me]).expect("this process's memory");
        assert!(both.rss_anon > 0 && both.vm_rss >= both.rss_anon);
        assert_eq!(Resident::of(&[]), None);
    }

    const STATUS: &str = "Name:\tdurable-streams\nUmask:\t0022\nState:\tS (sleeping)\n\
        VmPeak:\t  826420 kB\nVmSize:\t  826420 kB\nVmHWM:\t    4004 kB\n\
        VmRSS:\t    3956 kB\nRssAnon:\t     324 kB\nRssFile:\t    3632 kB\n\
        RssShmem:\t       0 kB\nThreads:\t5\n";

    #[test]
    fn parses_proc_status() {
        assert_eq!(
            parse_resident(STATUS),
            Some(Resident {
                rss_anon: 324 * 1024,
                vm_rss: 3956 * 1024,
            })
        );
        // RssFile and RssShmem are not RssAnon, nor VmHWM VmRSS.
        let without_anon = STATUS.replace("RssAnon:", "RssX:");
        assert_eq!(parse_resident(&without_anon), None);
        assert_eq!(status_kib(STATUS, "VmHWM:"), Some(4004));
        assert_eq!(status_kib("VmRSS:\t 12 MB\n", "VmRSS:"), None);
        assert_eq!(status_kib("VmRSS:\t x kB\n", "VmRSS:"), None);
        assert_eq!(status_kib("VmRSS:\n", "VmRSS:"), None);
        assert_eq!(parse_resident(""), None);
    }
}
