//! Translation of MCP tool input schemas into the catalog's schema subset.
//!
//! MCP servers describe tool inputs in JSON Schema 2020-12 (the dialect when
//! `$schema` is absent, per the MCP specification), 2019-09 or draft-07. The
//! catalog, and every model a tool spec is sent to, takes only the draft-07 subset
//! that [`ai_core::schema::check_schema_subset`] accepts: no combinators, no conditionals,
//! no `patternProperties`, only local `$ref`s, and an object root.
//!
//! [`translate_schema`] rewrites a schema into that subset when, and only when, the
//! rewrite is lossless: the result accepts exactly the instances the original
//! accepts. Annotations may change (`title`, `$comment`, `$schema` and `$id` are
//! dropped) and a root that has `properties` but no `type` gains
//! `"type": "object"`, because tool arguments are always objects. Everything else
//! that has no exact draft-07 equivalent is [`Untranslatable`], with the JSON
//! pointer of the offending keyword in the *original* schema, so that the tool can
//! be left out with a precise reason instead of being advertised with a looser or
//! stricter schema than the server's. The translation is only what the model sees:
//! the original schema is still used to validate arguments before they are sent.
//!
//! The mappings:
//!
//! * `anyOf`/`oneOf` of exactly a schema `T` and a null schema (`{"type": "null"}`,
//!   `{"const": null}` or `{"enum": [null]}`, in either order) becomes `T` with
//!   `"null"` added to its `type` (and to its `enum`, if it has one); keywords next
//!   to the union (`description`, `default`, ...) are merged in. A union with one
//!   branch (also `allOf`) is that branch merged with its siblings. Any other union
//!   and any `allOf` with several branches is untranslatable.
//! * Local `$ref`s (`#`, `#/$defs/X`, `#/definitions/X`, any `#/pointer`) are
//!   inlined and `$defs`/`definitions` dropped. In 2019-09 and 2020-12 the keywords
//!   next to a `$ref` apply too and are merged with the target when they do not
//!   conflict; draft-07 ignores them (as does the validator), so only annotations
//!   are kept. Recursive, remote (not starting with `#`), anchor (`#name`) and
//!   dangling references are untranslatable.
//! * `const: v` becomes `enum: [v]`.
//! * `prefixItems` (2020-12) becomes tuple `items`, and the `items` next to it
//!   becomes `additionalItems`; the legacy array `items` and `additionalItems` are
//!   read as in draft-07 (as the validator does). `dependentRequired` and `dependentSchemas` become
//!   `dependencies`. `unevaluatedProperties: false` becomes
//!   `additionalProperties: false` (after everything else is merged, so the
//!   properties it sees are the ones the original evaluates); `true` is dropped.
//! * `not`, `if`/`then`/`else`, `patternProperties`, `$anchor`, `$dynamicRef`,
//!   `$dynamicAnchor`, `$recursiveRef`, `$recursiveAnchor`, `minContains`,
//!   `maxContains`, other `unevaluatedItems`/`unevaluatedProperties`, the draft-04
//!   boolean `exclusiveMinimum`/`exclusiveMaximum` and an `$id` below the root are
//!   untranslatable. In a draft-07 schema, keywords that only later drafts define
//!   are ignored by draft-07 and therefore dropped (likewise `prefixItems` in
//!   2019-09).
//!
//! Work is bounded: schemas nested deeper than 64 levels (counting inlined
//! references) are untranslatable, and so is a schema whose inlined references add
//! more than ten times its own size, clamped to between 16 KiB and 256 KiB (a
//! "reference bomb" of many references to large definitions).

use std::collections::HashMap;
use std::io;

use ai_core::schema::{check_schema_subset, resolve_local_ref};
use serde_json::{Map, Value, json};

/// Deepest subschema nesting translated, counting each inlined `$ref` as a level.
const MAX_DEPTH: usize = 64;
/// Inlined bytes allowed per byte of input.
const INLINE_FACTOR: usize = 10;
/// Inlined bytes always allowed, however small the input.
const MIN_INLINE_BUDGET: usize = 16 * 1024;
/// Inlined bytes never allowed, however large the input.
const MAX_INLINE_BUDGET: usize = 256 * 1024;

/// Keywords that carry no assertion: merging them never changes what validates.
const ANNOTATIONS: &[&str] = &[
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
];

/// Keywords forbidden by the subset in every dialect.
const UNSUPPORTED: &[&str] = &["not", "if", "then", "else", "patternProperties"];

/// Keywords of 2019-09/2020-12 with no draft-07 equivalent.
const NO_DRAFT7_EQUIVALENT: &[&str] = &[
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "minContains",
    "maxContains",
];

/// Keywords whose meanings depend on each other: merging two schemas that each use
/// one of a group would change what the other one sees.
const COUPLED: &[&[&str]] = &[
    &["properties", "additionalProperties", "patternProperties"],
    &["items", "additionalItems"],
];

/// The JSON Schema dialect a schema is written in, from its `$schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// `http://json-schema.org/draft-07/schema#`.
    Draft7,
    /// `https://json-schema.org/draft/2019-09/schema`.
    Draft2019_09,
    /// `https://json-schema.org/draft/2020-12/schema`, and any schema without
    /// `$schema` (the MCP default).
    Draft2020_12,
}

/// A schema rewritten into the catalog's subset.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaTranslation {
    /// The draft-07 subset schema; it passes [`ai_core::schema::check_schema_subset`].
    pub schema: Value,
    /// The dialect the original schema was read as.
    pub dialect: Dialect,
}

/// Why a schema cannot be translated without changing what it accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {reason}")]
pub struct Untranslatable {
    /// JSON pointer into the original schema of the offending keyword, e.g.
    /// `/properties/shape/oneOf` (empty for the root itself).
    pub pointer: String,
    /// The offending keyword, e.g. `oneOf` or `$ref`.
    pub keyword: String,
    /// Why it cannot be translated.
    pub reason: String,
}

impl Untranslatable {
    fn new(pointer: &str, keyword: &str, reason: impl Into<String>) -> Self {
        Self {
            pointer: pointer.to_owned(),
            keyword: keyword.to_owned(),
            reason: reason.into(),
        }
    }

    /// `value` as an array, else that `keyword`'s value (at `pointer`) must be one.
    fn array<'v>(value: &'v Value, pointer: &str, keyword: &str) -> Result<&'v [Value], Self> {
        match value {
            Value::Array(items) => Ok(items),
            _ => Err(Self::new(
                pointer,
                keyword,
                format!("`{keyword}` must be an array"),
            )),
        }
    }

    /// `value` as an object, else that `keyword`'s value (at `pointer`) must be one.
    fn object<'v>(
        value: &'v Value,
        pointer: &str,
        keyword: &str,
    ) -> Result<&'v Map<String, Value>, Self> {
        match value {
            Value::Object(entries) => Ok(entries),
            _ => Err(Self::new(
                pointer,
                keyword,
                format!("`{keyword}` must be an object"),
            )),
        }
    }

    /// The subset cannot express `keyword` at all.
    fn inexpressible(pointer: &str, keyword: &str) -> Self {
        Self::new(
            pointer,
            keyword,
            format!("`{keyword}` cannot be expressed in the catalog's schema subset"),
        )
    }
}

/// Translates an MCP tool input schema into the catalog's draft-07 subset, losslessly
/// (see the module documentation for the mappings), or says which keyword of the
/// original prevents it.
pub fn translate_schema(schema: &Value) -> Result<SchemaTranslation, Untranslatable> {
    let dialect = detect_dialect(schema)?;
    let budget = json_size(schema)
        .saturating_mul(INLINE_FACTOR)
        .clamp(MIN_INLINE_BUDGET, MAX_INLINE_BUDGET);
    let mut translator = Translator {
        root: schema,
        dialect,
        cache: HashMap::new(),
        // The root is being translated, so `#` from inside it is a cycle.
        stack: vec![String::new()],
        inlined: 0,
        budget,
    };
    let translated = translator.translate(schema, "", "", 0)?;
    let translated = object_root(translated, schema)?;
    if let Err(violations) = check_schema_subset(&translated) {
        // Unreachable if the rules above are complete; kept so that the invariant
        // holds even if they are not.
        if let Some(first) = violations.into_iter().next() {
            let keyword = first
                .pointer
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            return Err(Untranslatable {
                pointer: first.pointer,
                keyword,
                reason: format!(
                    "the translation is still outside the subset: {}",
                    first.message
                ),
            });
        }
    }
    Ok(SchemaTranslation {
        schema: translated,
        dialect,
    })
}

fn detect_dialect(schema: &Value) -> Result<Dialect, Untranslatable> {
    let Some(declared) = schema.get("$schema") else {
        return Ok(Dialect::Draft2020_12);
    };
    let Some(uri) = declared.as_str() else {
        return Err(Untranslatable::new(
            "/$schema",
            "$schema",
            "`$schema` must be a string",
        ));
    };
    let trimmed = uri.trim_end_matches('#');
    let location = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"))
        .unwrap_or(trimmed);
    match location {
        "json-schema.org/draft-07/schema" => Ok(Dialect::Draft7),
        "json-schema.org/draft/2019-09/schema" => Ok(Dialect::Draft2019_09),
        "json-schema.org/draft/2020-12/schema" => Ok(Dialect::Draft2020_12),
        _ => Err(Untranslatable::new(
            "/$schema",
            "$schema",
            format!(
                "unsupported dialect `{uri}`: only draft-07, 2019-09 and 2020-12 schemas are translated"
            ),
        )),
    }
}

/// Makes sure the translated root is an object schema.
fn object_root(translated: Value, original: &Value) -> Result<Value, Untranslatable> {
    let Value::Object(mut map) = translated else {
        return Err(Untranslatable::new(
            "",
            "type",
            "the root of a tool input schema must be an object schema, not a boolean",
        ));
    };
    let pointer = if original.get("type").is_some() {
        "/type"
    } else {
        ""
    };
    let wrong = || {
        Untranslatable::new(
            pointer,
            "type",
            "the root of a tool input schema must have \"type\": \"object\"",
        )
    };
    match map.get("type") {
        Some(Value::String(name)) if name == "object" => {}
        Some(Value::Array(names)) if matches!(names.as_slice(), [only] if only == "object") => {
            map.insert("type".into(), json!("object"));
        }
        None if map.contains_key("properties") => {
            map.insert("type".into(), json!("object"));
        }
        _ => return Err(wrong()),
    }
    Ok(Value::Object(map))
}

struct Translator<'a> {
    root: &'a Value,
    dialect: Dialect,
    /// Translated `$ref` targets by JSON pointer, with their serialized sizes.
    cache: HashMap<String, (Value, usize)>,
    /// JSON pointers of the `$ref` targets being translated (cycle detection).
    stack: Vec<String>,
    /// Bytes added by inlining so far.
    inlined: usize,
    budget: usize,
}

impl Translator<'_> {
    fn modern(&self) -> bool {
        self.dialect != Dialect::Draft7
    }

    /// Translates the subschema `node` found at `pointer`, reached through `via`.
    fn translate(
        &mut self,
        node: &Value,
        pointer: &str,
        via: &str,
        depth: usize,
    ) -> Result<Value, Untranslatable> {
        if depth > MAX_DEPTH {
            return Err(Untranslatable::new(
                pointer,
                via,
                format!("schemas nested deeper than {MAX_DEPTH} levels are not translated"),
            ));
        }
        match node {
            Value::Bool(_) => Ok(node.clone()),
            Value::Object(map) => self.object(map, pointer, depth),
            _ => Err(Untranslatable::new(
                pointer,
                via,
                "a schema must be an object or a boolean",
            )),
        }
    }

    fn object(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) -> Result<Value, Untranslatable> {
        if !self.modern()
            && let Some(reference) = map.get("$ref")
        {
            // Draft-07 ignores every sibling of `$ref`; annotations are kept for the
            // model's sake, they change nothing.
            let target = self.inline(reference, pointer, depth)?;
            let annotations: Map<String, Value> = map
                .iter()
                .filter(|(keyword, _)| ANNOTATIONS.contains(&keyword.as_str()))
                .map(|(keyword, value)| (keyword.clone(), value.clone()))
                .collect();
            return conjoin(target, Value::Object(annotations))
                .map_err(|key| sibling_conflict(pointer, "$ref", &key));
        }
        for keyword in UNSUPPORTED {
            if map.contains_key(*keyword) {
                return Err(Untranslatable::inexpressible(
                    &child(pointer, keyword),
                    keyword,
                ));
            }
        }
        if self.modern() {
            for keyword in NO_DRAFT7_EQUIVALENT {
                if map.contains_key(*keyword) {
                    return Err(Untranslatable::new(
                        &child(pointer, keyword),
                        keyword,
                        format!("`{keyword}` has no equivalent in the catalog's draft-07 subset"),
                    ));
                }
            }
        }
        if !pointer.is_empty() && map.contains_key("$id") {
            return Err(Untranslatable::new(
                &child(pointer, "$id"),
                "$id",
                "an `$id` below the root changes how the `$ref`s under it resolve; not translated",
            ));
        }

        // `prefixItems` is a 2020-12 keyword; draft-07 and 2019-09 ignore it.
        let tuple = self.dialect == Dialect::Draft2020_12 && map.contains_key("prefixItems");
        let mut out = Map::new();
        for (keyword, value) in map {
            let here = child(pointer, keyword);
            let keyword = keyword.as_str();
            match keyword {
                // Dropped: identification, comments, titles, reference containers.
                "$schema" | "$id" | "$comment" | "title" | "$defs" | "definitions"
                | "$vocabulary" | "contentSchema" => {}
                // Handled after the loop (or ignored by draft-07, which does not know
                // the newer ones; NO_DRAFT7_EQUIVALENT in a draft-07 schema likewise).
                "$ref"
                | "allOf"
                | "anyOf"
                | "oneOf"
                | "const"
                | "dependencies"
                | "dependentRequired"
                | "dependentSchemas"
                | "prefixItems"
                | "unevaluatedProperties"
                | "unevaluatedItems" => {}
                _ if NO_DRAFT7_EQUIVALENT.contains(&keyword) => {}
                "properties" => {
                    let properties = Untranslatable::object(value, &here, keyword)?;
                    let mut translated = Map::new();
                    for (name, subschema) in properties {
                        let at = child(&here, name);
                        translated.insert(
                            name.clone(),
                            self.translate(subschema, &at, keyword, depth + 1)?,
                        );
                    }
                    out.insert(keyword.into(), Value::Object(translated));
                }
                // With `prefixItems`, handled after the loop.
                "items" if tuple => {}
                "items" => {
                    let translated = match value {
                        Value::Array(list) => Value::Array(self.list(list, &here, keyword, depth)?),
                        single => self.translate(single, &here, keyword, depth + 1)?,
                    };
                    out.insert(keyword.into(), translated);
                }
                "additionalItems" if tuple => {
                    return Err(Untranslatable::new(
                        &here,
                        keyword,
                        "`additionalItems` next to `prefixItems` is ambiguous (2020-12 ignores it); not translated",
                    ));
                }
                "additionalItems" | "additionalProperties" | "propertyNames" | "contains" => {
                    let translated = self.translate(value, &here, keyword, depth + 1)?;
                    out.insert(keyword.into(), translated);
                }
                "exclusiveMinimum" | "exclusiveMaximum" => match value {
                    Value::Number(_) => {
                        out.insert(keyword.into(), value.clone());
                    }
                    Value::Bool(_) => {
                        return Err(Untranslatable::new(
                            &here,
                            keyword,
                            format!(
                                "the draft-04 boolean form of `{keyword}` is not translated; use the number form"
                            ),
                        ));
                    }
                    _ => {
                        return Err(Untranslatable::new(
                            &here,
                            keyword,
                            format!("`{keyword}` must be a number"),
                        ));
                    }
                },
                "type" => {
                    if type_names(value).is_none() {
                        return Err(Untranslatable::new(
                            &here,
                            keyword,
                            "`type` must be a string or an array of strings",
                        ));
                    }
                    out.insert(keyword.into(), value.clone());
                }
                "enum" => {
                    Untranslatable::array(value, &here, keyword)?;
                    out.insert(keyword.into(), value.clone());
                }
                // Assertions without subschemas, annotations and unknown keywords
                // (which draft-07 ignores just as the original's dialect does).
                _ => {
                    out.insert(keyword.into(), value.clone());
                }
            }
        }

        if let Some(constant) = map.get("const") {
            match out.get_mut("enum") {
                Some(Value::Array(values)) => {
                    if !values.contains(constant) {
                        return Err(Untranslatable::new(
                            &child(pointer, "const"),
                            "const",
                            "`const` is not among the `enum` values, so nothing is valid",
                        ));
                    }
                    *values = vec![constant.clone()];
                }
                _ => {
                    out.insert("enum".into(), Value::Array(vec![constant.clone()]));
                }
            }
        }

        if tuple {
            self.tuple(map, pointer, depth, &mut out)?;
        }
        let dependencies = self.dependencies(map, pointer, depth)?;
        if !dependencies.is_empty() {
            out.insert("dependencies".into(), Value::Object(dependencies));
        }

        let mut result = Value::Object(out);
        for keyword in ["allOf", "anyOf", "oneOf"] {
            if let Some(branches) = map.get(keyword) {
                let part = self.union(branches, pointer, keyword, depth)?;
                result = conjoin(part, result)
                    .map_err(|key| sibling_conflict(pointer, keyword, &key))?;
            }
        }
        if self.modern()
            && let Some(reference) = map.get("$ref")
        {
            let target = self.inline(reference, pointer, depth)?;
            result =
                conjoin(target, result).map_err(|key| sibling_conflict(pointer, "$ref", &key))?;
        }
        if self.modern() {
            unevaluated(map, pointer, &mut result)?;
        }
        Ok(result)
    }

    /// Translates an array of subschemas at `pointer` (`items`, `prefixItems`).
    fn list(
        &mut self,
        list: &[Value],
        pointer: &str,
        via: &str,
        depth: usize,
    ) -> Result<Vec<Value>, Untranslatable> {
        let mut translated = Vec::with_capacity(list.len());
        for (i, subschema) in list.iter().enumerate() {
            let at = child(pointer, &i.to_string());
            translated.push(self.translate(subschema, &at, via, depth + 1)?);
        }
        Ok(translated)
    }

    /// `prefixItems` (+ the 2020-12 `items`) as a draft-07 tuple.
    fn tuple(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
        out: &mut Map<String, Value>,
    ) -> Result<(), Untranslatable> {
        let here = child(pointer, "prefixItems");
        let prefix = map.get("prefixItems").unwrap_or(&Value::Null);
        let prefix = Untranslatable::array(prefix, &here, "prefixItems")?;
        let items = self.list(prefix, &here, "prefixItems", depth)?;
        out.insert("items".into(), Value::Array(items));
        match map.get("items") {
            None | Some(Value::Bool(true)) => {}
            Some(Value::Array(_)) => {
                return Err(Untranslatable::new(
                    &child(pointer, "items"),
                    "items",
                    "array-form `items` next to `prefixItems` is not valid 2020-12",
                ));
            }
            Some(rest) => {
                let rest = self.translate(rest, &child(pointer, "items"), "items", depth + 1)?;
                out.insert("additionalItems".into(), rest);
            }
        }
        Ok(())
    }

    /// `dependencies` (all dialects), `dependentRequired` and `dependentSchemas`
    /// (2019-09 and later) as the entries of one draft-07 `dependencies`.
    fn dependencies(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, Untranslatable> {
        let mut keywords = vec!["dependencies"];
        if self.modern() {
            keywords.extend(["dependentSchemas", "dependentRequired"]);
        }
        let mut merged = Map::new();
        for keyword in keywords {
            let Some(value) = map.get(keyword) else {
                continue;
            };
            let here = child(pointer, keyword);
            let entries = Untranslatable::object(value, &here, keyword)?;
            for (name, dependency) in entries {
                let at = child(&here, name);
                let translated = match (keyword, dependency) {
                    ("dependencies" | "dependentRequired", Value::Array(names)) => {
                        if !names.iter().all(Value::is_string) {
                            return Err(Untranslatable::new(
                                &at,
                                keyword,
                                "required property names must be strings",
                            ));
                        }
                        dependency.clone()
                    }
                    ("dependentRequired", _) => {
                        return Err(Untranslatable::new(
                            &at,
                            keyword,
                            "`dependentRequired` values must be arrays of property names",
                        ));
                    }
                    _ => self.translate(dependency, &at, keyword, depth + 1)?,
                };
                let combined = match merged.remove(name) {
                    None => translated,
                    Some(earlier) => conjoin(as_schema(earlier), as_schema(translated))
                        .map_err(|_| {
                            Untranslatable::new(
                                &at,
                                keyword,
                                format!(
                                    "`{name}` also has a conflicting entry in another dependency keyword"
                                ),
                            )
                        })?,
                };
                merged.insert(name.clone(), combined);
            }
        }
        Ok(merged)
    }

    /// The part of a node that `keyword` (`allOf`, `anyOf` or `oneOf`) contributes,
    /// if it can be expressed without the combinator.
    fn union(
        &mut self,
        branches: &Value,
        pointer: &str,
        keyword: &str,
        depth: usize,
    ) -> Result<Value, Untranslatable> {
        let here = child(pointer, keyword);
        match Untranslatable::array(branches, &here, keyword)? {
            [only] => self.translate(only, &child(&here, "0"), keyword, depth + 1),
            [first, second]
                if keyword != "allOf" && (is_null_branch(first) || is_null_branch(second)) =>
            {
                let (index, branch) = if is_null_branch(first) && !is_null_branch(second) {
                    (1, second)
                } else {
                    (0, first)
                };
                let at = child(&here, &index.to_string());
                let translated = self.translate(branch, &at, keyword, depth + 1)?;
                add_null(translated, keyword == "oneOf")
                    .map_err(|reason| Untranslatable::new(&here, keyword, reason))
            }
            _ => Err(Untranslatable::inexpressible(&here, keyword)),
        }
    }

    /// The translated target of a local `$ref` found in the schema at `pointer`.
    fn inline(
        &mut self,
        reference: &Value,
        pointer: &str,
        depth: usize,
    ) -> Result<Value, Untranslatable> {
        let here = child(pointer, "$ref");
        let fail = |reason: String| Untranslatable::new(&here, "$ref", reason);
        let Some(reference) = reference.as_str() else {
            return Err(fail("`$ref` must be a string".into()));
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(fail(format!(
                "remote reference `{reference}` is never resolved; only local references (starting with `#`) are inlined"
            )));
        };
        if !fragment.is_empty() && !fragment.starts_with('/') {
            return Err(fail(format!(
                "`{reference}` refers to an anchor; only JSON-pointer references are inlined"
            )));
        }
        let Some(target_pointer) = percent_decode(fragment) else {
            return Err(fail(format!("`{reference}` is not a valid URI fragment")));
        };
        let Some(target) = resolve_local_ref(self.root, &format!("#{target_pointer}")) else {
            return Err(fail(format!(
                "`{reference}` points at nothing inside the schema"
            )));
        };
        if self.stack.contains(&target_pointer) {
            return Err(fail("recursive".into()));
        }
        let size = match self.cache.get(&target_pointer) {
            Some((_, size)) => *size,
            None => {
                self.stack.push(target_pointer.clone());
                let translated = self.translate(target, &target_pointer, "$ref", depth + 1);
                self.stack.pop();
                let translated = translated?;
                let size = json_size(&translated);
                self.cache
                    .insert(target_pointer.clone(), (translated, size));
                size
            }
        };
        self.inlined = self.inlined.saturating_add(size);
        if self.inlined > self.budget {
            return Err(fail(format!(
                "inlining the schema's references would add more than {} bytes (ten times its size, at least 16 KiB, at most 256 KiB)",
                self.budget
            )));
        }
        match self.cache.get(&target_pointer) {
            Some((translated, _)) => Ok(translated.clone()),
            None => Err(fail(
                "internal error: translated target went missing".into(),
            )),
        }
    }
}

/// `unevaluatedProperties`/`unevaluatedItems` of a 2019-09/2020-12 node, applied to
/// its finished translation (every property the original evaluates is in it now).
fn unevaluated(
    map: &Map<String, Value>,
    pointer: &str,
    result: &mut Value,
) -> Result<(), Untranslatable> {
    if let Some(value) = map.get("unevaluatedProperties") {
        let here = child(pointer, "unevaluatedProperties");
        match value {
            Value::Bool(true) => {}
            Value::Bool(false) => {
                if let Value::Object(out) = result {
                    let schema_dependencies = match out.get("dependencies") {
                        Some(Value::Object(entries)) => entries.values().any(|d| !d.is_array()),
                        _ => false,
                    };
                    if schema_dependencies {
                        return Err(Untranslatable::new(
                            &here,
                            "unevaluatedProperties",
                            "`unevaluatedProperties` next to schema dependencies cannot be expressed in the catalog's schema subset",
                        ));
                    }
                    // With `additionalProperties` every property is evaluated already.
                    if !out.contains_key("additionalProperties") {
                        out.insert("additionalProperties".into(), Value::Bool(false));
                    }
                }
            }
            _ => {
                return Err(Untranslatable::new(
                    &here,
                    "unevaluatedProperties",
                    "only `unevaluatedProperties: false` can be expressed (as `additionalProperties: false`)",
                ));
            }
        }
    }
    if let Some(value) = map.get("unevaluatedItems")
        && value != &Value::Bool(true)
    {
        return Err(Untranslatable::inexpressible(
            &child(pointer, "unevaluatedItems"),
            "unevaluatedItems",
        ));
    }
    Ok(())
}

/// A union branch that accepts exactly `null` (annotations aside).
fn is_null_branch(branch: &Value) -> bool {
    let Value::Object(map) = branch else {
        return false;
    };
    let mut assertions = map.iter().filter(|(keyword, _)| {
        !ANNOTATIONS.contains(&keyword.as_str())
            && !matches!(keyword.as_str(), "title" | "$comment")
    });
    let (Some((keyword, value)), None) = (assertions.next(), assertions.next()) else {
        return false;
    };
    match keyword.as_str() {
        "type" => value == "null" || *value == json!(["null"]),
        "const" => value.is_null(),
        "enum" => *value == json!([null]),
        _ => false,
    }
}

/// `anyOf`/`oneOf` of `schema` and `null`, as one schema.
fn add_null(schema: Value, exclusive: bool) -> Result<Value, String> {
    const OVERLAP: &str = "both branches of `oneOf` accept null, so null is invalid; that cannot be expressed in the catalog's schema subset";
    let mut map = match schema {
        Value::Bool(false) => return Ok(json!({"type": "null"})),
        Value::Bool(true) if exclusive => return Err(OVERLAP.into()),
        Value::Object(map) => map,
        other => return Ok(other),
    };
    let type_accepts_null = match map.get("type") {
        None => true,
        Some(names) => type_names(names).is_some_and(|names| names.contains(&"null")),
    };
    let enum_accepts_null = match map.get("enum") {
        Some(Value::Array(values)) => values.contains(&Value::Null),
        _ => true,
    };
    if type_accepts_null && enum_accepts_null {
        // `schema` accepts null already: anyOf adds nothing, oneOf takes null away.
        return if exclusive {
            Err(OVERLAP.into())
        } else {
            Ok(Value::Object(map))
        };
    }
    let with_null = match map.get("type") {
        Some(Value::String(name)) if name != "null" => Some(json!([name, "null"])),
        Some(Value::Array(names)) if !names.iter().any(|n| n == "null") => {
            let mut names = names.clone();
            names.push(json!("null"));
            Some(Value::Array(names))
        }
        _ => None,
    };
    if let Some(with_null) = with_null {
        map.insert("type".into(), with_null);
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    Ok(Value::Object(map))
}

/// A `dependencies` entry as a schema (a list of names is a `required`).
fn as_schema(dependency: Value) -> Value {
    match dependency {
        Value::Array(names) => json!({ "required": names }),
        schema => schema,
    }
}

/// The schema that both `base` and `outer` (translated subset schemas) describe:
/// their keywords merged, `outer`'s annotations winning. `Err` names a keyword whose
/// two values cannot be combined into one.
fn conjoin(base: Value, outer: Value) -> Result<Value, String> {
    match (base, outer) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => Ok(Value::Bool(false)),
        (Value::Bool(true), other) | (other, Value::Bool(true)) => Ok(other),
        (Value::Object(mut base), Value::Object(outer)) => {
            for (keyword, value) in outer {
                merge_keyword(&mut base, keyword, value)?;
            }
            Ok(Value::Object(base))
        }
        _ => Err(String::new()),
    }
}

fn merge_keyword(
    base: &mut Map<String, Value>,
    keyword: String,
    value: Value,
) -> Result<(), String> {
    let Some(existing) = base.get_mut(&keyword) else {
        let coupled = COUPLED
            .iter()
            .find(|group| group.contains(&keyword.as_str()))
            .is_some_and(|group| group.iter().any(|other| base.contains_key(*other)));
        if coupled {
            return Err(keyword);
        }
        base.insert(keyword, value);
        return Ok(());
    };
    if *existing == value {
        return Ok(());
    }
    let merged = match keyword.as_str() {
        name if ANNOTATIONS.contains(&name) => Some(value),
        "type" => intersect_types(existing, &value),
        "required" => match (&*existing, &value) {
            (Value::Array(first), Value::Array(second)) => {
                let mut names = first.clone();
                names.extend(second.iter().filter(|n| !first.contains(n)).cloned());
                Some(Value::Array(names))
            }
            _ => None,
        },
        "enum" => match (&*existing, &value) {
            (Value::Array(first), Value::Array(second)) => {
                let common: Vec<Value> = first
                    .iter()
                    .filter(|v| second.contains(v))
                    .cloned()
                    .collect();
                (!common.is_empty()).then_some(Value::Array(common))
            }
            _ => None,
        },
        _ => None,
    };
    match merged {
        Some(merged) => {
            *existing = merged;
            Ok(())
        }
        None => Err(keyword),
    }
}

fn type_names(value: &Value) -> Option<Vec<&str>> {
    match value {
        Value::String(name) => Some(vec![name.as_str()]),
        Value::Array(names) => names.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

/// The types both `type` values allow (`integer` is a `number`); `None` if none.
fn intersect_types(first: &Value, second: &Value) -> Option<Value> {
    let first = type_names(first)?;
    let second = type_names(second)?;
    let mut common: Vec<&str> = Vec::new();
    for name in first {
        let kept = if second.contains(&name) {
            Some(name)
        } else if (name == "integer" && second.contains(&"number"))
            || (name == "number" && second.contains(&"integer"))
        {
            Some("integer")
        } else {
            None
        };
        if let Some(kept) = kept
            && !common.contains(&kept)
        {
            common.push(kept);
        }
    }
    match common.as_slice() {
        [] => None,
        [only] => Some(json!(only)),
        many => Some(json!(many)),
    }
}

fn sibling_conflict(pointer: &str, keyword: &str, conflicting: &str) -> Untranslatable {
    let reason = if conflicting.is_empty() {
        format!("the keywords next to `{keyword}` cannot be merged with it")
    } else {
        format!(
            "`{conflicting}` next to `{keyword}` conflicts with `{conflicting}` inside it; both cannot be merged into one schema"
        )
    };
    Untranslatable::new(&child(pointer, keyword), keyword, reason)
}

/// `pointer` extended by one (escaped) segment.
fn child(pointer: &str, segment: &str) -> String {
    format!(
        "{pointer}/{}",
        segment.replace('~', "~0").replace('/', "~1")
    )
}

/// Decodes `%XX` escapes of a URI fragment.
fn percent_decode(fragment: &str) -> Option<String> {
    if !fragment.contains('%') {
        return Some(fragment.to_owned());
    }
    let bytes = fragment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let hex = fragment.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(byte);
            i += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// Counts bytes written, to size values without keeping their serialization.
struct ByteCount(usize);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Size of `value` serialized compactly.
fn json_size(value: &Value) -> usize {
    let mut count = ByteCount(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Translates `schema`, checks the result is in the subset, returns it.
    fn ok(schema: Value) -> Value {
        let translation =
            translate_schema(&schema).unwrap_or_else(|e| panic!("untranslatable: {e}\n{schema:#}"));
        assert_eq!(check_schema_subset(&translation.schema), Ok(()));
        translation.schema
    }

    fn err(schema: Value) -> Untranslatable {
        match translate_schema(&schema) {
            Ok(t) => panic!("translated, expected an error: {:#}", t.schema),
            Err(e) => e,
        }
    }

    /// Wraps `property` as the only property of an object root.
    fn prop(property: Value) -> Value {
        json!({"type": "object", "properties": {"p": property}})
    }

    /// The translation of `property` (see [`prop`]).
    fn prop_ok(property: Value) -> Value {
        ok(prop(property))["properties"]["p"].clone()
    }

    fn prop_err(property: Value) -> (String, String) {
        let e = err(prop(property));
        (e.pointer, e.keyword)
    }

    #[test]
    fn pydantic_schema_translates_exactly() {
        let input = json!({"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"Address":{"type":"object","title":"Address","properties":{"city":{"type":"string"},"zip":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null}},"required":["city"]}},"properties":{"name":{"type":"string","title":"Name"},"kind":{"const":"person"},"address":{"$ref":"#/$defs/Address"},"age":{"anyOf":[{"type":"integer","minimum":0},{"type":"null"}]}},"required":["name","kind","address"]});
        let translation = translate_schema(&input).unwrap();
        assert_eq!(translation.dialect, Dialect::Draft2020_12);
        assert_eq!(
            translation.schema,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"enum": ["person"]},
                    "address": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "zip": {"type": ["string", "null"], "default": null}
                        },
                        "required": ["city"]
                    },
                    "age": {"type": ["integer", "null"], "minimum": 0}
                },
                "required": ["name", "kind", "address"]
            })
        );
        assert_eq!(check_schema_subset(&translation.schema), Ok(()));
    }

    #[test]
    fn one_of_objects_fails_at_its_pointer() {
        let e = err(
            json!({"type":"object","properties":{"shape":{"oneOf":[{"type":"object","properties":{"r":{"type":"number"}},"required":["r"]},{"type":"object","properties":{"w":{"type":"number"}},"required":["w"]}]}}}),
        );
        assert_eq!(e.pointer, "/properties/shape/oneOf");
        assert_eq!(e.keyword, "oneOf");
        assert_eq!(
            e.to_string(),
            "/properties/shape/oneOf: `oneOf` cannot be expressed in the catalog's schema subset"
        );
    }

    #[test]
    fn dialects_are_detected_from_schema() {
        let dialect = |uri: Value| {
            let mut schema = json!({"type": "object"});
            if !uri.is_null() {
                schema["$schema"] = uri;
            }
            translate_schema(&schema).map(|t| t.dialect)
        };
        assert_eq!(dialect(Value::Null), Ok(Dialect::Draft2020_12));
        for uri in [
            "http://json-schema.org/draft-07/schema#",
            "http://json-schema.org/draft-07/schema",
            "https://json-schema.org/draft-07/schema#",
        ] {
            assert_eq!(dialect(json!(uri)), Ok(Dialect::Draft7), "{uri}");
        }
        assert_eq!(
            dialect(json!("https://json-schema.org/draft/2019-09/schema")),
            Ok(Dialect::Draft2019_09)
        );
        assert_eq!(
            dialect(json!("https://json-schema.org/draft/2020-12/schema#")),
            Ok(Dialect::Draft2020_12)
        );
        for unsupported in [
            json!("http://json-schema.org/draft-04/schema#"),
            json!("https://example.com/my-dialect"),
            json!(7),
        ] {
            let e = dialect(unsupported).unwrap_err();
            assert_eq!(
                (e.pointer.as_str(), e.keyword.as_str()),
                ("/$schema", "$schema")
            );
        }
    }

    #[test]
    fn a_draft7_subset_schema_comes_out_equal_minus_titles() {
        let original = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "title": "Args",
            "description": "Arguments.",
            "properties": {
                "title": {"type": "string", "title": "Title", "minLength": 1, "maxLength": 80},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "uniqueItems": true, "maxItems": 3},
                "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "boolean"}], "additionalItems": false},
                "limit": {"type": ["integer", "null"], "exclusiveMinimum": 0, "maximum": 100, "default": 10},
                "when": {"type": "string", "format": "date-time", "pattern": "^2", "examples": ["2024-01-01T00:00:00Z"]},
                "meta": {"type": "object", "additionalProperties": {"type": "number", "multipleOf": 0.5}, "propertyNames": {"maxLength": 8}, "minProperties": 1},
                "any": true,
                "card": {"type": "object", "properties": {"number": {"type": "string"}, "cvc": {"type": "string"}}, "dependencies": {"number": ["cvc"], "cvc": {"required": ["number"]}}},
                "list": {"type": "array", "contains": {"type": "number"}, "readOnly": true}
            },
            "required": ["title"],
            "additionalProperties": false
        });
        let translation = translate_schema(&original).unwrap();
        assert_eq!(translation.dialect, Dialect::Draft7);
        let mut expected = original.clone();
        let map = expected.as_object_mut().unwrap();
        map.remove("$schema");
        map.remove("title");
        expected["properties"]["title"]
            .as_object_mut()
            .unwrap()
            .remove("title");
        assert_eq!(translation.schema, expected);
    }

    #[test]
    fn titles_are_dropped_everywhere_but_a_property_named_title_stays() {
        let schema = ok(json!({
            "title": "Root",
            "type": "object",
            "$comment": "internal",
            "properties": {
                "title": {"title": "T", "type": "array", "items": {"title": "Item", "type": "string"}},
                "d": {"$ref": "#/$defs/D"}
            },
            "$defs": {"D": {"title": "D", "type": "object", "properties": {"x": {"title": "X", "type": "integer"}}}}
        }));
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "array", "items": {"type": "string"}},
                    "d": {"type": "object", "properties": {"x": {"type": "integer"}}}
                }
            })
        );
    }

    #[test]
    fn nullable_unions_collapse_in_either_order_for_any_of_and_one_of() {
        for keyword in ["anyOf", "oneOf"] {
            assert_eq!(
                prop_ok(json!({keyword: [{"type": "null"}, {"type": "string", "maxLength": 3}]})),
                json!({"type": ["string", "null"], "maxLength": 3}),
                "{keyword}"
            );
            assert_eq!(
                prop_ok(json!({keyword: [{"type": "number"}, {"type": "null", "title": "None"}]})),
                json!({"type": ["number", "null"]}),
                "{keyword}"
            );
        }
        // Other null forms, and a type array.
        assert_eq!(
            prop_ok(json!({"anyOf": [{"const": null}, {"type": ["string", "integer"]}]})),
            json!({"type": ["string", "integer", "null"]})
        );
        assert_eq!(
            prop_ok(json!({"oneOf": [{"type": "boolean"}, {"enum": [null]}]})),
            json!({"type": ["boolean", "null"]})
        );
    }

    #[test]
    fn union_siblings_are_merged_and_win_for_annotations() {
        assert_eq!(
            prop_ok(json!({
                "anyOf": [{"type": "string", "description": "inner"}, {"type": "null"}],
                "description": "outer",
                "default": null,
                "title": "Zip"
            })),
            json!({"type": ["string", "null"], "description": "outer", "default": null})
        );
        // A validation sibling that conflicts cannot be merged.
        assert_eq!(
            prop_err(json!({
                "anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}],
                "maxLength": 5
            })),
            ("/properties/p/anyOf".into(), "anyOf".into())
        );
        // Types intersect.
        assert_eq!(
            prop_ok(
                json!({"type": ["number", "null"], "anyOf": [{"type": "integer"}, {"type": "null"}]})
            ),
            json!({"type": ["integer", "null"]})
        );
    }

    #[test]
    fn nullable_enums_and_consts_get_null_in_the_enum() {
        assert_eq!(
            prop_ok(json!({"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]})),
            json!({"enum": ["a", "b", null]})
        );
        assert_eq!(
            prop_ok(json!({"anyOf": [{"const": "a"}, {"type": "null"}]})),
            json!({"enum": ["a", null]})
        );
        assert_eq!(
            prop_ok(json!({"oneOf": [{"type": "null"}, {"type": "string", "enum": ["x"]}]})),
            json!({"type": ["string", "null"], "enum": ["x", null]})
        );
    }

    #[test]
    fn a_branch_that_accepts_null_already() {
        // anyOf adds nothing...
        assert_eq!(
            prop_ok(json!({"anyOf": [{"minimum": 1}, {"type": "null"}]})),
            json!({"minimum": 1})
        );
        assert_eq!(
            prop_ok(json!({"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]})),
            json!({"type": ["string", "null"]})
        );
        // ...but oneOf would reject null, which the subset cannot say.
        assert_eq!(
            prop_err(json!({"oneOf": [{"type": ["string", "null"]}, {"type": "null"}]})),
            ("/properties/p/oneOf".into(), "oneOf".into())
        );
        assert_eq!(
            prop_err(json!({"oneOf": [{"enum": ["a", null]}, {"type": "null"}]})),
            ("/properties/p/oneOf".into(), "oneOf".into())
        );
    }

    #[test]
    fn real_unions_and_other_combinators_fail_with_their_pointer() {
        let cases = [
            (
                json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
                "anyOf",
            ),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
                "anyOf",
            ),
            (json!({"anyOf": []}), "anyOf"),
            (
                json!({"allOf": [{"type": "string"}, {"maxLength": 2}]}),
                "allOf",
            ),
            (
                json!({"allOf": [{"type": "null"}, {"type": "null"}]}),
                "allOf",
            ),
            (json!({"not": {"type": "string"}}), "not"),
            (
                json!({"if": {"type": "string"}, "then": {"maxLength": 2}}),
                "if",
            ),
            (json!({"then": {"maxLength": 2}}), "then"),
            (json!({"else": {"maxLength": 2}}), "else"),
            (
                json!({"type": "object", "patternProperties": {"^x": {}}}),
                "patternProperties",
            ),
        ];
        for (property, keyword) in cases {
            let e = err(
                json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": property}}}}),
            );
            assert_eq!(e.pointer, format!("/properties/a/properties/b/{keyword}"));
            assert_eq!(e.keyword, keyword);
        }
    }

    #[test]
    fn single_branch_combinators_are_their_branch() {
        // The pydantic v1 idiom for a described reference.
        let schema = ok(json!({
            "type": "object",
            "properties": {"a": {"description": "The A.", "allOf": [{"$ref": "#/definitions/A"}]}},
            "definitions": {"A": {"type": "string", "description": "An A.", "enum": ["x", "y"]}}
        }));
        assert_eq!(
            schema["properties"]["a"],
            json!({"type": "string", "description": "The A.", "enum": ["x", "y"]})
        );
        assert_eq!(
            prop_ok(json!({"oneOf": [{"type": "integer"}]})),
            json!({"type": "integer"})
        );
    }

    #[test]
    fn optional_reference_to_an_object_collapses() {
        let schema = ok(json!({
            "type": "object",
            "properties": {"addr": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}], "default": null}},
            "$defs": {"A": {"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]}}
        }));
        assert_eq!(
            schema["properties"]["addr"],
            json!({"type": ["object", "null"], "properties": {"c": {"type": "string"}}, "required": ["c"], "default": null})
        );
    }

    #[test]
    fn local_refs_of_every_form_are_inlined_and_containers_dropped() {
        let integer = json!({"type": "integer"});
        // Each property schema (beside `a`, a ref to `A`) and what it becomes.
        let forms = [
            (json!({"$ref": "#/$defs/A"}), integer.clone()),
            (
                json!({"$ref": "#/definitions/B"}),
                json!({"type": "string"}),
            ),
            (json!({"$ref": "#/properties/a"}), integer.clone()),
            (
                json!({"$ref": "#/$defs/with%20space"}),
                json!({"type": "boolean"}),
            ),
            (json!({"$ref": "#/$defs/sl~1ash"}), json!({"type": "null"})),
            (
                json!({"type": "array", "items": {"$ref": "#/$defs/A"}}),
                json!({"type": "array", "items": integer}),
            ),
        ];
        for (form, inlined) in forms {
            let schema = ok(json!({
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A"}, "x": form},
                "$defs": {"A": integer, "with space": {"type": "boolean"}, "sl/ash": {"type": "null"}},
                "definitions": {"B": {"type": "string"}}
            }));
            let expected = json!({"type": "object", "properties": {"a": integer, "x": inlined}});
            assert_eq!(schema, expected, "{form}");
        }
    }

    #[test]
    fn a_root_ref_is_inlined() {
        let translation = translate_schema(&json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$ref": "#/definitions/Args",
            "definitions": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false}}
        }))
        .unwrap();
        assert_eq!(
            translation.schema,
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false})
        );
    }

    #[test]
    fn cycles_are_recursive() {
        let direct = err(json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
        }));
        assert_eq!(direct.keyword, "$ref");
        assert_eq!(direct.reason, "recursive");
        assert_eq!(direct.pointer, "/$defs/Node/properties/children/items/$ref");

        let mutual = err(json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}}, "B": {"type": "array", "items": {"$ref": "#/$defs/A"}}}
        }));
        assert_eq!(
            (mutual.keyword.as_str(), mutual.reason.as_str()),
            ("$ref", "recursive")
        );
        assert_eq!(mutual.pointer, "/$defs/B/items/$ref");

        let root = err(json!({"type": "object", "properties": {"self": {"$ref": "#"}}}));
        assert_eq!(root.pointer, "/properties/self/$ref");
        assert_eq!(root.reason, "recursive");
    }

    #[test]
    fn remote_anchor_dangling_and_malformed_refs_fail() {
        for reference in [
            json!("https://example.com/schema.json#/$defs/A"),
            json!("other.json"),
            json!("#A"),
            json!("#/$defs/Missing"),
            json!("#/$defs/%zz"),
            json!(3),
        ] {
            let e = err(
                json!({"type": "object", "properties": {"a": {"$ref": reference}}, "$defs": {"A": {}}}),
            );
            assert_eq!(e.pointer, "/properties/a/$ref", "{reference}");
            assert_eq!(e.keyword, "$ref");
        }
        let remote = err(prop(json!({"$ref": "https://evil.example/s.json"})));
        assert!(remote.reason.contains("never resolved"), "{remote}");
    }

    #[test]
    fn ref_siblings_apply_in_2020_12_and_are_merged() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/S", "description": "Outer.", "maxLength": 5, "type": "string"},
            },
            "$defs": {"S": {"type": "string", "description": "Inner.", "minLength": 1}}
        });
        assert_eq!(
            ok(schema)["properties"]["a"],
            json!({"type": "string", "description": "Outer.", "minLength": 1, "maxLength": 5})
        );
        // Both say `minLength`, differently: both would apply, one schema cannot say so.
        let e = err(json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/S", "minLength": 2}},
            "$defs": {"S": {"type": "string", "minLength": 1}}
        }));
        assert_eq!(
            (e.pointer.as_str(), e.keyword.as_str()),
            ("/properties/a/$ref", "$ref")
        );
        // `properties` next to a target's `additionalProperties` would change its meaning.
        let e = err(json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/O", "properties": {"y": {}}}},
            "$defs": {"O": {"type": "object", "additionalProperties": false}}
        }));
        assert_eq!(e.pointer, "/properties/a/$ref");
        // `required` lists add up.
        let merged = ok(json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/O", "required": ["y"]}},
            "$defs": {"O": {"type": "object", "properties": {"x": {}, "y": {}}, "required": ["x"]}}
        }));
        assert_eq!(merged["properties"]["a"]["required"], json!(["x", "y"]));
    }

    #[test]
    fn ref_siblings_are_ignored_in_draft7_except_annotations() {
        let schema = ok(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/S", "description": "Outer.", "maxLength": 1, "anyOf": [{}, {}]}},
            "definitions": {"S": {"type": "string"}}
        }));
        assert_eq!(
            schema["properties"]["a"],
            json!({"type": "string", "description": "Outer."})
        );
    }

    #[test]
    fn a_ref_bomb_is_refused() {
        let mut defs = Map::new();
        defs.insert(
            "L0".into(),
            json!({"type": "string", "description": "x".repeat(50)}),
        );
        for level in 1..=8 {
            let mut properties = Map::new();
            for i in 0..10 {
                properties.insert(
                    format!("p{i}"),
                    json!({"$ref": format!("#/$defs/L{}", level - 1)}),
                );
            }
            defs.insert(
                format!("L{level}"),
                json!({"type": "object", "properties": properties}),
            );
        }
        let e = err(
            json!({"type": "object", "properties": {"boom": {"$ref": "#/$defs/L8"}}, "$defs": defs}),
        );
        assert_eq!(e.keyword, "$ref");
        assert!(e.reason.contains("more than"), "{e}");

        // Moderate reuse of a definition is fine.
        let mut properties = Map::new();
        for i in 0..20 {
            properties.insert(format!("p{i}"), json!({"$ref": "#/$defs/L0"}));
        }
        let schema = json!({"type": "object", "properties": properties, "$defs": {"L0": {"type": "string", "description": "x".repeat(200)}}});
        assert_eq!(ok(schema)["properties"]["p19"]["type"], "string");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut schema = json!({"type": "string"});
        for _ in 0..70 {
            schema = json!({"type": "array", "items": schema});
        }
        let e = err(json!({"type": "object", "properties": {"deep": schema}}));
        assert_eq!(e.keyword, "items");
        assert!(e.reason.contains("deeper than 64"), "{e}");
        assert!(e.pointer.starts_with("/properties/deep/items/items"));

        // A long chain of references counts too.
        let mut defs = Map::new();
        for i in 0..70 {
            defs.insert(
                format!("D{i}"),
                json!({"$ref": format!("#/$defs/D{}", i + 1)}),
            );
        }
        defs.insert("D70".into(), json!({"type": "string"}));
        let e = err(
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/D0"}}, "$defs": defs}),
        );
        assert!(e.reason.contains("deeper than 64"), "{e}");
        assert_eq!(e.keyword, "$ref");
    }

    #[test]
    fn const_becomes_enum() {
        assert_eq!(prop_ok(json!({"const": 3})), json!({"enum": [3]}));
        assert_eq!(
            prop_ok(json!({"const": {"k": [1]}, "description": "d"})),
            json!({"enum": [{"k": [1]}], "description": "d"})
        );
        assert_eq!(
            prop_ok(json!({"const": "a", "enum": ["a", "b"]})),
            json!({"enum": ["a"]})
        );
        assert_eq!(
            prop_err(json!({"const": "c", "enum": ["a", "b"]})),
            ("/properties/p/const".into(), "const".into())
        );
    }

    #[test]
    fn prefix_items_become_draft7_tuples() {
        assert_eq!(
            prop_ok(json!({"type": "array", "prefixItems": [{"type": "string"}, {"const": 1}]})),
            json!({"type": "array", "items": [{"type": "string"}, {"enum": [1]}]})
        );
        assert_eq!(
            prop_ok(json!({"type": "array", "prefixItems": [{"type": "string"}], "items": false})),
            json!({"type": "array", "items": [{"type": "string"}], "additionalItems": false})
        );
        assert_eq!(
            prop_ok(
                json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer", "title": "N"}})
            ),
            json!({"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}})
        );
        // A single 2020-12 `items` stays.
        assert_eq!(
            prop_ok(json!({"type": "array", "items": {"type": "integer"}})),
            json!({"type": "array", "items": {"type": "integer"}})
        );
        assert_eq!(
            prop_err(json!({"prefixItems": [{}], "additionalItems": false})),
            (
                "/properties/p/additionalItems".into(),
                "additionalItems".into()
            )
        );
        assert_eq!(
            prop_err(json!({"prefixItems": [{}], "items": [{}]})),
            ("/properties/p/items".into(), "items".into())
        );
        assert_eq!(
            prop_err(json!({"prefixItems": [{"not": {}}]})),
            ("/properties/p/prefixItems/0/not".into(), "not".into())
        );
    }

    #[test]
    fn prefix_items_is_ignored_before_2020_12_where_array_items_is_the_tuple() {
        let schema = ok(json!({
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "type": "object",
            "properties": {
                "ignored": {"type": "array", "prefixItems": [{"type": "string"}]},
                "pair": {"type": "array", "items": [{"type": "string"}, {"const": 2}], "additionalItems": false}
            }
        }));
        assert_eq!(
            schema["properties"],
            json!({
                "ignored": {"type": "array"},
                "pair": {"type": "array", "items": [{"type": "string"}, {"enum": [2]}], "additionalItems": false}
            })
        );
    }

    #[test]
    fn dependent_keywords_become_dependencies() {
        assert_eq!(
            prop_ok(json!({
                "type": "object",
                "dependentRequired": {"a": ["b", "c"]},
                "dependentSchemas": {"d": {"title": "D", "required": ["e"], "properties": {"e": {"const": 1}}}}
            })),
            json!({
                "type": "object",
                "dependencies": {"a": ["b", "c"], "d": {"required": ["e"], "properties": {"e": {"enum": [1]}}}}
            })
        );
        // The same property in both: one schema requiring both.
        assert_eq!(
            prop_ok(
                json!({"dependentRequired": {"a": ["b"]}, "dependentSchemas": {"a": {"required": ["c"], "maxProperties": 3}}})
            ),
            json!({"dependencies": {"a": {"required": ["c", "b"], "maxProperties": 3}}})
        );
        assert_eq!(
            prop_err(json!({"dependentRequired": {"a": "b"}})),
            (
                "/properties/p/dependentRequired/a".into(),
                "dependentRequired".into()
            )
        );
        assert_eq!(
            prop_err(
                json!({"dependencies": {"a": {"maxProperties": 1}}, "dependentSchemas": {"a": {"maxProperties": 2}}})
            ),
            (
                "/properties/p/dependentSchemas/a".into(),
                "dependentSchemas".into()
            )
        );
    }

    #[test]
    fn unevaluated_properties_false_is_additional_properties_false() {
        assert_eq!(
            prop_ok(
                json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false})
            ),
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false})
        );
        // Sees the properties of a `$ref` target.
        let schema = ok(json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/Base", "unevaluatedProperties": false}},
            "$defs": {"Base": {"type": "object", "properties": {"x": {"type": "string"}}}}
        }));
        assert_eq!(
            schema["properties"]["p"],
            json!({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": false})
        );
        // With `additionalProperties`, everything is evaluated: no-op.
        assert_eq!(
            prop_ok(
                json!({"additionalProperties": {"type": "string"}, "unevaluatedProperties": false})
            ),
            json!({"additionalProperties": {"type": "string"}})
        );
        assert_eq!(prop_ok(json!({"unevaluatedProperties": true})), json!({}));
        // At the root too.
        assert_eq!(
            ok(json!({"type": "object", "unevaluatedProperties": false})),
            json!({"type": "object", "additionalProperties": false})
        );
    }

    #[test]
    fn other_unevaluated_and_dynamic_keywords_fail() {
        for (property, keyword) in [
            (
                json!({"unevaluatedProperties": {"type": "string"}}),
                "unevaluatedProperties",
            ),
            (
                json!({"unevaluatedProperties": false, "dependentSchemas": {"a": {"properties": {"b": {}}}}}),
                "unevaluatedProperties",
            ),
            (json!({"unevaluatedItems": false}), "unevaluatedItems"),
            (json!({"$anchor": "x"}), "$anchor"),
            (json!({"$dynamicRef": "#meta"}), "$dynamicRef"),
            (json!({"$dynamicAnchor": "meta"}), "$dynamicAnchor"),
            (json!({"$recursiveRef": "#"}), "$recursiveRef"),
            (
                json!({"type": "array", "contains": {}, "minContains": 2}),
                "minContains",
            ),
            (json!({"$id": "https://example.com/inner"}), "$id"),
        ] {
            assert_eq!(
                prop_err(property),
                (format!("/properties/p/{keyword}"), keyword.to_string())
            );
        }
    }

    #[test]
    fn newer_keywords_in_a_draft7_schema_are_ignored_like_draft7_does() {
        let schema = ok(json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "array", "prefixItems": [{}], "minContains": 1, "unevaluatedItems": false, "$anchor": "a"}},
            "dependentRequired": {"a": ["b"]},
            "unevaluatedProperties": false
        }));
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"a": {"type": "array"}}})
        );
    }

    #[test]
    fn exclusive_bounds_keep_the_number_form_only() {
        assert_eq!(
            prop_ok(json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5})),
            json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5})
        );
        for keyword in ["exclusiveMinimum", "exclusiveMaximum"] {
            let e = err(prop(json!({"type": "number", "minimum": 0, keyword: true})));
            assert_eq!(e.pointer, format!("/properties/p/{keyword}"));
            assert!(e.reason.contains("draft-04"), "{e}");
        }
    }

    #[test]
    fn the_root_must_be_an_object_schema() {
        assert_eq!(
            ok(json!({"properties": {"a": {"type": "string"}}})),
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        );
        assert_eq!(ok(json!({"type": ["object"]})), json!({"type": "object"}));
        let e = err(json!({"type": "string"}));
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("/type", "type"));
        let e = err(json!({"type": ["object", "null"], "properties": {}}));
        assert_eq!(e.pointer, "/type");
        let e = err(json!({"description": "nothing"}));
        assert_eq!((e.pointer.as_str(), e.keyword.as_str()), ("", "type"));
        assert_eq!(err(json!(true)).pointer, "");
        assert_eq!(err(json!("object")).pointer, "");
    }

    #[test]
    fn malformed_keywords_fail_instead_of_passing_through() {
        assert_eq!(
            prop_err(json!({"type": 3})),
            ("/properties/p/type".into(), "type".into())
        );
        assert_eq!(
            prop_err(json!({"enum": "a"})),
            ("/properties/p/enum".into(), "enum".into())
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": 5}})).pointer,
            "/properties/a"
        );
        assert_eq!(
            err(json!({"type": "object", "properties": []})).pointer,
            "/properties"
        );
    }

    #[test]
    fn boolean_subschemas_and_unknown_keywords_pass_through() {
        assert_eq!(
            ok(
                json!({"type": "object", "properties": {"a": true, "b": false}, "additionalProperties": false, "x-extension": {"k": 1}})
            ),
            json!({"type": "object", "properties": {"a": true, "b": false}, "additionalProperties": false, "x-extension": {"k": 1}})
        );
    }

    #[test]
    fn error_pointers_inside_definitions_point_into_the_definition() {
        let e = err(json!({
            "type": "object",
            "properties": {"shape": {"$ref": "#/$defs/Shape"}},
            "$defs": {"Shape": {"oneOf": [{"type": "string"}, {"type": "number"}]}}
        }));
        assert_eq!(e.pointer, "/$defs/Shape/oneOf");
        // An unreferenced definition is dropped, whatever it holds.
        ok(json!({"type": "object", "$defs": {"Unused": {"not": {}}}}));
    }
}
