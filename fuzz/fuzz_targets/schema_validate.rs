//! Schema validation never panics; a valid plan applied to arbitrary arguments never panics
//! and yields only well-formed headers; invalid ones always name a rule.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolwire_headers::HeaderPlan;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(schema)) = serde_json::from_slice::<Value>(data) else { return };
    match HeaderPlan::from_input_schema("fuzz", &schema) {
        Ok(plan) => {
            // Use the schema's own example-ish members as arguments.
            let args = schema.get("properties").and_then(Value::as_object);
            if let Ok(headers) = plan.call_headers(args) {
                for h in headers {
                    assert!(h.value.as_bytes().iter().all(|b| (0x20..=0x7e).contains(b)));
                }
            }
        }
        Err(e) => {
            assert!(!e.problems.is_empty());
            let _ = e.to_string();
        }
    }
});
