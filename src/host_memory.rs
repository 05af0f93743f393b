//! How much host memory this process can still take — the least of what the kernel reports
//! available (`MemAvailable`), what the process's control group allows, and its address-space
//! limit — so large inputs are refused with the numbers before they are decoded or allocated,
//! instead of the process being killed by the kernel without a word.

use std::path::Path;

use crate::error::{Error, Result};

/// Bytes this process can still allocate, when the system says (Linux: /proc and cgroup v2).
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(|text| kib_field(text, "MemAvailable:"));
    let cgroup = cgroup_room();
    let address_space = address_space_room();
    [available, cgroup, address_space].into_iter().flatten().min()
}

/// Refuses `needed` bytes of host memory for `what` when less is available, naming both and `fix`.
pub fn check(what: &str, needed: u64, fix: &str) -> Result<()> {
    match available_bytes() {
        // A quarter more than counted: allocators and fragmentation take their share.
        Some(available) if needed.saturating_add(needed / 4) > available => Err(Error::InvalidInput(format!(
            "{what} needs about {} of host memory and {} is available: {fix}",
            gib(needed),
            gib(available)
        ))),
        _ => Ok(()),
    }
}

/// Bytes as GiB with one decimal, e.g. "7.5 GiB".
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1 << 30))
}

fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    let kib: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// cgroup v2: `memory.max − memory.current` of this process's group, when it has a limit.
fn cgroup_room() -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let group = membership.lines().find_map(|line| line.strip_prefix("0::"))?;
    let folder = Path::new("/sys/fs/cgroup").join(group.trim_start_matches('/'));
    let read = |name: &str| std::fs::read_to_string(folder.join(name)).ok();
    let limit: u64 = read("memory.max")?.trim().parse().ok()?; // "max" (no limit) does not parse
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(limit.saturating_sub(current))
}

/// `ulimit -v`: the address-space limit less the address space in use.
fn address_space_room() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max address space"))?;
    let soft: u64 = line.split_whitespace().nth(3)?.parse().ok()?; // "unlimited" does not parse
    Some(soft.saturating_sub(status_bytes("VmSize:")?))
}

/// A `kB` field of `/proc/self/status` (e.g. `VmRSS:`), in bytes.
pub fn status_bytes(name: &str) -> Option<u64> {
    kib_field(&std::fs::read_to_string("/proc/self/status").ok()?, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_and_too_much_is_refused_with_the_numbers() {
        let available = available_bytes().expect("Linux reports available memory");
        assert!(available > 16 << 20, "{available}");
        let refused = check("a test allocation", u64::MAX / 2, "ask for less").expect_err("refused").to_string();
        assert!(refused.contains("a test allocation needs about") && refused.contains("ask for less"), "{refused}");
        check("a small allocation", 1 << 20, "none needed").expect("1 MiB is available");
        assert_eq!(kib_field("MemAvailable:   2048 kB\n", "MemAvailable:"), Some(2 << 20));
    }
}
