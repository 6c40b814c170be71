//! OpenAI's strict JSON-schema rules, shared by the wires that send them (chat
//! completions' `strict` tools and structured output, the Responses API's
//! function tools and structured output): [`strict_schema`] rewrites a schema to
//! them (every property required, optional ones nullable, no additional
//! properties, validation keywords strict mode does not take removed), and
//! [`relax_strict_arguments`] undoes that on a model's arguments (the `null`s
//! of optional properties removed), so they validate against the schema as
//! written.
//!
//! Removing a validation keyword (`minLength`, `uniqueItems`, a `format` the
//! provider does not know, ...) widens what the provider's grammar allows, never
//! what the run accepts: tool arguments and typed answers are still checked
//! against the schema as written. The removal is logged at warn, once per
//! distinct set of removed keywords in a process. Keywords that change a
//! schema's structure (`allOf`, `oneOf`, `not`, conditionals, tuples) cannot be
//! removed that way: such a schema is not made strict.

use serde_json::{Map, Value, json};

/// Why a schema cannot follow OpenAI's strict rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema at `{path}` cannot be strict: {reason}")]
pub struct NotStrict {
    /// JSON-pointer-like path of the offending schema node (`#` is the root).
    pub path: String,
    /// The rule that fails.
    pub reason: NotStrictReason,
}

/// The strict rule a schema breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotStrictReason {
    /// The root is not an object schema with `properties`.
    #[error("the root must be an object with properties")]
    RootNotObject,
    /// An object allows properties beyond its declared ones (a map or free-form
    /// object); strict mode needs `additionalProperties: false`.
    #[error("open objects (additionalProperties or no properties) are not allowed")]
    OpenObject,
    /// A keyword strict mode does not support.
    #[error("keyword `{0}` is not supported")]
    UnsupportedKeyword(String),
    /// A `$ref` that does not point into the schema's own `$defs`/`definitions`.
    #[error("only local references into $defs or definitions are supported")]
    NonLocalRef,
    /// A node without `type`, `enum`, `const`, `anyOf` or `$ref`.
    #[error("every schema node needs a type")]
    Untyped,
    /// Nesting deeper than strict mode allows.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// A node is not a JSON object.
    #[error("a schema node is not an object")]
    NotAnObject,
}

/// Deepest object nesting OpenAI accepts in strict mode.
const STRICT_MAX_DEPTH: usize = 10;

/// Keywords that shape a schema and that no provider grammar here takes
/// (OpenAI's strict mode refuses `allOf` too): a schema holding one cannot be
/// sent under the grammar.
pub const SHAPING_KEYWORDS: &[&str] = &[
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "patternProperties",
    "prefixItems",
];

/// Validation keywords that no provider grammar here takes: removed (and
/// logged) when a schema is sent under one. (Validation keywords OpenAI's
/// strict mode does take, like `pattern`, `minimum` or `minItems`, are kept
/// there.)
pub const VALIDATION_KEYWORDS: &[&str] = &[
    "dependentRequired",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "minLength",
    "maxLength",
];

/// The string `format`s strict mode knows; any other `format` (schemars' `uint32`,
/// `int64`, `double`, ...) is removed.
pub const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Rewrites a schema to OpenAI's strict rules: every object lists all its
/// properties in `required` and has `additionalProperties: false`; properties that
/// were optional become nullable. Fails, naming the node and the rule, when the
/// schema cannot be expressed that way (open objects, unsupported keywords, non-local
/// references, untyped nodes, nesting deeper than 10).
///
/// ```
/// use serde_json::json;
/// use ai_core::schema::strict::strict_schema;
///
/// let schema = json!({"type": "object", "properties": {
///     "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]});
/// let strict = strict_schema(&schema).unwrap();
/// assert_eq!(strict["required"], json!(["city", "days"]));
/// assert_eq!(strict["properties"]["days"]["type"], json!(["integer", "null"]));
/// assert_eq!(strict["additionalProperties"], json!(false));
/// ```
pub fn strict_schema(schema: &Value) -> Result<Value, NotStrict> {
    let is_object_root = schema.get("type") == Some(&json!("object"))
        && schema.get("properties").is_some_and(Value::is_object);
    if !is_object_root {
        return Err(NotStrict {
            path: "#".into(),
            reason: NotStrictReason::RootNotObject,
        });
    }
    let mut out = schema.clone();
    let mut dropped = Vec::new();
    strictify(&mut out, "#", 0, &mut dropped)?;
    warn_dropped_once("OpenAI strict mode", &dropped);
    Ok(out)
}

/// Logs at warn that `dropped` (paths of removed keywords) were removed before
/// a schema went to `provider`, once per distinct list in this process.
pub fn warn_dropped_once(provider: &str, dropped: &[String]) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if dropped.is_empty() {
        return;
    }
    let key = format!("{provider}: {}", dropped.join(", "));
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.contains(&key) || seen.len() >= 1024 {
        return;
    }
    tracing::warn!(
        removed = %dropped.join(", "),
        "schema keywords {provider} does not take were removed from the request; \
         the arguments or answer are still checked against the schema as written"
    );
    seen.push(key);
}

/// Removes from `map` the `keywords` it holds and a `format` outside `formats`,
/// recording each as `{path}/{keyword}` in `dropped`.
fn drop_keywords(
    map: &mut Map<String, Value>,
    path: &str,
    keywords: &[&str],
    dropped: &mut Vec<String>,
) {
    for keyword in keywords {
        if map.remove(*keyword).is_some() {
            dropped.push(format!("{path}/{keyword}"));
        }
    }
}

/// Removes from `map` a `format` outside `formats`, recording it in `dropped`.
fn drop_unknown_format(
    map: &mut Map<String, Value>,
    path: &str,
    formats: &[&[&str]],
    dropped: &mut Vec<String>,
) {
    let known = |f: &Value| {
        f.as_str()
            .is_some_and(|f| formats.iter().any(|list| list.contains(&f)))
    };
    if map.get("format").is_some_and(|f| !known(f)) {
        map.remove("format");
        dropped.push(format!("{path}/format"));
    }
}

/// A provider's schema grammar: what each node of a schema sent under it may
/// hold (OpenAI's strict mode here, Anthropic's structured outputs in its wire).
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    /// Deepest nesting.
    pub max_depth: usize,
    /// Lists of keywords that shape a schema: one that holds any cannot be
    /// sent under it.
    pub unsupported: &'static [&'static [&'static str]],
    /// Lists of validation keywords it does not take: removed.
    pub dropped: &'static [&'static [&'static str]],
    /// Lists of the string `format`s it knows; another is removed.
    pub formats: &'static [&'static [&'static str]],
}

/// OpenAI's strict mode.
const STRICT: Grammar = Grammar {
    max_depth: STRICT_MAX_DEPTH,
    unsupported: &[SHAPING_KEYWORDS, &["allOf"]],
    dropped: &[VALIDATION_KEYWORDS],
    formats: &[STRICT_FORMATS],
};

impl Grammar {
    /// The object of the schema node `node` at `path` (`depth` levels down),
    /// checked (not too deep, an object, no keyword the grammar cannot take)
    /// and with what the grammar drops removed, each removal recorded in
    /// `dropped`.
    pub fn node<'n>(
        &self,
        node: &'n mut Value,
        path: &str,
        depth: usize,
        dropped: &mut Vec<String>,
    ) -> Result<&'n mut Map<String, Value>, NotStrict> {
        let fail = |reason| NotStrict {
            path: path.to_owned(),
            reason,
        };
        if depth > self.max_depth {
            return Err(fail(NotStrictReason::TooDeep(self.max_depth)));
        }
        let Value::Object(map) = node else {
            return Err(fail(NotStrictReason::NotAnObject));
        };
        let unsupported = self.unsupported.iter().flat_map(|list| list.iter());
        if let Some(keyword) = unsupported.into_iter().find(|k| map.contains_key(**k)) {
            return Err(fail(NotStrictReason::UnsupportedKeyword(
                (*keyword).to_owned(),
            )));
        }
        for list in self.dropped {
            drop_keywords(map, path, list, dropped);
        }
        drop_unknown_format(map, path, self.formats, dropped);
        Ok(map)
    }
}

/// Calls `each` with every subschema of `map` (at `path`) under `keys` (maps of
/// named subschemas such as `$defs` or `properties`, lists such as `anyOf`),
/// then with `items`, each with its path; a tuple `items` fails, as no grammar
/// here takes it.
pub fn each_subschema(
    map: &mut Map<String, Value>,
    path: &str,
    keys: &[&str],
    mut each: impl FnMut(&mut Value, String) -> Result<(), NotStrict>,
) -> Result<(), NotStrict> {
    for key in keys {
        match map.get_mut(*key) {
            Some(Value::Object(entries)) => {
                for (name, sub) in entries.iter_mut() {
                    each(sub, format!("{path}/{key}/{name}"))?;
                }
            }
            Some(Value::Array(branches)) => {
                for (i, branch) in branches.iter_mut().enumerate() {
                    each(branch, format!("{path}/{key}/{i}"))?;
                }
            }
            _ => {}
        }
    }
    match map.get_mut("items") {
        Some(items @ Value::Object(_)) => each(items, format!("{path}/items")),
        Some(Value::Array(_)) => Err(NotStrict {
            path: path.to_owned(),
            reason: NotStrictReason::UnsupportedKeyword("items (tuple form)".into()),
        }),
        _ => Ok(()),
    }
}

fn strictify(
    node: &mut Value,
    path: &str,
    depth: usize,
    dropped: &mut Vec<String>,
) -> Result<(), NotStrict> {
    let fail = |reason| NotStrict {
        path: path.to_owned(),
        reason,
    };
    let map = STRICT.node(node, path, depth, dropped)?;
    if let Some(reference) = map.get("$ref") {
        let local = reference.as_str().is_some_and(|r| {
            r.starts_with("#/$defs/") || r.starts_with("#/definitions/") || r == "#"
        });
        if !local {
            return Err(fail(NotStrictReason::NonLocalRef));
        }
    }
    let typed = ["type", "enum", "const", "anyOf", "$ref"]
        .iter()
        .any(|k| map.contains_key(*k));
    if !typed {
        return Err(fail(NotStrictReason::Untyped));
    }
    each_subschema(map, path, &["$defs", "definitions", "anyOf"], |sub, at| {
        strictify(sub, &at, depth + 1, dropped)
    })?;
    let is_object = type_includes(map.get("type"), "object") || map.contains_key("properties");
    if !is_object {
        return Ok(());
    }
    match map.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => return Err(fail(NotStrictReason::OpenObject)),
    }
    let required = map_required(map).unwrap_or_default();
    let Some(Value::Object(properties)) = map.get_mut("properties") else {
        return Err(fail(NotStrictReason::OpenObject));
    };
    let mut all = Vec::with_capacity(properties.len());
    for (name, property) in properties.iter_mut() {
        strictify(
            property,
            &format!("{path}/properties/{name}"),
            depth + 1,
            dropped,
        )?;
        if !required.iter().any(|r| r == name) {
            make_nullable(property);
        }
        all.push(Value::String(name.clone()));
    }
    map.insert("required".into(), Value::Array(all));
    map.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

fn map_required(map: &Map<String, Value>) -> Option<Vec<String>> {
    let list = map.get("required")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    )
}

fn type_includes(type_value: Option<&Value>, name: &str) -> bool {
    match type_value {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some(name)),
        _ => false,
    }
}

/// Whether a schema node already admits `null`.
fn allows_null(node: &Value) -> bool {
    let Value::Object(map) = node else {
        return false;
    };
    type_includes(map.get("type"), "null")
        || map.get("const") == Some(&Value::Null)
        || map
            .get("anyOf")
            .and_then(Value::as_array)
            .is_some_and(|branches| branches.iter().any(allows_null))
        || (!map.contains_key("type")
            && map
                .get("enum")
                .and_then(Value::as_array)
                .is_some_and(|values| values.contains(&Value::Null)))
}

fn make_nullable(node: &mut Value) {
    if allows_null(node) {
        return;
    }
    let Value::Object(map) = node else {
        return;
    };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => types.push(json!("null")),
        _ => {
            if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                branches.push(json!({"type": "null"}));
            } else if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            } else {
                let inner = std::mem::take(map);
                map.insert(
                    "anyOf".into(),
                    json!([Value::Object(inner), {"type": "null"}]),
                );
            }
            return;
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

/// Undoes the strict rewrite on a model's arguments: removes `null` values of
/// properties that the original schema did not require and that do not admit
/// `null`, so the arguments validate against the original schema. Returns `None`
/// when nothing changes (or the arguments are not JSON).
///
/// ```
/// use serde_json::json;
/// use ai_core::schema::strict::relax_strict_arguments;
///
/// let schema = json!({"type": "object", "properties": {
///     "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]});
/// let relaxed = relax_strict_arguments(r#"{"city":"Paris","days":null}"#, &schema);
/// assert_eq!(relaxed.as_deref(), Some(r#"{"city":"Paris"}"#));
/// ```
pub fn relax_strict_arguments(arguments: &str, original_schema: &Value) -> Option<String> {
    let mut value: Value = serde_json::from_str(arguments).ok()?;
    if relax_strict_value(&mut value, original_schema) {
        serde_json::to_string(&value).ok()
    } else {
        None
    }
}

/// [`relax_strict_arguments`] on a parsed value, in place; whether anything
/// changed.
pub fn relax_strict_value(value: &mut Value, original_schema: &Value) -> bool {
    relax(value, original_schema, original_schema, 0)
}

fn resolve<'s>(node: &'s Value, root: &'s Value) -> &'s Value {
    let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
        return node;
    };
    if reference == "#" {
        return root;
    }
    reference
        .strip_prefix('#')
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(node)
}

fn relax(value: &mut Value, schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > STRICT_MAX_DEPTH + 2 {
        return false;
    }
    let schema = resolve(schema, root);
    let mut changed = false;
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return false;
            };
            let required = schema
                .as_object()
                .and_then(map_required)
                .unwrap_or_default();
            fields.retain(|name, field| {
                let drop = field.is_null()
                    && !required.iter().any(|r| r == name)
                    && properties
                        .get(name)
                        .is_some_and(|p| !allows_null(resolve(p, root)));
                changed |= drop;
                !drop
            });
            for (name, field) in fields.iter_mut() {
                if let Some(property) = properties.get(name) {
                    changed |= relax(field, property, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    changed |= relax(item, item_schema, root, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}
