//! What callers declare, decoded once: the client capabilities a call passes on to its
//! upstream, kept for the next call that declares the same.
//!
//! A legacy client declares its capabilities once, at `initialize`; a 2026-07-28 client
//! repeats them in the `_meta` of every request. Either way, the gateway sees the same few
//! declarations over and over, and each call needs them twice: as JSON, to check what an
//! upstream asks of the client ([`crate::relay::allowed`]), and decoded, for a 2026-07-28
//! upstream's envelope. Decoding, copying and rendering them again for each call cost more
//! than the rest of the call's set-up together; the last few are kept here, shared.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Deserialize as _;
use serde_json::Value;
use toolwire::ClientCapabilities;
use toolwire_types::Rendered;

use crate::lock;

/// How many different declarations are kept: a gateway's callers are mostly a few kinds of
/// client, each declaring the same on every call.
const KEPT: usize = 8;

/// One declaration, as declared and decoded.
pub(crate) struct Declared {
    /// As the client declared it.
    pub(crate) json: Arc<Value>,
    /// Decoded and rendered once (`None`: not a valid declaration; the call goes on with
    /// the gateway's own).
    pub(crate) capabilities: Option<Rendered<ClientCapabilities>>,
}

/// The last declarations seen, the most recent first.
#[derive(Default)]
pub(crate) struct Declarations(Mutex<VecDeque<Arc<Declared>>>);

impl std::fmt::Debug for Declarations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Declarations")
            .field("kept", &lock(&self.0).len())
            .finish()
    }
}

impl Declarations {
    /// The declaration equal to `json`: the one kept, else decoded now and kept.
    pub(crate) fn get(&self, json: &Value) -> Arc<Declared> {
        let mut kept = lock(&self.0);
        if let Some(found) = kept
            .iter()
            .position(|d| *d.json == *json)
            .and_then(|at| kept.remove(at))
        {
            kept.push_front(found.clone());
            return found;
        }
        let declared = Arc::new(Declared {
            json: Arc::new(json.clone()),
            capabilities: ClientCapabilities::deserialize(json)
                .ok()
                .map(Rendered::new),
        });
        kept.push_front(declared.clone());
        kept.truncate(KEPT);
        declared
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_equal_declaration_gets_the_decoding_already_made() {
        let declarations = Declarations::default();
        let first = declarations.get(&json!({"elicitation": {}, "roots": {}}));
        let again = declarations.get(&json!({"roots": {}, "elicitation": {}}));
        assert!(Arc::ptr_eq(&first, &again));
        let other = declarations.get(&json!({"sampling": {}}));
        assert!(!Arc::ptr_eq(&first, &other));
        let capabilities = first.capabilities.as_ref().expect("a valid declaration");
        assert!(capabilities.elicitation.is_some());
        assert!(capabilities.sampling.is_none());
    }

    #[test]
    fn only_the_last_few_declarations_are_kept() {
        let declarations = Declarations::default();
        let first = declarations.get(&json!({"experimental": {"n": 0}}));
        for n in 1..=KEPT {
            declarations.get(&json!({"experimental": {"n": n}}));
        }
        assert_eq!(lock(&declarations.0).len(), KEPT);
        let again = declarations.get(&json!({"experimental": {"n": 0}}));
        assert!(!Arc::ptr_eq(&first, &again), "the oldest was let go");
        // The most recently used stays: a declaration used again moves to the front.
        let recent = declarations.get(&json!({"experimental": {"n": 2}}));
        for n in 100..100 + KEPT - 1 {
            declarations.get(&json!({"experimental": {"n": n}}));
        }
        assert!(Arc::ptr_eq(
            &recent,
            &declarations.get(&json!({"experimental": {"n": 2}}))
        ));
    }

    #[test]
    fn a_declaration_that_does_not_decode_keeps_its_json() {
        let declarations = Declarations::default();
        let declared = declarations.get(&json!({"elicitation": "yes"}));
        assert!(declared.capabilities.is_none());
        assert_eq!(*declared.json, json!({"elicitation": "yes"}));
    }
}
