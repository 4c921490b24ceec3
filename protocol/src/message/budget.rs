//! Budgets per agent: CPU, memory and process limits over all of one client's trees together
//! (a cgroup per agent above its processes' cgroups), and what an agent uses against its budget.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One agent's limits. `None`: no limit of that kind.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Thousandths of a CPU core (1500: one and a half cores busy at most).
    pub cpu_millis: Option<u32>,
    /// Bytes of memory (the kernel's `memory.max`: over it, the kernel reclaims and then kills).
    pub memory: Option<u64>,
    /// Processes and threads at once.
    pub pids: Option<u64>,
}

/// The most cores a budget may name: more is a typo, not a budget.
pub const MAX_CORES: u32 = 4096;

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.cpu_millis.is_none() && self.memory.is_none() && self.pids.is_none()
    }

    /// `1.5`, `0.25`, `2` (cores) as thousandths of a core. `0` is refused: a caller that means
    /// "none" says `off`.
    pub fn parse_cpu(text: &str) -> Result<u32, String> {
        let t = text.trim();
        let bad = || format!("cpu {t:?}: expected cores, such as 0.5, 1 or 2.5");
        let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
        if whole.is_empty() && frac.is_empty() || frac.len() > 3 {
            return Err(bad());
        }
        let whole: u32 = match whole {
            "" => 0,
            w => w.parse().map_err(|_| bad())?,
        };
        let frac: u32 = match frac {
            "" => 0,
            f => {
                let n: u32 = f.parse().map_err(|_| bad())?;
                n * 10u32.pow(3 - f.len() as u32)
            }
        };
        if whole > MAX_CORES {
            return Err(format!("cpu {t:?}: more than {MAX_CORES} cores"));
        }
        match whole * 1000 + frac {
            // The kernel's smallest quota is 1 ms per 100 ms period.
            n if n < 10 => Err(format!("cpu {t:?}: at least 0.01 of a core")),
            n => Ok(n),
        }
    }

    /// Each limit the tighter of this budget's and `other`'s.
    pub fn tighter(self, other: Budget) -> Budget {
        fn min<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Budget {
            cpu_millis: min(self.cpu_millis, other.cpu_millis),
            memory: min(self.memory, other.memory),
            pids: min(self.pids, other.pids),
        }
    }
}

/// `1.5` from 1500.
pub fn cores(millis: u32) -> String {
    let text = format!("{}.{:03}", millis / 1000, millis % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `65536`, `64k`, `64KiB`, `1M`, `1G` (binary multiples) as bytes, as settings and cubactl's
/// flags write sizes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 10),
        Some((i, 'm')) => (&t[..i], 20),
        Some((i, 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = (digits.trim().parse())
        .map_err(|_| format!("expected a size such as 65536, 64K or 1M, got {text:?}"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| "size too large".to_string())
}

/// `512 MiB`, `1.5 GiB`, `700 KiB`.
pub fn bytes_text(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= size {
            let tenths = n * 10 / size;
            return match tenths % 10 {
                0 => format!("{} {unit}", tenths / 10),
                d => format!("{}.{d} {unit}", tenths / 10),
            };
        }
    }
    format!("{n} B")
}

impl fmt::Display for Budget {
    /// `cpu 1.5, memory 512 MiB, pids 256`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(c) = self.cpu_millis {
            parts.push(format!("cpu {}", cores(c)));
        }
        if let Some(m) = self.memory {
            parts.push(format!("memory {}", bytes_text(m)));
        }
        if let Some(p) = self.pids {
            parts.push(format!("pids {p}"));
        }
        match parts.is_empty() {
            true => f.write_str("none"),
            false => f.write_str(&parts.join(", ")),
        }
    }
}

/// One agent's use against its budget ([`super::Listing::budgets`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BudgetUse {
    /// The agent: the client name the budget is for.
    pub agent: String,
    pub budget: Budget,
    /// CPU in use lately (the last second or so), thousandths of a core.
    pub cpu_millis: Option<u32>,
    /// Memory its trees use now, bytes.
    pub memory: Option<u64>,
    /// Processes and threads now.
    pub pids: Option<u64>,
    /// Time the CPU budget held its processes back, in all, milliseconds.
    pub throttled_ms: Option<u64>,
    /// The last time it reached a limit.
    pub last_hit: Option<BudgetHit>,
}

/// A budget reached.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BudgetHit {
    /// `cpu`, `memory` or `pids`.
    pub what: String,
    /// What it meant, in a sentence.
    pub detail: String,
    /// Unix time in milliseconds.
    pub at_ms: u64,
}

impl BudgetUse {
    /// `agent-1: cpu 0.4/0.5 (held back 3.2 s), memory 120 MiB/512 MiB, pids 7/256`.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        let b = &self.budget;
        let cpu = self.cpu_millis.map(cores).unwrap_or_else(|| "?".into());
        match b.cpu_millis {
            Some(max) => {
                let mut text = format!("cpu {cpu}/{}", cores(max));
                if let Some(t) = self.throttled_ms.filter(|t| *t > 0) {
                    text.push_str(&format!(" (held back {:.1} s)", t as f64 / 1000.0));
                }
                parts.push(text);
            }
            None => parts.push(format!("cpu {cpu}")),
        }
        let mem = self.memory.map(bytes_text).unwrap_or_else(|| "?".into());
        match (b.memory, self.memory) {
            (Some(max), _) => parts.push(format!("memory {mem}/{}", bytes_text(max))),
            (None, Some(_)) => parts.push(format!("memory {mem}")),
            (None, None) => {}
        }
        let pids = self.pids.map_or_else(|| "?".into(), |p| p.to_string());
        match (b.pids, self.pids) {
            (Some(max), _) => parts.push(format!("pids {pids}/{max}")),
            (None, Some(_)) => parts.push(format!("pids {pids}")),
            (None, None) => {}
        }
        format!("{}: {}", self.agent, parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_parse_and_print() {
        assert_eq!(Budget::parse_cpu("1.5"), Ok(1500));
        assert_eq!(Budget::parse_cpu("0.25"), Ok(250));
        assert_eq!(Budget::parse_cpu(".5"), Ok(500));
        assert_eq!(Budget::parse_cpu("2"), Ok(2000));
        for bad in ["", ".", "x", "-1", "0", "0.001", "1.2345", "99999"] {
            assert!(Budget::parse_cpu(bad).is_err(), "{bad:?}");
        }
        assert_eq!(cores(1500), "1.5");
        assert_eq!(cores(2000), "2");
        assert_eq!(cores(250), "0.25");
    }

    #[test]
    fn the_tighter_budget_wins_each_limit() {
        let a = Budget {
            cpu_millis: Some(2000),
            memory: None,
            pids: Some(100),
        };
        let b = Budget {
            cpu_millis: Some(500),
            memory: Some(1 << 30),
            pids: None,
        };
        let t = a.tighter(b);
        assert_eq!(t.cpu_millis, Some(500));
        assert_eq!(t.memory, Some(1 << 30));
        assert_eq!(t.pids, Some(100));
        assert_eq!(t.to_string(), "cpu 0.5, memory 1 GiB, pids 100");
        assert_eq!(Budget::default().to_string(), "none");
    }
}
