//! How many workers may be down at once, and which go together: the
//! operator's `--max-unavailable` (a count or a percentage of the workers)
//! and each node's optional zone. Pure; the executor and the dry run use it.

use std::fmt;
use std::str::FromStr;

/// `--max-unavailable`: `N` workers, or `P%` of the workers (rounded down,
/// at least one), as k0sctl and kubespray express it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(usize),
    Percent(u8),
}

impl Default for MaxUnavailable {
    fn default() -> Self {
        MaxUnavailable::Count(1)
    }
}

impl MaxUnavailable {
    /// The batch size for `workers` workers: at least one.
    pub fn of(self, workers: usize) -> usize {
        match self {
            MaxUnavailable::Count(n) => n.max(1),
            MaxUnavailable::Percent(p) => (workers * usize::from(p) / 100).max(1),
        }
    }
}

impl FromStr for MaxUnavailable {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("`{s}` is not a number of workers (e.g. 2) or a percentage (e.g. 10%)");
        if let Some(p) = s.strip_suffix('%') {
            let p: u8 = p.parse().map_err(|_| bad())?;
            if !(1..=100).contains(&p) {
                return Err(format!("`{s}`: a percentage from 1% to 100%"));
            }
            return Ok(MaxUnavailable::Percent(p));
        }
        let n: usize = s.parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(format!(
                "`{s}`: at least one worker must be allowed down, or nothing can reboot"
            ));
        }
        Ok(MaxUnavailable::Count(n))
    }
}

impl fmt::Display for MaxUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxUnavailable::Count(n) => write!(f, "{n}"),
            MaxUnavailable::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Splits `nodes` (in the order they roll, each with its zone) into batches
/// of at most `size`, each within one zone. Order is kept as far as the
/// zones allow: a batch starts with the first node not yet placed and takes
/// the next ones of the same zone; nodes without a zone form a zone of
/// their own.
pub fn batches<'a>(nodes: &[(&'a str, Option<&'a str>)], size: usize) -> Vec<Vec<&'a str>> {
    let size = size.max(1);
    let mut left: Vec<(&str, Option<&str>)> = nodes.to_vec();
    let mut out = Vec::new();
    while let Some(&(_, zone)) = left.first() {
        let mut batch = Vec::new();
        left.retain(|&(name, z)| {
            if batch.len() < size && z == zone {
                batch.push(name);
                false
            } else {
                true
            }
        });
        out.push(batch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percentages() {
        assert_eq!("2".parse(), Ok(MaxUnavailable::Count(2)));
        assert_eq!("10%".parse(), Ok(MaxUnavailable::Percent(10)));
        assert_eq!(MaxUnavailable::Count(2).of(300), 2);
        assert_eq!(MaxUnavailable::Percent(10).of(300), 30);
        assert_eq!(MaxUnavailable::Percent(10).of(6), 1, "at least one");
        assert_eq!(MaxUnavailable::default().of(50), 1);
        for bad in ["0", "0%", "101%", "-1", "two", "", "%"] {
            assert!(bad.parse::<MaxUnavailable>().is_err(), "{bad}");
        }
        assert_eq!(MaxUnavailable::Percent(20).to_string(), "20%");
    }

    #[test]
    fn batches_keep_order_and_never_mix_zones() {
        let nodes = [
            ("w-1", Some("a")),
            ("w-2", Some("b")),
            ("w-3", Some("a")),
            ("w-4", Some("a")),
            ("w-5", Some("b")),
            ("w-6", None),
        ];
        assert_eq!(
            batches(&nodes, 2),
            vec![
                vec!["w-1", "w-3"],
                vec!["w-2", "w-5"],
                vec!["w-4"],
                vec!["w-6"]
            ]
        );
        assert_eq!(
            batches(&nodes, 1),
            nodes.iter().map(|(n, _)| vec![*n]).collect::<Vec<_>>()
        );
        let unzoned = [("w-1", None), ("w-2", None), ("w-3", None)];
        assert_eq!(batches(&unzoned, 2), vec![vec!["w-1", "w-2"], vec!["w-3"]]);
        assert!(batches(&[], 3).is_empty());
    }
}
