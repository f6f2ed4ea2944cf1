//! What the table was measured on and when: the CPU model, the cores, the memory, the kernel
//! and the UTC date, read from `/proc` and the system clock.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The machine a run measured on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// `model name` of `/proc/cpuinfo`.
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    /// `MemTotal` of `/proc/meminfo` in GiB.
    pub memory_gib: f64,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
}

impl Machine {
    /// Reads the description of this machine; unknown parts read "unknown" or 0.
    pub fn describe() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let cpu = field(&read("/proc/cpuinfo"), "model name").unwrap_or_else(|| "unknown".into());
        let memory_gib = field(&read("/proc/meminfo"), "MemTotal")
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / (1024.0 * 1024.0));
        let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib,
            kernel: if kernel.is_empty() { "unknown".into() } else { kernel },
        }
    }

    /// "Intel(R) Xeon(R) …, 2 cores, 23.4 GiB".
    pub fn line(&self) -> String {
        format!("{}, {} cores, {:.1} GiB", self.cpu, self.cores, self.memory_gib)
    }
}

/// Today's UTC date as `YYYY-MM-DD`.
pub fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn civil_dates_of_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        // 2000-02-29 (a leap day of a century divisible by 400) and 2026-11-24.
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_781), (2026, 11, 24));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
