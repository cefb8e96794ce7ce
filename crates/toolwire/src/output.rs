//! Validation of `structuredContent` against a tool's `outputSchema`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::Error;

/// How many compiled schemas are kept; past this the cache starts over (a server that keeps
/// changing its schemas cannot grow it without bound).
const MAX_COMPILED: usize = 1024;

enum Compiled {
    Usable(jsonschema::Validator),
    /// The schema does not compile (an unsupported draft, an unresolvable or remote `$ref`).
    Unusable(String),
}

/// Compiled output schemas, by their JSON text: each schema is compiled once.
#[derive(Default)]
pub(crate) struct OutputValidators {
    compiled: Mutex<HashMap<String, Arc<Compiled>>>,
}

impl std::fmt::Debug for OutputValidators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputValidators")
    }
}

impl OutputValidators {
    fn compiled(&self, schema: &Value) -> Arc<Compiled> {
        let key = schema.to_string();
        // The map only ever gains whole entries, so a panicked holder left it consistent.
        let mut map = self.compiled.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = map.get(&key) {
            return c.clone();
        }
        if map.len() >= MAX_COMPILED {
            map.clear();
        }
        // Remote `$ref`s cannot resolve: the resolvers that would fetch them are not built.
        let compiled = Arc::new(match jsonschema::validator_for(schema) {
            Ok(v) => Compiled::Usable(v),
            Err(e) => Compiled::Unusable(e.to_string()),
        });
        map.insert(key, compiled.clone());
        compiled
    }

    /// Checks `structured` against `schema`; the error names the tool and says why.
    pub(crate) fn check(
        &self,
        tool: &str,
        schema: &Value,
        structured: &Value,
    ) -> Result<(), Error> {
        match &*self.compiled(schema) {
            Compiled::Usable(validator) => match validator.validate(structured) {
                Ok(()) => Ok(()),
                Err(e) => Err(Error::StructuredOutput {
                    tool: tool.to_owned(),
                    message: format!("{e} (at {})", e.instance_path()),
                }),
            },
            Compiled::Unusable(why) => Err(Error::StructuredOutput {
                tool: tool.to_owned(),
                message: format!("the tool's outputSchema cannot be used: {why}"),
            }),
        }
    }
}
