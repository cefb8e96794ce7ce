//! Era repair: the client quirks a server may overlook when asked to
//! ([`crate::Options::era_repair`], strict by default as the spec says), which ones it saw
//! ([`Repair`], reported to [`crate::Service::repaired`] each time) and the one log line per
//! caller and kind ([`Repairs`]).

use std::collections::HashSet;
use std::sync::Mutex;

/// A client quirk the server overlooked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Repair {
    /// A 2026-07-28 request whose `MCP-Protocol-Version` header names another version this
    /// server knows (the one the client first negotiated): the body's version is served.
    VersionHeader,
}

impl Repair {
    /// Its name in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VersionHeader => "version-header",
        }
    }
}

/// How many (caller, kind) pairs are remembered as logged before the memory starts over: a
/// bound on what callers can make the server keep, at the cost of a repeated line.
const REMEMBERED: usize = 4096;

/// Which callers were told about in the log already, for each kind.
#[derive(Debug, Default)]
pub(crate) struct Repairs {
    logged: Mutex<HashSet<(Repair, [u8; 16])>>,
}

impl Repairs {
    /// `repair` was made for the caller tagged `owner`: whether this is the first time (the
    /// one to log).
    pub(crate) fn first(&self, repair: Repair, owner: [u8; 16]) -> bool {
        let mut logged = self
            .logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if logged.len() >= REMEMBERED {
            logged.clear();
        }
        logged.insert((repair, owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_is_logged_once_per_kind_and_the_memory_stays_bounded() {
        let repairs = Repairs::default();
        assert!(repairs.first(Repair::VersionHeader, [1; 16]));
        assert!(!repairs.first(Repair::VersionHeader, [1; 16]));
        assert!(repairs.first(Repair::VersionHeader, [2; 16]));
        for n in 0..u16::try_from(REMEMBERED * 2).unwrap_or(u16::MAX) {
            let mut owner = [0; 16];
            owner[..2].copy_from_slice(&n.to_le_bytes());
            let _ = repairs.first(Repair::VersionHeader, owner);
        }
        let kept = repairs.logged.lock().map(|l| l.len()).unwrap_or(usize::MAX);
        assert!(kept <= REMEMBERED, "{kept}");
    }
}
