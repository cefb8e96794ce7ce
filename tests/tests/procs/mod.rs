//! Child processes of the test, as the process table shows them.

#![allow(dead_code, reason = "each test file uses its own part")]

/// The pids of this process's children whose command line contains `needle` (Linux's /proc).
#[cfg(target_os = "linux")]
pub(crate) fn children(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            // State, then parent pid, after the command in parentheses.
            let (state, parent) = (fields.first()?, fields.get(1)?.parse::<u32>().ok()?);
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            (parent == me && *state != "Z" && String::from_utf8_lossy(&cmdline).contains(needle))
                .then_some(pid)
        })
        .collect()
}
