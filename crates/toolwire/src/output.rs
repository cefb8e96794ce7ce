//! Validation of `structuredContent` against a tool's `outputSchema`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use toolwire_types::Schema;

use crate::Error;

/// How many compiled schemas are kept; past this the cache starts over (a server that keeps
/// changing its schemas cannot grow it without bound).
const MAX_COMPILED: usize = 1024;

/// The most subschema evaluations one value may cost (see [`evaluation_cost`]). A schema whose
/// levels each evaluate the level below several times grows exponentially with a small text
/// (3^k: 274 ms at k = 14 in jsonschema 0.61, minutes at k = 20), and validation runs on the
/// caller's task; past this bound (a few tens of milliseconds) the schema is refused instead.
const MAX_EVALUATION_COST: u64 = 200_000;

/// Applicator keywords whose value is one subschema.
const ONE_SCHEMA: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "additionalProperties",
    "propertyNames",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "items",
];
/// Applicator keywords whose value is an array of subschemas.
const SCHEMA_ARRAYS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Applicator keywords whose value is an object of subschemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
];

/// An upper bound on the subschemas evaluated for one instance location: every applicator's
/// subschemas are counted, and a local `$ref` (JSON pointer or `$anchor`) counts its target's
/// cost wherever it is used. A reference back into a schema being counted (recursion) counts
/// once: it descends into the instance, whose depth serde_json bounds. Linear in the schema's
/// size (each node's cost is computed once).
pub(crate) fn evaluation_cost(root: &Value) -> u64 {
    let mut anchors = HashMap::new();
    collect_anchors(root, &mut anchors);
    let mut counter = CostCounter {
        root,
        anchors,
        memo: HashMap::new(),
        stack: Vec::new(),
    };
    counter.cost(root)
}

fn collect_anchors<'a>(node: &'a Value, anchors: &mut HashMap<&'a str, &'a Value>) {
    match node {
        Value::Object(map) => {
            for key in ["$anchor", "$dynamicAnchor"] {
                if let Some(name) = map.get(key).and_then(Value::as_str) {
                    anchors.insert(name, node);
                }
            }
            map.values().for_each(|v| collect_anchors(v, anchors));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_anchors(v, anchors)),
        _ => {}
    }
}

struct CostCounter<'a> {
    root: &'a Value,
    anchors: HashMap<&'a str, &'a Value>,
    /// Cost per node, by address.
    memo: HashMap<*const Value, u64>,
    /// The nodes being counted (a reference back to one of them is recursion).
    stack: Vec<*const Value>,
}

impl<'a> CostCounter<'a> {
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() || fragment.starts_with('/') {
            self.root.pointer(&fragment.replace("%25", "%"))
        } else {
            self.anchors.get(fragment).copied()
        }
    }

    fn cost(&mut self, node: &'a Value) -> u64 {
        let key: *const Value = node;
        if let Some(c) = self.memo.get(&key) {
            return *c;
        }
        if self.stack.contains(&key) {
            return 1;
        }
        let Value::Object(map) = node else {
            return 1;
        };
        self.stack.push(key);
        let mut total: u64 = 1;
        for (keyword, value) in map {
            let k = keyword.as_str();
            let part = if k == "$ref" || k == "$dynamicRef" {
                match value.as_str().and_then(|r| self.resolve(r)) {
                    Some(target) => self.cost(target),
                    None => 1,
                }
            } else if SCHEMA_ARRAYS.contains(&k) && value.is_array() {
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .fold(0u64, |sum, v| sum.saturating_add(self.cost(v)))
            } else if SCHEMA_MAPS.contains(&k) {
                value
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .fold(0u64, |sum, v| sum.saturating_add(self.cost(v)))
            } else if ONE_SCHEMA.contains(&k) {
                self.cost(value)
            } else {
                0
            };
            total = total.saturating_add(part);
        }
        self.stack.pop();
        self.memo.insert(key, total);
        total
    }
}

enum Compiled {
    Usable(jsonschema::Validator),
    /// The schema does not compile (an unsupported draft, an unresolvable or remote `$ref`).
    Unusable(String),
}

/// `text` decoded and compiled, or why it cannot be used (nested past the decoder's limit,
/// too costly to evaluate, not a schema the validator takes).
fn compile(text: &Schema) -> Compiled {
    let schema = match text.decode() {
        Ok(schema) => schema,
        Err(e) => return Compiled::Unusable(e.to_string()),
    };
    // Remote `$ref`s cannot resolve: the resolvers that would fetch them are not built.
    let cost = evaluation_cost(&schema);
    if cost > MAX_EVALUATION_COST {
        return Compiled::Unusable(format!(
            "it is too complex to validate safely: one value may take {cost} subschema \
             evaluations (the limit is {MAX_EVALUATION_COST})"
        ));
    }
    match jsonschema::validator_for(&schema) {
        Ok(v) => Compiled::Usable(v),
        Err(e) => Compiled::Unusable(e.to_string()),
    }
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
    fn compiled(&self, text: &Schema) -> Arc<Compiled> {
        // The map only ever gains whole entries, so a panicked holder left it consistent.
        let mut map = self.compiled.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = map.get(text.as_json()) {
            return c.clone();
        }
        if map.len() >= MAX_COMPILED {
            map.clear();
        }
        let compiled = Arc::new(compile(text));
        map.insert(text.as_json().to_owned(), compiled.clone());
        compiled
    }

    /// Checks `structured` against `schema`; the error names the tool and says why.
    pub(crate) fn check(
        &self,
        tool: &str,
        schema: &Schema,
        structured: &Value,
    ) -> Result<(), Error> {
        match &*self.compiled(schema) {
            Compiled::Usable(validator) => match validator.validate(structured) {
                Ok(()) => Ok(()),
                Err(e) => Err(Error::Protocol(crate::ProtocolError::StructuredOutput {
                    tool: tool.to_owned(),
                    message: format!("{e} (at {})", e.instance_path()),
                })),
            },
            Compiled::Unusable(why) => {
                Err(Error::Protocol(crate::ProtocolError::StructuredOutput {
                    tool: tool.to_owned(),
                    message: format!("the tool's outputSchema cannot be used: {why}"),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use serde_json::json;

    /// Each level evaluates the level below three times: small text, 3^k evaluations.
    fn explosive(k: usize) -> (Value, Value) {
        let mut defs = serde_json::Map::new();
        defs.insert("s0".into(), json!({"type": "object"}));
        for i in 1..=k {
            let prev = format!("#/$defs/s{}", i - 1);
            defs.insert(
                format!("s{i}"),
                json!({"anyOf": [
                    {"properties": {"x": {"allOf": [{"$ref": prev}, {"not": {"$ref": prev}}]}}},
                    {"properties": {"x": {"$ref": prev}}}
                ]}),
            );
        }
        let mut instance = json!({});
        for _ in 0..k {
            instance = json!({ "x": instance });
        }
        (
            json!({"$defs": defs, "$ref": format!("#/$defs/s{k}")}),
            instance,
        )
    }

    #[test]
    fn an_exponential_schema_is_refused_before_it_runs() {
        let (schema, instance) = explosive(20);
        assert!(evaluation_cost(&schema) > MAX_EVALUATION_COST);
        let validators = OutputValidators::default();
        let started = std::time::Instant::now();
        let err = validators
            .check("t", &Schema::from(&schema), &instance)
            .unwrap_err();
        // Refused without running: at k = 20 a run would take minutes.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        match err {
            Error::Protocol(crate::ProtocolError::StructuredOutput { tool, message }) => {
                assert_eq!(tool, "t");
                assert!(message.contains("too complex"), "{message}");
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn small_and_recursive_schemas_stay_within_the_bound_and_validate() {
        let (schema, instance) = explosive(6);
        assert!(evaluation_cost(&schema) <= MAX_EVALUATION_COST);
        let validators = OutputValidators::default();
        validators
            .check("t", &Schema::from(&schema), &instance)
            .unwrap();
        // A tree: recursion through `items` counts once per level.
        let tree = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name"]
        });
        assert!(evaluation_cost(&tree) < 10);
        let value = json!({"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]});
        validators.check("t", &Schema::from(&tree), &value).unwrap();
        let bad = json!({"name": "a", "children": [{"children": []}]});
        assert!(validators.check("t", &Schema::from(&tree), &bad).is_err());
        // Anchors resolve too, and cycles between definitions terminate.
        let anchored = json!({
            "$defs": {"a": {"$anchor": "A", "anyOf": [{"$ref": "#B"}, {"type": "null"}]},
                      "b": {"$anchor": "B", "properties": {"next": {"$ref": "#A"}}}},
            "$ref": "#A"
        });
        assert!(evaluation_cost(&anchored) < 20);
    }

    #[test]
    fn shared_definitions_count_at_every_use() {
        // 100 properties, each a reference to one 10-property definition: ~1,100 evaluations.
        let mut props = serde_json::Map::new();
        for i in 0..100 {
            props.insert(format!("p{i}"), json!({"$ref": "#/$defs/d"}));
        }
        let d: serde_json::Map<String, Value> = (0..10)
            .map(|i| (format!("f{i}"), json!({"type": "integer"})))
            .collect();
        let schema = json!({"properties": props, "$defs": {"d": {"properties": d}}});
        let cost = evaluation_cost(&schema);
        assert!((1_100..1_300).contains(&cost), "{cost}");
    }
}
