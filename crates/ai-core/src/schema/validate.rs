//! This crate's JSON Schema validator: draft-07 semantics, plus the 2019-09/2020-12
//! spellings (`$defs`, `prefixItems`, `dependentRequired`, `dependentSchemas`)
//! that derived schemas and MCP servers use.
//!
//! A schema is compiled once into a graph of checks (patterns compiled and cached,
//! `$ref`s resolved to nodes, so recursive schemas are cycles in the graph) and then
//! applied to borrowed values. Only local `$ref`s (`#`, `#/json/pointer`) resolve,
//! always against the root; `$ref` beside other keywords applies them all (as in
//! 2019-09). `format` is an assertion, on strings only, for `date-time`, `date`,
//! `time`, `email`, `hostname`, `ipv4`, `ipv6`, `uri`, `uri-reference`, `uuid` and
//! `regex` (see `Format` for each rule); any other format name (such as
//! schemars' `uint32` or `double`) is an annotation and checks nothing, like every
//! other annotation and every unknown keyword. Assertions this validator does not
//! implement (`unevaluatedProperties`, `unevaluatedItems`, `$dynamicRef`,
//! `$recursiveRef`, `minContains`, `maxContains`) make compilation fail rather than
//! pass values unchecked, and so do malformed keyword values and `$ref` cycles that
//! never descend into the value.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::cmp::Ordering;
use std::collections::HashMap;

use regex_lite::Regex;
use serde_json::{Map, Number, Value};

use super::{SchemaViolation, escape, resolve_local_ref};

/// Index of a compiled (sub)schema in [`Validator::nodes`]; the root is node 0.
type Id = usize;

/// How many schemas may apply inside one another before validation stops and
/// reports a mismatch (a backstop for very deep values; `$ref` cycles that do not
/// descend into the value are rejected when compiling).
const MAX_DEPTH: usize = 512;

/// Assertions this validator does not enforce; a schema using one does not compile.
const UNSUPPORTED: &[&str] = &[
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
    "minContains",
    "maxContains",
];

/// A compiled schema.
#[derive(Debug, Clone)]
pub(crate) struct Validator {
    nodes: Vec<Vec<Check>>,
    regexes: Vec<Regex>,
}

/// One place where a value differs from the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// JSON pointer into the value (`""` for the value itself).
    pub(crate) path: String,
    /// What differs, by keyword; never the value.
    pub(crate) detail: String,
}

/// A JSON type as `type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

/// What a size keyword measures.
#[derive(Debug, Clone, Copy)]
enum Size {
    Properties,
    Items,
    Length,
}

/// A `format` this validator asserts on strings; other names are annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// RFC 3339 `date-time`: a `full-date`, `T`, then a `full-time`.
    DateTime,
    /// RFC 3339 `full-date`: `YYYY-MM-DD`, a day that exists in that month.
    Date,
    /// RFC 3339 `full-time`: `HH:MM:SS[.frac]` and `Z` or an offset.
    Time,
    /// A mailbox in RFC 5321's shape: `local@domain`.
    Email,
    /// An RFC 1123 host name.
    Hostname,
    /// A dotted quad without leading zeros.
    Ipv4,
    /// An IPv6 address as `core::net::Ipv6Addr` reads it.
    Ipv6,
    /// An absolute URI: a scheme, `:`, then no spaces or control characters.
    Uri,
    /// A URI reference: no spaces or control characters.
    UriReference,
    /// `8-4-4-4-12` hexadecimal digits.
    Uuid,
    /// A regular expression this validator's engine compiles.
    Regex,
}

/// What a present property requires (`dependencies` and its two successors).
#[derive(Debug, Clone)]
enum Dependency {
    Names(Vec<String>),
    Schema(Id),
}

/// One compiled assertion or applicator.
#[derive(Debug, Clone)]
enum Check {
    False,
    Type(Vec<Kind>),
    Enum(Vec<Value>),
    Const(Value),
    Required(Vec<String>),
    Properties(Vec<(String, Id)>),
    PatternProperties(Vec<(usize, Id)>),
    /// `schema: None` is `additionalProperties: false`.
    Additional {
        names: Vec<String>,
        patterns: Vec<usize>,
        schema: Option<Id>,
    },
    PropertyNames(Id),
    Dependencies(Vec<(String, Dependency)>),
    Items {
        prefix: Vec<Id>,
        rest: Option<Id>,
    },
    Contains(Id),
    UniqueItems,
    Size {
        keyword: &'static str,
        size: Size,
        min: bool,
        limit: u64,
    },
    Pattern(usize),
    Format(Format),
    Bound {
        keyword: &'static str,
        limit: Number,
        accept: fn(Ordering) -> bool,
    },
    MultipleOf(Number),
    AllOf(Vec<Id>),
    AnyOf(Vec<Id>),
    OneOf(Vec<Id>),
    Not(Id),
    If {
        cond: Id,
        then: Option<Id>,
        otherwise: Option<Id>,
    },
    Ref(Id),
}

fn violation(pointer: &str, message: impl Into<String>) -> SchemaViolation {
    SchemaViolation {
        pointer: pointer.to_owned(),
        message: message.into(),
    }
}

fn child(pointer: &str, segment: &str) -> String {
    format!("{pointer}/{}", escape(segment))
}

/// Compiles `schema` (see the module docs for what is enforced).
pub(crate) fn compile(schema: &Value) -> Result<Validator, SchemaViolation> {
    let mut compiler = Compiler {
        root: schema,
        nodes: Vec::new(),
        pointers: Vec::new(),
        index: HashMap::new(),
        queue: Vec::new(),
        regexes: Vec::new(),
        regex_index: HashMap::new(),
    };
    compiler.reserve(String::new());
    while let Some(id) = compiler.queue.pop() {
        let pointer = compiler.pointers[id].clone();
        let node = schema
            .pointer(&pointer)
            .ok_or_else(|| violation(&pointer, "points at nothing inside the schema"))?;
        compiler.nodes[id] = compiler.build(node, &pointer)?;
    }
    check_cycles(&compiler.nodes, &compiler.pointers)?;
    Ok(Validator {
        nodes: compiler.nodes,
        regexes: compiler.regexes,
    })
}

/// Builds nodes from a work list, so neither deep nesting nor long `$ref` chains
/// recurse while compiling.
struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Vec<Check>>,
    pointers: Vec<String>,
    index: HashMap<String, Id>,
    queue: Vec<Id>,
    regexes: Vec<Regex>,
    regex_index: HashMap<String, usize>,
}

impl Compiler<'_> {
    /// The node for the schema at `pointer`, queued for building if new.
    fn reserve(&mut self, pointer: String) -> Id {
        if let Some(&id) = self.index.get(&pointer) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(Vec::new());
        self.pointers.push(pointer.clone());
        self.index.insert(pointer, id);
        self.queue.push(id);
        id
    }

    fn build(&mut self, schema: &Value, pointer: &str) -> Result<Vec<Check>, SchemaViolation> {
        let map = match schema {
            Value::Bool(true) => return Ok(Vec::new()),
            Value::Bool(false) => return Ok(vec![Check::False]),
            Value::Object(map) => map,
            _ => {
                return Err(violation(
                    pointer,
                    "a schema must be an object or a boolean",
                ));
            }
        };
        let mut checks = Vec::new();
        for (keyword, value) in map {
            if let Some(check) = self.keyword(keyword, value, pointer, map)? {
                checks.push(check);
            }
        }
        if let Some(check) = self.items(map, pointer)? {
            checks.push(check);
        }
        Ok(checks)
    }

    fn keyword(
        &mut self,
        keyword: &str,
        value: &Value,
        pointer: &str,
        map: &Map<String, Value>,
    ) -> Result<Option<Check>, SchemaViolation> {
        let at = child(pointer, keyword);
        let check = match keyword {
            "type" => Check::Type(types(value, &at)?),
            "enum" => Check::Enum(array(value, &at, keyword)?.clone()),
            "const" => Check::Const(value.clone()),
            "required" => Check::Required(names(value, &at, keyword)?),
            "properties" => Check::Properties(self.schema_map(value, &at)?),
            "patternProperties" => Check::PatternProperties(self.pattern_map(value, &at)?),
            "additionalProperties" => self.additional(value, pointer, map)?,
            "propertyNames" => Check::PropertyNames(self.schema(value, &at)?),
            "dependencies" | "dependentRequired" | "dependentSchemas" => {
                Check::Dependencies(self.dependencies(value, &at, keyword)?)
            }
            "contains" => Check::Contains(self.schema(value, &at)?),
            "uniqueItems" => match value {
                Value::Bool(true) => Check::UniqueItems,
                Value::Bool(false) => return Ok(None),
                _ => return Err(violation(&at, "`uniqueItems` must be a boolean")),
            },
            "pattern" => Check::Pattern(self.regex(value, &at)?),
            "format" => return format(value, &at),
            "multipleOf" => Check::MultipleOf(positive(value, &at)?),
            "allOf" => Check::AllOf(self.schema_list(value, &at, keyword)?),
            "anyOf" => Check::AnyOf(self.schema_list(value, &at, keyword)?),
            "oneOf" => Check::OneOf(self.schema_list(value, &at, keyword)?),
            "not" => Check::Not(self.schema(value, &at)?),
            "if" => self.conditional(value, pointer, map)?,
            "$ref" => Check::Ref(self.reference(value, &at)?),
            "definitions" | "$defs" => {
                self.schema_map(value, &at)?;
                return Ok(None);
            }
            _ => return simple(keyword, value, &at),
        };
        Ok(Some(check))
    }

    /// A subschema at `at`, checked to be an object or a boolean.
    fn schema(&mut self, value: &Value, at: &str) -> Result<Id, SchemaViolation> {
        match value {
            Value::Bool(_) | Value::Object(_) => Ok(self.reserve(at.to_owned())),
            _ => Err(violation(at, "must be a schema (an object or a boolean)")),
        }
    }

    fn schema_map(
        &mut self,
        value: &Value,
        at: &str,
    ) -> Result<Vec<(String, Id)>, SchemaViolation> {
        let Value::Object(map) = value else {
            return Err(violation(at, "must be an object of schemas"));
        };
        map.iter()
            .map(|(name, schema)| Ok((name.clone(), self.schema(schema, &child(at, name))?)))
            .collect()
    }

    fn schema_list(
        &mut self,
        value: &Value,
        at: &str,
        keyword: &str,
    ) -> Result<Vec<Id>, SchemaViolation> {
        let list = array(value, at, keyword)?;
        if list.is_empty() && !matches!(keyword, "items" | "prefixItems") {
            return Err(violation(at, format!("`{keyword}` must not be empty")));
        }
        list.iter()
            .enumerate()
            .map(|(i, schema)| self.schema(schema, &format!("{at}/{i}")))
            .collect()
    }

    fn regex(&mut self, value: &Value, at: &str) -> Result<usize, SchemaViolation> {
        let Some(source) = value.as_str() else {
            return Err(violation(at, "a pattern must be a string"));
        };
        self.regex_source(source, at)
    }

    fn regex_source(&mut self, source: &str, at: &str) -> Result<usize, SchemaViolation> {
        if let Some(&i) = self.regex_index.get(source) {
            return Ok(i);
        }
        let regex = Regex::new(source).map_err(|e| {
            violation(
                at,
                format!("not a regular expression this validator supports: {e}"),
            )
        })?;
        self.regexes.push(regex);
        self.regex_index
            .insert(source.to_owned(), self.regexes.len() - 1);
        Ok(self.regexes.len() - 1)
    }

    fn pattern_map(
        &mut self,
        value: &Value,
        at: &str,
    ) -> Result<Vec<(usize, Id)>, SchemaViolation> {
        let Value::Object(map) = value else {
            return Err(violation(at, "must be an object of schemas"));
        };
        map.iter()
            .map(|(source, schema)| {
                let at = child(at, source);
                Ok((self.regex_source(source, &at)?, self.schema(schema, &at)?))
            })
            .collect()
    }

    fn additional(
        &mut self,
        value: &Value,
        pointer: &str,
        map: &Map<String, Value>,
    ) -> Result<Check, SchemaViolation> {
        let names = match map.get("properties") {
            Some(Value::Object(properties)) => properties.keys().cloned().collect(),
            _ => Vec::new(),
        };
        let patterns = match map.get("patternProperties") {
            Some(Value::Object(patterns)) => patterns
                .keys()
                .map(|source| {
                    let at = child(&child(pointer, "patternProperties"), source);
                    self.regex_source(source, &at)
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let schema = match value {
            Value::Bool(false) => None,
            _ => Some(self.schema(value, &child(pointer, "additionalProperties"))?),
        };
        Ok(Check::Additional {
            names,
            patterns,
            schema,
        })
    }

    fn dependencies(
        &mut self,
        value: &Value,
        at: &str,
        keyword: &str,
    ) -> Result<Vec<(String, Dependency)>, SchemaViolation> {
        let Value::Object(map) = value else {
            return Err(violation(at, format!("`{keyword}` must be an object")));
        };
        let mut out = Vec::with_capacity(map.len());
        for (name, dependency) in map {
            let at = child(at, name);
            let dependency = match (keyword, dependency) {
                ("dependentSchemas", schema)
                | ("dependencies", schema @ (Value::Object(_) | Value::Bool(_))) => {
                    Dependency::Schema(self.schema(schema, &at)?)
                }
                (_, list) => Dependency::Names(names(list, &at, keyword)?),
            };
            out.push((name.clone(), dependency));
        }
        Ok(out)
    }

    fn conditional(
        &mut self,
        value: &Value,
        pointer: &str,
        map: &Map<String, Value>,
    ) -> Result<Check, SchemaViolation> {
        let cond = self.schema(value, &child(pointer, "if"))?;
        let mut branch = |keyword: &str| match map.get(keyword) {
            Some(schema) => self.schema(schema, &child(pointer, keyword)).map(Some),
            None => Ok(None),
        };
        let then = branch("then")?;
        let otherwise = branch("else")?;
        Ok(Check::If {
            cond,
            then,
            otherwise,
        })
    }

    fn reference(&mut self, value: &Value, at: &str) -> Result<Id, SchemaViolation> {
        let Some(reference) = value.as_str() else {
            return Err(violation(at, "`$ref` must be a string"));
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(violation(
                at,
                "only local `$ref` (starting with `#`) is supported; remote references are never resolved",
            ));
        };
        if resolve_local_ref(self.root, reference).is_none() {
            return Err(violation(
                at,
                format!("`$ref` `{reference}` points at nothing inside the schema"),
            ));
        }
        Ok(self.reserve(pointer.to_owned()))
    }

    /// `items` (a schema, or an array: the tuple form), `prefixItems`, and what
    /// applies past them (`items` after `prefixItems`, `additionalItems` after an
    /// array `items`).
    fn items(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Option<Check>, SchemaViolation> {
        let (prefix, rest_keyword) = match (map.get("prefixItems"), map.get("items")) {
            (Some(_), Some(Value::Array(_))) => {
                return Err(violation(
                    &child(pointer, "items"),
                    "an array `items` cannot be combined with `prefixItems`",
                ));
            }
            (Some(list), items) => {
                let at = child(pointer, "prefixItems");
                let rest = if items.is_some() {
                    "items"
                } else {
                    "additionalItems"
                };
                (self.schema_list(list, &at, "prefixItems")?, rest)
            }
            (None, Some(list @ Value::Array(_))) => {
                let at = child(pointer, "items");
                (self.schema_list(list, &at, "items")?, "additionalItems")
            }
            (None, Some(_)) => (Vec::new(), "items"),
            (None, None) => return Ok(None),
        };
        let rest = match map.get(rest_keyword) {
            Some(schema) => Some(self.schema(schema, &child(pointer, rest_keyword))?),
            None => None,
        };
        Ok(Some(Check::Items { prefix, rest }))
    }
}

/// Keywords whose value is a number or a count, the unsupported ones, and the rest
/// (annotations and unknown keywords, which check nothing).
fn simple(keyword: &str, value: &Value, at: &str) -> Result<Option<Check>, SchemaViolation> {
    let size = |size, min, keyword| {
        Ok(Some(Check::Size {
            keyword,
            size,
            min,
            limit: count(value, at, keyword)?,
        }))
    };
    let bound = |keyword, accept| {
        Ok(Some(Check::Bound {
            keyword,
            limit: number(value, at, keyword)?,
            accept,
        }))
    };
    match keyword {
        "minProperties" => size(Size::Properties, true, "minProperties"),
        "maxProperties" => size(Size::Properties, false, "maxProperties"),
        "minItems" => size(Size::Items, true, "minItems"),
        "maxItems" => size(Size::Items, false, "maxItems"),
        "minLength" => size(Size::Length, true, "minLength"),
        "maxLength" => size(Size::Length, false, "maxLength"),
        "minimum" => bound("minimum", Ordering::is_ge),
        "maximum" => bound("maximum", Ordering::is_le),
        "exclusiveMinimum" => bound("exclusiveMinimum", Ordering::is_gt),
        "exclusiveMaximum" => bound("exclusiveMaximum", Ordering::is_lt),
        k if UNSUPPORTED.contains(&k) => Err(violation(
            at,
            format!("`{k}` is an assertion this validator does not support"),
        )),
        _ => Ok(None),
    }
}

/// `format`: a check for the formats this validator asserts, nothing for others.
fn format(value: &Value, at: &str) -> Result<Option<Check>, SchemaViolation> {
    let name = value
        .as_str()
        .ok_or_else(|| violation(at, "`format` must be a string"))?;
    Ok(Format::parse(name).map(Check::Format))
}

fn array<'v>(value: &'v Value, at: &str, keyword: &str) -> Result<&'v Vec<Value>, SchemaViolation> {
    value
        .as_array()
        .ok_or_else(|| violation(at, format!("`{keyword}` must be an array")))
}

fn names(value: &Value, at: &str, keyword: &str) -> Result<Vec<String>, SchemaViolation> {
    array(value, at, keyword)?
        .iter()
        .map(|name| {
            name.as_str().map(str::to_owned).ok_or_else(|| {
                violation(
                    at,
                    format!("`{keyword}` must list property names (strings)"),
                )
            })
        })
        .collect()
}

fn types(value: &Value, at: &str) -> Result<Vec<Kind>, SchemaViolation> {
    let parse = |name: &Value| {
        name.as_str().and_then(Kind::parse).ok_or_else(|| {
            violation(at, "`type` must name JSON types (null, boolean, integer, number, string, array, object)")
        })
    };
    match value {
        Value::Array(list) if !list.is_empty() => list.iter().map(parse).collect(),
        Value::Array(_) => Err(violation(at, "`type` must not be an empty array")),
        single => Ok(vec![parse(single)?]),
    }
}

fn number(value: &Value, at: &str, keyword: &str) -> Result<Number, SchemaViolation> {
    match value {
        Value::Number(n) => Ok(n.clone()),
        Value::Bool(_) => Err(violation(
            at,
            format!("the boolean form of `{keyword}` (draft-04) is not supported; use a number"),
        )),
        _ => Err(violation(at, format!("`{keyword}` must be a number"))),
    }
}

fn positive(value: &Value, at: &str) -> Result<Number, SchemaViolation> {
    let n = number(value, at, "multipleOf")?;
    match n.as_f64() {
        Some(f) if f > 0.0 => Ok(n),
        _ => Err(violation(at, "`multipleOf` must be greater than 0")),
    }
}

fn count(value: &Value, at: &str, keyword: &str) -> Result<u64, SchemaViolation> {
    let whole = |f: f64| (f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64).then_some(f as u64);
    value
        .as_u64()
        .or_else(|| value.as_f64().and_then(whole))
        .ok_or_else(|| violation(at, format!("`{keyword}` must be a non-negative integer")))
}

/// The in-place subschemas of a check: those applied to the same value.
fn in_place(check: &Check) -> Vec<Id> {
    match check {
        Check::Ref(id) | Check::Not(id) => vec![*id],
        Check::AllOf(ids) | Check::AnyOf(ids) | Check::OneOf(ids) => ids.clone(),
        Check::If {
            cond,
            then,
            otherwise,
        } => std::iter::once(*cond)
            .chain(*then)
            .chain(*otherwise)
            .collect(),
        Check::Dependencies(deps) => deps
            .iter()
            .filter_map(|(_, d)| match d {
                Dependency::Schema(id) => Some(*id),
                Dependency::Names(_) => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Rejects a cycle of in-place subschemas (such as `{"$ref": "#"}`): validating
/// would apply it to the same value without end.
fn check_cycles(nodes: &[Vec<Check>], pointers: &[String]) -> Result<(), SchemaViolation> {
    let edges: Vec<Vec<Id>> = nodes
        .iter()
        .map(|checks| checks.iter().flat_map(in_place).collect())
        .collect();
    // 0: not seen, 1: on the current path, 2: finished.
    let mut state = vec![0u8; nodes.len()];
    for start in 0..nodes.len() {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        let mut stack = vec![(start, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (node, next) = *top;
            let Some(&target) = edges[node].get(next) else {
                state[node] = 2;
                stack.pop();
                continue;
            };
            top.1 += 1;
            match state[target] {
                0 => {
                    state[target] = 1;
                    stack.push((target, 0));
                }
                1 => return Err(cycle(nodes, pointers, node, target)),
                _ => {}
            }
        }
    }
    Ok(())
}

fn cycle(nodes: &[Vec<Check>], pointers: &[String], from: Id, to: Id) -> SchemaViolation {
    let direct = nodes[from]
        .iter()
        .any(|c| matches!(c, Check::Ref(id) if *id == to));
    let pointer = if direct {
        child(&pointers[from], "$ref")
    } else {
        pointers[from].clone()
    };
    violation(
        &pointer,
        "`$ref`s here lead back to the same schema without descending into the value",
    )
}

impl Kind {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "string" => Self::String,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::String => "string",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    fn matches(self, value: &Value) -> bool {
        match (self, value) {
            (Self::Null, Value::Null)
            | (Self::Boolean, Value::Bool(_))
            | (Self::Number, Value::Number(_))
            | (Self::String, Value::String(_))
            | (Self::Array, Value::Array(_))
            | (Self::Object, Value::Object(_)) => true,
            (Self::Integer, Value::Number(n)) => is_integer(n),
            _ => false,
        }
    }
}

impl Format {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "date-time" => Self::DateTime,
            "date" => Self::Date,
            "time" => Self::Time,
            "email" => Self::Email,
            "hostname" => Self::Hostname,
            "ipv4" => Self::Ipv4,
            "ipv6" => Self::Ipv6,
            "uri" => Self::Uri,
            "uri-reference" => Self::UriReference,
            "uuid" => Self::Uuid,
            "regex" => Self::Regex,
            _ => return None,
        })
    }

    fn accepts(self, s: &str) -> bool {
        match self {
            Self::DateTime => is_date_time(s),
            Self::Date => is_date(s.as_bytes()),
            Self::Time => is_time(s.as_bytes()),
            Self::Email => is_email(s),
            Self::Hostname => is_hostname(s),
            Self::Ipv4 => s.parse::<Ipv4Addr>().is_ok(),
            Self::Ipv6 => s.parse::<Ipv6Addr>().is_ok(),
            Self::Uri => is_uri(s),
            Self::UriReference => is_uri_reference(s),
            Self::Uuid => is_uuid(s),
            Self::Regex => Regex::new(s).is_ok(),
        }
    }
}

/// The value of a run of ASCII digits (`None` if empty, not all digits, or too long).
fn digits(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || bytes.len() > 9 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0, |n, b| n * 10 + u32::from(b - b'0')))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    }
}

/// RFC 3339 `date-time`: `full-date`, `T` (either case), `full-time`.
fn is_date_time(s: &str) -> bool {
    s.split_once(['T', 't'])
        .is_some_and(|(date, time)| is_date(date.as_bytes()) && is_time(time.as_bytes()))
}

/// RFC 3339 `full-date`: `YYYY-MM-DD` naming a day that exists.
fn is_date(b: &[u8]) -> bool {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    match (digits(&b[..4]), digits(&b[5..7]), digits(&b[8..])) {
        (Some(year), Some(month), Some(day)) => (1..=days_in_month(year, month)).contains(&day),
        _ => false,
    }
}

/// RFC 3339 `full-time`: `HH:MM:SS`, optional fraction, then `Z` or `±HH:MM`. A
/// leap second (`:60`) is allowed only where it falls at 23:59 UTC.
fn is_time(b: &[u8]) -> bool {
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) =
        (digits(&b[..2]), digits(&b[3..5]), digits(&b[6..8]))
    else {
        return false;
    };
    let Some(offset) = fraction_end(&b[8..]).and_then(offset_minutes) else {
        return false;
    };
    let utc = (i64::from(hour * 60 + minute) - offset).rem_euclid(24 * 60);
    hour < 24 && minute < 60 && (second < 60 || (second == 60 && utc == 23 * 60 + 59))
}

/// What follows an optional `.` and one or more digits.
fn fraction_end(b: &[u8]) -> Option<&[u8]> {
    let Some(rest) = b.strip_prefix(b".") else {
        return Some(b);
    };
    let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    (n > 0).then(|| &rest[n..])
}

/// A time offset (`Z` or `±HH:MM`, all of the rest) in minutes east of UTC.
fn offset_minutes(b: &[u8]) -> Option<i64> {
    let sign = match b.first() {
        Some(b'Z' | b'z') if b.len() == 1 => return Some(0),
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return None,
    };
    if b.len() != 6 || b[3] != b':' {
        return None;
    }
    let (hours, minutes) = (digits(&b[1..3])?, digits(&b[4..])?);
    (hours < 24 && minutes < 60).then(|| sign * i64::from(hours * 60 + minutes))
}

/// RFC 5321's shape: one `@`, a local part of 1 to 64 bytes without whitespace or
/// control characters, and a host name or a bracketed IP literal.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    (1..=64).contains(&local.len())
        && !local.chars().any(|c| c.is_whitespace() || c.is_control())
        && is_mail_domain(domain)
}

/// A host name, `[IPv4]` or `[IPv6:address]` (the tag in either case).
fn is_mail_domain(domain: &str) -> bool {
    let Some(literal) = domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) else {
        return is_hostname(domain);
    };
    match literal.split_at_checked(5) {
        Some((tag, address)) if tag.eq_ignore_ascii_case("IPv6:") => {
            address.parse::<Ipv6Addr>().is_ok()
        }
        _ => literal.parse::<Ipv4Addr>().is_ok(),
    }
}

/// RFC 1123: dot-separated labels of 1 to 63 letters, digits and inner `-`, at
/// most 253 bytes in all.
fn is_hostname(s: &str) -> bool {
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    s.len() <= 253 && s.split('.').all(label)
}

/// RFC 3986 absolute URI, loosely: a scheme and `:`, then a URI reference.
fn is_uri(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        && is_uri_reference(s)
}

/// A URI reference, loosely: no whitespace or control characters.
fn is_uri_reference(s: &str) -> bool {
    !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `8-4-4-4-12` hexadecimal digits, either case.
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

impl Size {
    fn measure(self, value: &Value) -> Option<u64> {
        let len = match (self, value) {
            (Self::Properties, Value::Object(map)) => map.len(),
            (Self::Items, Value::Array(items)) => items.len(),
            (Self::Length, Value::String(s)) => s.chars().count(),
            _ => return None,
        };
        u64::try_from(len).ok()
    }
}

/// Whether a number is an integer in JSON's sense (`1.0` is).
fn is_integer(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

fn as_int(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Compares two numbers by value (exactly when both are integers).
fn compare(a: &Number, b: &Number) -> Ordering {
    if let (Some(x), Some(y)) = (as_int(a), as_int(b)) {
        return x.cmp(&y);
    }
    let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
    x.partial_cmp(&y).unwrap_or(Ordering::Equal)
}

/// Whether `n` is a multiple of `m` (`m > 0`): exactly for integers, within
/// rounding for other numbers.
fn is_multiple(n: &Number, m: &Number) -> bool {
    if let (Some(x), Some(y)) = (as_int(n), as_int(m)) {
        return y != 0 && x % y == 0;
    }
    let (x, y) = (n.as_f64().unwrap_or(0.0), m.as_f64().unwrap_or(1.0));
    let quotient = x / y;
    quotient.is_finite() && (quotient - quotient.round()).abs() <= 1e-9 * quotient.abs().max(1.0)
}

/// JSON equality: numbers by value (`1 == 1.0`), containers member by member.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn all_unique(items: &[Value]) -> bool {
    items
        .iter()
        .enumerate()
        .all(|(i, a)| items[i + 1..].iter().all(|b| !json_eq(a, b)))
}

/// Where in the value a check applies: a chain of keys and indices, rendered as a
/// JSON pointer only when something is reported.
#[derive(Clone, Copy)]
enum Loc<'a> {
    Root,
    Key(&'a Loc<'a>, &'a str),
    Index(&'a Loc<'a>, usize),
}

impl Loc<'_> {
    fn pointer(&self) -> String {
        match self {
            Loc::Root => String::new(),
            Loc::Key(parent, key) => child(&parent.pointer(), key),
            Loc::Index(parent, i) => format!("{}/{i}", parent.pointer()),
        }
    }
}

/// Collected mismatches, or (when `collect` is off) only whether there is one.
struct Out {
    collect: bool,
    failed: bool,
    mismatches: Vec<Mismatch>,
}

impl Out {
    fn new(collect: bool) -> Self {
        Self {
            collect,
            failed: false,
            mismatches: Vec::new(),
        }
    }

    fn fail(&mut self, loc: &Loc<'_>, detail: impl FnOnce() -> String) {
        self.failed = true;
        if self.collect {
            self.mismatches.push(Mismatch {
                path: loc.pointer(),
                detail: detail(),
            });
        }
    }

    fn fails(&mut self, loc: &Loc<'_>, keyword: &str) {
        self.fail(loc, || format!("fails `{keyword}`"));
    }

    /// Nothing more to learn: one mismatch settles a yes/no question.
    fn settled(&self) -> bool {
        self.failed && !self.collect
    }
}

impl Validator {
    /// Every place where `value` differs from the schema, in schema order.
    pub(crate) fn mismatches(&self, value: &Value) -> Vec<Mismatch> {
        let mut out = Out::new(true);
        self.eval(0, value, &Loc::Root, 0, &mut out);
        out.mismatches
    }

    /// Whether `value` matches the schema (stops at the first mismatch).
    pub(crate) fn is_valid(&self, value: &Value) -> bool {
        self.valid(0, value, &Loc::Root, 0)
    }

    fn valid(&self, id: Id, value: &Value, loc: &Loc<'_>, depth: usize) -> bool {
        let mut out = Out::new(false);
        self.eval(id, value, loc, depth, &mut out);
        !out.failed
    }

    fn eval(&self, id: Id, value: &Value, loc: &Loc<'_>, depth: usize, out: &mut Out) {
        if depth > MAX_DEPTH {
            out.fail(loc, || {
                format!("nests schemas deeper than the validator follows ({MAX_DEPTH})")
            });
            return;
        }
        for check in &self.nodes[id] {
            self.check(check, value, loc, depth + 1, out);
            if out.settled() {
                return;
            }
        }
    }

    fn check(&self, check: &Check, value: &Value, loc: &Loc<'_>, depth: usize, out: &mut Out) {
        match check {
            Check::Required(_)
            | Check::Properties(_)
            | Check::PatternProperties(_)
            | Check::Additional { .. }
            | Check::PropertyNames(_)
            | Check::Dependencies(_) => {
                if let Value::Object(map) = value {
                    self.object(check, value, map, loc, depth, out);
                }
            }
            Check::Items { .. } | Check::Contains(_) | Check::UniqueItems => {
                if let Value::Array(items) = value {
                    self.array(check, items, loc, depth, out);
                }
            }
            Check::AllOf(_)
            | Check::AnyOf(_)
            | Check::OneOf(_)
            | Check::Not(_)
            | Check::If { .. }
            | Check::Ref(_) => self.applicator(check, value, loc, depth, out),
            _ => self.assertion(check, value, loc, out),
        }
    }

    /// Checks that look at the value alone.
    fn assertion(&self, check: &Check, value: &Value, loc: &Loc<'_>, out: &mut Out) {
        let failed = match (check, value) {
            (Check::False, _) => Some("false"),
            (Check::Type(kinds), _) => {
                if !kinds.iter().any(|k| k.matches(value)) {
                    out.fail(loc, || {
                        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                        format!("wrong type (expected {})", names.join(" or "))
                    });
                }
                None
            }
            (Check::Enum(allowed), _) => {
                (!allowed.iter().any(|a| json_eq(a, value))).then_some("enum")
            }
            (Check::Const(expected), _) => (!json_eq(expected, value)).then_some("const"),
            (Check::Pattern(i), Value::String(s)) => {
                (!self.regexes[*i].is_match(s)).then_some("pattern")
            }
            (Check::Format(format), Value::String(s)) => (!format.accepts(s)).then_some("format"),
            (
                Check::Bound {
                    keyword,
                    limit,
                    accept,
                },
                Value::Number(n),
            ) => (!accept(compare(n, limit))).then_some(*keyword),
            (Check::MultipleOf(m), Value::Number(n)) => {
                (!is_multiple(n, m)).then_some("multipleOf")
            }
            (
                Check::Size {
                    keyword,
                    size,
                    min,
                    limit,
                },
                _,
            ) => match size.measure(value) {
                Some(len) if (*min && len < *limit) || (!*min && len > *limit) => Some(*keyword),
                _ => None,
            },
            _ => None,
        };
        if let Some(keyword) = failed {
            out.fails(loc, keyword);
        }
    }

    /// Checks that apply subschemas to the same value.
    fn applicator(&self, check: &Check, value: &Value, loc: &Loc<'_>, depth: usize, out: &mut Out) {
        let valid = |id: &Id| self.valid(*id, value, loc, depth);
        match check {
            Check::AllOf(ids) => {
                for id in ids {
                    self.eval(*id, value, loc, depth, out);
                }
            }
            Check::AnyOf(ids) if !ids.iter().any(valid) => out.fails(loc, "anyOf"),
            Check::OneOf(ids) if ids.iter().filter(|id| valid(id)).take(2).count() != 1 => {
                out.fails(loc, "oneOf");
            }
            Check::Not(id) if valid(id) => out.fails(loc, "not"),
            Check::If {
                cond,
                then,
                otherwise,
            } => {
                let branch = if valid(cond) { then } else { otherwise };
                if let Some(id) = branch {
                    self.eval(*id, value, loc, depth, out);
                }
            }
            Check::Ref(id) => self.eval(*id, value, loc, depth, out),
            _ => {}
        }
    }

    /// Checks of an object's properties. Properties the schema does not name are
    /// reported at the object, so their names (part of the value) are never shown.
    fn object(
        &self,
        check: &Check,
        value: &Value,
        map: &Map<String, Value>,
        loc: &Loc<'_>,
        depth: usize,
        out: &mut Out,
    ) {
        let valid = |id: Id, key: &str, v: &Value| self.valid(id, v, &Loc::Key(loc, key), depth);
        match check {
            Check::Required(names) => missing(names, map, loc, out),
            Check::Properties(properties) => {
                for (name, id) in properties {
                    if let Some((key, v)) = map.get_key_value(name) {
                        self.eval(*id, v, &Loc::Key(loc, key), depth, out);
                    }
                }
            }
            Check::PatternProperties(patterns) => {
                let fails = map.iter().any(|(k, v)| {
                    patterns
                        .iter()
                        .any(|(rx, id)| self.regexes[*rx].is_match(k) && !valid(*id, k, v))
                });
                if fails {
                    out.fails(loc, "patternProperties");
                }
            }
            Check::Additional {
                names,
                patterns,
                schema,
            } => {
                let mut extra = map.iter().filter(|(k, _)| {
                    !names.contains(k) && !patterns.iter().any(|rx| self.regexes[*rx].is_match(k))
                });
                match schema {
                    None if extra.next().is_some() => {
                        out.fail(loc, || {
                            "has properties the schema does not allow".to_owned()
                        });
                    }
                    Some(id) if extra.any(|(k, v)| !valid(*id, k, v)) => {
                        out.fails(loc, "additionalProperties");
                    }
                    _ => {}
                }
            }
            // Names are checked as strings: the one copy made of the value.
            Check::PropertyNames(id)
                if map
                    .keys()
                    .any(|k| !valid(*id, k, &Value::String(k.clone()))) =>
            {
                out.fails(loc, "propertyNames");
            }
            Check::Dependencies(dependencies) => {
                for (name, dependency) in dependencies {
                    match dependency {
                        _ if !map.contains_key(name) => {}
                        Dependency::Names(names) => missing(names, map, loc, out),
                        Dependency::Schema(id) => self.eval(*id, value, loc, depth, out),
                    }
                }
            }
            _ => {}
        }
    }

    fn array(&self, check: &Check, items: &[Value], loc: &Loc<'_>, depth: usize, out: &mut Out) {
        match check {
            Check::Items { prefix, rest } => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(id) = prefix.get(i).or(rest.as_ref()) {
                        self.eval(*id, item, &Loc::Index(loc, i), depth, out);
                    }
                }
            }
            Check::Contains(id) => {
                let found = items
                    .iter()
                    .enumerate()
                    .any(|(i, item)| self.valid(*id, item, &Loc::Index(loc, i), depth));
                if !found {
                    out.fails(loc, "contains");
                }
            }
            Check::UniqueItems if !all_unique(items) => out.fails(loc, "uniqueItems"),
            _ => {}
        }
    }
}

fn missing(names: &[String], map: &Map<String, Value>, loc: &Loc<'_>, out: &mut Out) {
    for name in names.iter().filter(|name| !map.contains_key(*name)) {
        out.fail(loc, || {
            format!("missing required property {}", Value::String(name.clone()))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validator(schema: Value) -> Validator {
        match compile(&schema) {
            Ok(v) => v,
            Err(e) => panic!("{schema} does not compile: {e}"),
        }
    }

    /// Asserts each instance in `pass` matches and each in `fail` does not.
    fn cases(schema: Value, pass: &[Value], fail: &[Value]) {
        let v = validator(schema.clone());
        for instance in pass {
            assert!(v.is_valid(instance), "{schema} should accept {instance}");
            assert!(v.mismatches(instance).is_empty(), "{schema} / {instance}");
        }
        for instance in fail {
            assert!(!v.is_valid(instance), "{schema} should reject {instance}");
            assert!(!v.mismatches(instance).is_empty(), "{schema} / {instance}");
        }
    }

    fn details(schema: Value, instance: Value) -> Vec<String> {
        validator(schema)
            .mismatches(&instance)
            .into_iter()
            .map(|m| format!("{}: {}", m.path, m.detail))
            .collect()
    }

    fn compile_error(schema: Value) -> SchemaViolation {
        match compile(&schema) {
            Ok(_) => panic!("{schema} should not compile"),
            Err(e) => e,
        }
    }

    #[test]
    fn type_single_and_list() {
        cases(
            json!({"type": "integer"}),
            &[json!(1), json!(1.0), json!(-7)],
            &[json!(1.5), json!("1"), json!(null)],
        );
        cases(
            json!({"type": "number"}),
            &[json!(1), json!(2.5)],
            &[json!("2")],
        );
        cases(
            json!({"type": ["string", "null"]}),
            &[json!("a"), json!(null)],
            &[json!(1), json!([]), json!({})],
        );
        cases(json!({"type": "boolean"}), &[json!(true)], &[json!(0)]);
        cases(json!({"type": "array"}), &[json!([])], &[json!({})]);
        cases(json!({"type": "object"}), &[json!({})], &[json!([])]);
        assert_eq!(
            details(json!({"type": ["string", "null"]}), json!(3)),
            [": wrong type (expected string or null)"]
        );
    }

    #[test]
    fn enum_and_const_use_json_equality() {
        cases(
            json!({"enum": [1, "a", [1, {"b": 2}], null]}),
            &[
                json!(1.0),
                json!("a"),
                json!([1.0, {"b": 2.0}]),
                json!(null),
            ],
            &[json!(2), json!("b"), json!([1, {"b": 3}]), json!(false)],
        );
        cases(
            json!({"const": {"x": 1}}),
            &[json!({"x": 1.0})],
            &[json!({"x": 1, "y": 0}), json!({"x": "1"})],
        );
        cases(
            json!({"const": 0}),
            &[json!(0.0), json!(-0.0)],
            &[json!(false)],
        );
    }

    #[test]
    fn object_keywords() {
        let schema = json!({
            "properties": {"a": {"type": "string"}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": {"type": "boolean"},
            "required": ["a"],
            "propertyNames": {"maxLength": 4},
            "minProperties": 1,
            "maxProperties": 3
        });
        cases(
            schema,
            &[json!({"a": "s", "x-1": 2, "b": true})],
            &[
                json!({}),
                json!({"a": 1}),
                json!({"a": "s", "x-1": "no"}),
                json!({"a": "s", "b": 1}),
                json!({"a": "s", "long-name": true}),
                json!({"a": "s", "b": true, "c": true, "d": true}),
            ],
        );
        cases(
            json!({"properties": {"a": true}, "additionalProperties": false}),
            &[json!({"a": 1}), json!([1])],
            &[json!({"b": 1})],
        );
    }

    #[test]
    fn dependency_keywords() {
        cases(
            json!({"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}),
            &[
                json!({"a": 1, "b": 2}),
                json!({"c": 1, "d": 2}),
                json!({"b": 1}),
            ],
            &[json!({"a": 1}), json!({"c": 1})],
        );
        cases(
            json!({"dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"maxProperties": 1}}}),
            &[json!({"a": 1, "b": 2}), json!({"c": 1})],
            &[json!({"a": 1}), json!({"c": 1, "e": 2})],
        );
    }

    #[test]
    fn array_keywords() {
        cases(
            json!({"items": {"type": "integer"}, "minItems": 1, "maxItems": 3, "uniqueItems": true}),
            &[json!([1]), json!([1, 2, 3]), json!("not an array")],
            &[
                json!([]),
                json!([1, 2, 3, 4]),
                json!([1, 1.0]),
                json!(["a"]),
            ],
        );
        cases(
            json!({"items": [{"type": "string"}, {"type": "integer"}], "additionalItems": false}),
            &[json!(["a"]), json!(["a", 1])],
            &[json!([1]), json!(["a", 1, 2])],
        );
        cases(
            json!({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}),
            &[json!(["a", 1, 2])],
            &[json!([1]), json!(["a", "b"])],
        );
        cases(
            json!({"contains": {"const": 3}}),
            &[json!([1, 3])],
            &[json!([1, 2]), json!([])],
        );
        cases(json!({"uniqueItems": false}), &[json!([1, 1])], &[]);
    }

    #[test]
    fn string_keywords() {
        cases(
            json!({"minLength": 2, "maxLength": 3, "pattern": "^[a-zé]+$"}),
            &[json!("ab"), json!("éé"), json!("abc"), json!(5)],
            &[json!("a"), json!("abcd"), json!("AB")],
        );
        // Unanchored, as in ECMA-262.
        cases(json!({"pattern": "b"}), &[json!("abc")], &[json!("ac")]);
    }

    #[test]
    fn numeric_keywords() {
        cases(
            json!({"minimum": 1, "maximum": 10.5, "multipleOf": 0.5}),
            &[json!(1), json!(10.5), json!(2.5), json!("x")],
            &[json!(0.5), json!(11), json!(1.25)],
        );
        cases(
            json!({"exclusiveMinimum": 0, "exclusiveMaximum": 10}),
            &[json!(0.1), json!(9)],
            &[json!(0), json!(10)],
        );
        cases(
            json!({"multipleOf": 3}),
            &[json!(9), json!(-3), json!(6.0)],
            &[json!(4)],
        );
        cases(
            json!({"multipleOf": 0.1}),
            &[json!(0.3), json!(1.1)],
            &[json!(0.35)],
        );
        cases(
            json!({"maximum": 18446744073709551615u64}),
            &[json!(18446744073709551615u64), json!(-1)],
            &[json!(1e20)],
        );
    }

    #[test]
    fn combinators_and_conditionals() {
        cases(
            json!({"allOf": [{"minimum": 1}, {"maximum": 2}]}),
            &[json!(1)],
            &[json!(0), json!(3)],
        );
        cases(
            json!({"anyOf": [{"type": "string"}, {"minimum": 5}]}),
            &[json!("a"), json!(6)],
            &[json!(4)],
        );
        cases(
            json!({"oneOf": [{"type": "integer"}, {"minimum": 5}]}),
            &[json!(1), json!(5.5)],
            &[json!(6), json!(1.5)],
        );
        cases(
            json!({"not": {"type": "string"}}),
            &[json!(1)],
            &[json!("a")],
        );
        cases(
            json!({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"minimum": 0}}),
            &[json!("ab"), json!(1)],
            &[json!("a"), json!(-1)],
        );
        cases(json!({"then": false, "else": false}), &[json!(1)], &[]);
    }

    #[test]
    fn boolean_schemas_and_annotations() {
        cases(json!(true), &[json!(1), json!(null)], &[]);
        cases(json!(false), &[], &[json!(1), json!(null)]);
        cases(
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x",
                   "$comment": "c", "title": "t", "description": "d", "default": 1,
                   "examples": [1], "format": "uint32", "readOnly": true, "writeOnly": false,
                   "deprecated": true, "contentMediaType": "text/plain",
                   "contentEncoding": "base64", "nullable": true, "x-unknown": {"type": 5}}),
            &[json!("not an email"), json!(null), json!(1)],
            &[],
        );
    }

    #[test]
    fn local_refs_resolve_against_the_root() {
        let schema = json!({
            "properties": {
                "a": {"$ref": "#/definitions/Pos"},
                "b": {"$ref": "#/$defs/Name"},
                "c": {"$ref": "#/properties/a"},
                "d": {"$ref": "#/definitions/we~1ird~0"}
            },
            "definitions": {"Pos": {"minimum": 0}, "we/ird~": {"type": "null"}},
            "$defs": {"Name": {"type": "string"}}
        });
        cases(
            schema,
            &[json!({"a": 1, "b": "x", "c": 2, "d": null})],
            &[
                json!({"a": -1}),
                json!({"b": 1}),
                json!({"c": -1}),
                json!({"d": 0}),
            ],
        );
    }

    #[test]
    fn recursive_tree_type() {
        let schema = json!({
            "$ref": "#/definitions/Node",
            "definitions": {"Node": {
                "type": "object",
                "required": ["value"],
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}
                },
                "additionalProperties": false
            }}
        });
        let v = validator(schema);
        let leaf = json!({"value": 3});
        let tree =
            json!({"value": 1, "children": [leaf, {"value": 2, "children": [{"value": 4}]}]});
        assert!(v.is_valid(&tree));
        let bad = json!({"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]});
        assert_eq!(v.mismatches(&bad)[0].path, "/children/0/children/0/value");
        // A deep (but finite) tree validates without reaching the depth limit.
        let mut deep = json!({"value": 0});
        for i in 1..120 {
            deep = json!({"value": i, "children": [deep]});
        }
        assert!(v.is_valid(&deep));
    }

    #[test]
    fn a_value_deeper_than_the_limit_is_a_mismatch_not_a_crash() {
        let nest_array = |v: Value| Value::Array(vec![v]);
        let nest_object = |v: Value| json!({"a": v});
        let schemas: [(Value, &dyn Fn(Value) -> Value); 3] = [
            (json!({"items": {"$ref": "#"}}), &nest_array),
            (
                json!({"anyOf": [{"items": {"$ref": "#"}}, false]}),
                &nest_array,
            ),
            (
                json!({"properties": {"a": {"allOf": [{"$ref": "#"}, {"not": false}]}}}),
                &nest_object,
            ),
        ];
        for (schema, nest) in schemas {
            let v = validator(schema.clone());
            let mut deep = json!([]);
            for _ in 0..(MAX_DEPTH + 10) {
                deep = nest(deep);
            }
            // The stack of a tokio worker thread.
            let outcome = std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn(move || {
                    let found = (v.is_valid(&deep), v.mismatches(&deep));
                    // Dropping a deep value recurses too.
                    drop(deep);
                    found
                })
                .map(|handle| handle.join());
            let Ok(Ok((valid, mismatches))) = outcome else {
                panic!("{schema}: validation thread failed");
            };
            assert!(!valid, "{schema}");
            assert_eq!(mismatches.len(), 1, "{schema}: {mismatches:?}");
        }
    }

    #[test]
    fn ref_cycles_that_never_descend_are_rejected() {
        for (schema, pointer) in [
            (json!({"$ref": "#"}), "/$ref"),
            (
                json!({"definitions": {"A": {"allOf": [{"$ref": "#/definitions/B"}]},
                       "B": {"anyOf": [{"$ref": "#/definitions/A"}]}},
                       "properties": {"x": {"$ref": "#/definitions/A"}}}),
                "/$ref",
            ),
            (json!({"not": {"$ref": "#"}}), "/not/$ref"),
        ] {
            let error = compile_error(schema.clone());
            assert!(error.pointer.ends_with(pointer), "{schema}: {error}");
            assert!(error.message.contains("without descending"), "{error}");
        }
        // Cycles through a child value are fine.
        validator(json!({"properties": {"next": {"$ref": "#"}}}));
        validator(json!({"propertyNames": {"$ref": "#"}}));
    }

    #[test]
    fn malformed_keywords_fail_with_their_pointer() {
        for (schema, pointer) in [
            (json!({"type": 5}), "/type"),
            (json!({"type": "text"}), "/type"),
            (json!({"type": []}), "/type"),
            (
                json!({"properties": {"a": {"required": "x"}}}),
                "/properties/a/required",
            ),
            (json!({"required": [1]}), "/required"),
            (json!({"minimum": "a"}), "/minimum"),
            (json!({"exclusiveMaximum": true}), "/exclusiveMaximum"),
            (json!({"multipleOf": 0}), "/multipleOf"),
            (json!({"minLength": -1}), "/minLength"),
            (json!({"maxItems": 1.5}), "/maxItems"),
            (json!({"pattern": "(?=x)"}), "/pattern"),
            (json!({"pattern": 3}), "/pattern"),
            (
                json!({"patternProperties": {"[": true}}),
                "/patternProperties/[",
            ),
            (json!({"enum": 1}), "/enum"),
            (json!({"anyOf": []}), "/anyOf"),
            (json!({"allOf": [1]}), "/allOf/0"),
            (json!({"not": "x"}), "/not"),
            (
                json!({"items": {"$ref": "https://example.com/s.json"}}),
                "/items/$ref",
            ),
            (json!({"$ref": "#/definitions/Missing"}), "/$ref"),
            (json!({"$ref": "#anchor"}), "/$ref"),
            (json!({"$ref": 1}), "/$ref"),
            (
                json!({"definitions": {"A": {"type": 1}}}),
                "/definitions/A/type",
            ),
            (json!({"dependencies": {"a": 1}}), "/dependencies/a"),
            (json!({"uniqueItems": "yes"}), "/uniqueItems"),
            (json!({"format": 1}), "/format"),
            (json!({"prefixItems": [true], "items": [true]}), "/items"),
            (json!(3), ""),
        ] {
            let error = compile_error(schema.clone());
            assert_eq!(error.pointer, pointer, "{schema}: {error}");
        }
    }

    #[test]
    fn unsupported_assertions_fail_naming_keyword_and_pointer() {
        for keyword in UNSUPPORTED {
            let schema = json!({"properties": {"a": {*keyword: true}}});
            let error = compile_error(schema);
            assert_eq!(error.pointer, format!("/properties/a/{keyword}"));
            assert!(error.message.contains(keyword), "{error}");
        }
    }

    #[test]
    fn mismatches_never_contain_values() {
        let secret = "SECRET-VALUE-91";
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"enum": ["x"]},
                           "c": {"pattern": "^z"}, "d": {"const": 1}, "e": {"maxLength": 2}},
            "patternProperties": {"^p": {"type": "integer"}},
            "additionalProperties": {"type": "integer"},
            "propertyNames": {"maxLength": 10},
            "required": ["r"]
        });
        let instance = json!({"a": secret, "b": secret, "c": secret, "d": secret, "e": secret,
                              "p-SECRET": secret, "SECRET-KEY": secret, "SECRET-LONG-KEY": 1});
        let found = details(schema, instance);
        assert!(found.len() >= 8, "{found:?}");
        for line in &found {
            assert!(!line.contains("SECRET"), "{line}");
        }
        assert_eq!(
            details(json!({"additionalProperties": false}), json!({"SECRET": 1})),
            [": has properties the schema does not allow"]
        );
    }

    #[test]
    fn messages_name_paths_and_keywords() {
        let schema = json!({"properties": {"a/b": {"items": {"minimum": 1}}}, "required": ["x"]});
        assert_eq!(
            details(schema, json!({"a/b": [1, 0]})),
            [
                "/a~1b/1: fails `minimum`",
                ": missing required property \"x\""
            ]
        );
    }

    #[test]
    fn ref_siblings_apply() {
        cases(
            json!({"$ref": "#/definitions/S", "maxLength": 2, "definitions": {"S": {"type": "string"}}}),
            &[json!("ab")],
            &[json!("abc"), json!(1)],
        );
    }

    /// Asserts `format` accepts each string in `pass` and refuses each in `fail`.
    fn formats(format: &str, pass: &[&str], fail: &[&str]) {
        let strings = |list: &[&str]| list.iter().map(|s| json!(s)).collect::<Vec<_>>();
        cases(json!({"format": format}), &strings(pass), &strings(fail));
    }

    #[test]
    fn format_dates_and_times() {
        formats(
            "date",
            &["2024-02-29", "2000-02-29", "2023-12-31", "0000-01-01"],
            &[
                "2023-02-29",
                "1900-02-29",
                "2023-04-31",
                "2023-13-01",
                "2023-00-10",
                "2023-01-00",
                "2023-1-01",
                "20230101",
                "2023-01-01T00:00:00Z",
                "",
                "２０２３-01-01",
            ],
        );
        formats(
            "time",
            &[
                "23:59:60Z",
                "00:00:00z",
                "12:30:15.123+02:00",
                "08:00:00-05:30",
                "15:59:60-08:00",
            ],
            &[
                "23:59:59",
                "24:00:00Z",
                "12:60:00Z",
                "12:00:61Z",
                "22:59:60Z",
                "23:59:60+01:00",
                "12:00:00.Z",
                "12:00:00+2:00",
                "12:00:00+24:00",
                "12:00Z",
                "12:00:00ZZ",
                "1:00:00Z",
            ],
        );
        formats(
            "date-time",
            &[
                "2024-02-29T23:59:60Z",
                "2023-06-01t08:15:00.5z",
                "1985-04-12T23:20:50.52+01:00",
            ],
            &[
                "2023-02-29T00:00:00Z",
                "2023-06-01 08:15:00Z",
                "2023-06-01T08:15:00",
                "2023-06-01",
                "T08:15:00Z",
                "2023-06-01T25:00:00Z",
            ],
        );
    }

    #[test]
    fn format_email_and_hostname() {
        let label = "a".repeat(63);
        let long_label = "a".repeat(64);
        let long_name = [label.as_str(); 4].join(".");
        formats(
            "hostname",
            &[
                "example.com",
                "a",
                "xn--bcher-kva.example",
                "a-b.c1",
                "1.2.3.4",
                &label,
                &[
                    label.as_str(),
                    label.as_str(),
                    label.as_str(),
                    &"a".repeat(61),
                ]
                .join("."),
            ],
            &[
                "",
                "-a.com",
                "a-.com",
                "a..b",
                "a.com.",
                "a_b.com",
                "a b",
                "ex@mple.com",
                "ü.com",
                &long_label,
                &long_name,
            ],
        );
        formats(
            "email",
            &[
                "joe@example.com",
                "a@b",
                "first.last+tag@sub.example.org",
                "x@[192.0.2.1]",
                "x@[IPv6:2001:db8::1]",
                "x@[ipv6:::1]",
                "\"quoted\"@example.com",
            ],
            &[
                "no-at-sign",
                "@example.com",
                "joe@",
                "a@b@c",
                "a b@example.com",
                "joe@-bad.com",
                "joe@exa mple.com",
                "x@[300.0.0.1]",
                "x@[IPv6:zz]",
                "x@[2001:db8::1]",
                &format!("{}@example.com", "a".repeat(65)),
            ],
        );
    }

    #[test]
    fn format_addresses_and_identifiers() {
        formats(
            "ipv4",
            &["0.0.0.0", "192.168.1.255", "1.2.3.4"],
            &[
                "1.2.3.04",
                "256.1.1.1",
                "1.2.3",
                "1.2.3.4.5",
                "1.2.3.-4",
                " 1.2.3.4",
                "::1",
            ],
        );
        formats(
            "ipv6",
            &[
                "::1",
                "::",
                "2001:db8::8a2e:370:7334",
                "::ffff:192.0.2.1",
                "FE80::1",
            ],
            &[
                "1.2.3.4",
                ":::1",
                "2001:db8::1::2",
                "12345::",
                "fe80::1%eth0",
                "g::1",
            ],
        );
        formats(
            "uuid",
            &[
                "123e4567-e89b-12d3-a456-426614174000",
                "00000000-0000-0000-0000-000000000000",
                "ABCDEF01-2345-6789-ABCD-EF0123456789",
            ],
            &[
                "123e4567e89b12d3a456426614174000",
                "123e4567-e89b-12d3-a456-42661417400",
                "123e4567-e89b-12d3-a456_426614174000",
                "g23e4567-e89b-12d3-a456-426614174000",
                "{123e4567-e89b-12d3-a456-426614174000}",
            ],
        );
        formats(
            "regex",
            &["^[a-z]+$", "a|b", "\\d{2,3}", ""],
            &["(", "[a-", "a{2,1}", "(?=x)"],
        );
    }

    #[test]
    fn format_uris() {
        formats(
            "uri",
            &[
                "http://x",
                "https://example.com/a?b=c#d",
                "urn:isbn:0451450523",
                "mailto:a@b",
                "a+b-c.d:rest",
                "file:///tmp/x",
            ],
            &[
                "x y",
                "//example.com/a",
                "/relative",
                "no-scheme",
                "1http://x",
                ":x",
                "http://x y",
                "http://x\u{7}",
                "",
            ],
        );
        formats(
            "uri-reference",
            &["http://x", "/relative/path", "?q=1", "#frag", "", "../a"],
            &["x y", "a\tb", "/a\u{0}", "http://x\ny"],
        );
    }

    #[test]
    fn format_applies_to_strings_only_and_known_names_only() {
        for format in [
            "date-time",
            "date",
            "time",
            "email",
            "hostname",
            "ipv4",
            "ipv6",
            "uri",
            "uri-reference",
            "uuid",
            "regex",
        ] {
            cases(
                json!({"format": format}),
                &[
                    json!(1),
                    json!(null),
                    json!(true),
                    json!([]),
                    json!({}),
                    json!(2.5),
                ],
                &[json!("x y(")],
            );
        }
        for format in [
            "uint32", "int64", "double", "float", "uint8", "unknown", "binary",
        ] {
            cases(json!({"format": format}), &[json!("x y("), json!(-1)], &[]);
        }
        assert_eq!(
            details(
                json!({"properties": {"when": {"type": "string", "format": "date-time"}}}),
                json!({"when": "SECRET-2023-02-29"})
            ),
            ["/when: fails `format`"]
        );
    }

    /// `format` (name, instance) pairs on which this validator and the `jsonschema`
    /// crate agree, valid and invalid, for every asserted format. Deliberately left
    /// out, where the rules here differ on purpose:
    /// - `email`: `jsonschema` parses RFC 5322 local parts (`a..b@x.com`,
    ///   `.a@x.com` and `"a@x.com` are refused there, `"a b"@x.com` accepted);
    ///   here any local part of 1 to 64 bytes without whitespace or control
    ///   characters passes.
    /// - `hostname`: `jsonschema` also applies IDNA rules (`ab--cd.com`, and `xn--`
    ///   labels that are not valid Punycode, are refused there); here it is RFC 1123
    ///   only.
    /// - `uri` / `uri-reference`: `jsonschema` checks RFC 3986 grammar (percent
    ///   escapes such as `a:%zz`, excluded characters such as `<>`, non-ASCII);
    ///   here only the scheme and the absence of whitespace and control characters.
    /// - `regex`: `jsonschema` checks ECMA-262 syntax, which allows look-around,
    ///   backreferences, `\cA` and `\p{L}` that this crate's engine (the one that
    ///   runs `pattern`) refuses, and refuses POSIX classes such as `[[:alpha:]]`
    ///   that it accepts.
    fn format_table() -> Vec<(&'static str, &'static str)> {
        vec![
            ("date", "2024-02-29"),
            ("date", "2023-02-29"),
            ("date", "2023-04-31"),
            ("date", "2023-1-01"),
            ("time", "23:59:60Z"),
            ("time", "15:59:60-08:00"),
            ("time", "22:59:60Z"),
            ("time", "12:30:15.123+02:00"),
            ("time", "12:00:00"),
            ("time", "24:00:00Z"),
            ("date-time", "1985-04-12T23:20:50.52+01:00"),
            ("date-time", "2023-06-01t08:15:00z"),
            ("date-time", "2023-06-01 08:15:00Z"),
            ("date-time", "2023-02-29T00:00:00Z"),
            ("email", "joe@example.com"),
            ("email", "a@b"),
            ("email", "x@[192.0.2.1]"),
            ("email", "x@[IPv6:2001:db8::1]"),
            ("email", "no-at-sign"),
            ("email", "@example.com"),
            ("email", "a b@example.com"),
            ("email", "joe@-bad.com"),
            ("hostname", "example.com"),
            ("hostname", "a-b.c1"),
            ("hostname", "-a.com"),
            ("hostname", "a_b.com"),
            ("hostname", "a.com."),
            ("hostname", LONG_LABEL),
            ("ipv4", "192.168.1.255"),
            ("ipv4", "1.2.3.04"),
            ("ipv4", "256.1.1.1"),
            ("ipv4", "1.2.3"),
            ("ipv6", "::1"),
            ("ipv6", "::ffff:192.0.2.1"),
            ("ipv6", "2001:db8::1::2"),
            ("ipv6", "fe80::1%eth0"),
            ("uri", "http://x"),
            ("uri", "https://example.com/a?b=c#d"),
            ("uri", "urn:isbn:0451450523"),
            ("uri", "x y"),
            ("uri", "//example.com/a"),
            ("uri", "/relative"),
            ("uri-reference", "/relative/path"),
            ("uri-reference", "#frag"),
            ("uri-reference", "x y"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            ("uuid", "123e4567e89b12d3a456426614174000"),
            ("uuid", "123e4567-e89b-12d3-a456-42661417400"),
            ("regex", "^[a-z]+$"),
            ("regex", "a|b"),
            ("regex", "("),
            ("regex", "[a-"),
        ]
    }

    /// 64 characters: one more than a host name label may hold.
    const LONG_LABEL: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com";

    /// Checks that this validator and the `jsonschema` crate (`draft`, formats
    /// asserted when `formats`) agree on every (schema, instance) pair of
    /// `cases`; returns how many were valid and how many invalid.
    fn agree(
        cases: impl IntoIterator<Item = (Value, Value)>,
        draft: impl Fn(&Value) -> jsonschema::Draft,
        formats: bool,
    ) -> (usize, usize) {
        let (mut valid, mut invalid) = (0, 0);
        for (schema, instance) in cases {
            let ours = validator(schema.clone()).is_valid(&instance);
            let theirs = match jsonschema::options()
                .with_draft(draft(&schema))
                .should_validate_formats(formats)
                .build(&schema)
            {
                Ok(v) => v.is_valid(&instance),
                Err(e) => panic!("{schema}: {e}"),
            };
            assert_eq!(ours, theirs, "{schema} / {instance}");
            if ours { valid += 1 } else { invalid += 1 }
        }
        (valid, invalid)
    }

    #[test]
    fn formats_agree_with_jsonschema() {
        let cases = format_table()
            .into_iter()
            .map(|(format, instance)| (json!({"format": format}), json!(instance)));
        // `uuid` is a format from 2019-09 on; `jsonschema` ignores it in draft-07.
        let draft = |schema: &Value| {
            if schema["format"] == "uuid" {
                jsonschema::Draft::Draft201909
            } else {
                jsonschema::Draft::Draft7
            }
        };
        let (valid, invalid) = agree(cases, draft, true);
        assert!(
            valid >= 20 && invalid >= 20,
            "{valid} valid, {invalid} invalid"
        );
    }

    /// (schema, instance) pairs over every keyword, compared with the `jsonschema`
    /// crate (draft-07).
    fn differential_table() -> Vec<(Value, Value)> {
        let tree = json!({"$ref": "#/definitions/T", "definitions": {"T": {
            "type": "object", "properties": {"kids": {"items": {"$ref": "#/definitions/T"}}}}}});
        let object = json!({"properties": {"a": {"type": "string"}},
            "patternProperties": {"^n": {"type": "number"}}, "additionalProperties": false});
        vec![
            (json!({"type": "integer"}), json!(1.0)),
            (json!({"type": "integer"}), json!(1.5)),
            (json!({"type": ["string", "null"]}), json!(null)),
            (json!({"type": ["string", "null"]}), json!(0)),
            (json!({"enum": [1, "a"]}), json!(1.0)),
            (json!({"enum": [1, "a"]}), json!("b")),
            (
                json!({"const": [1, {"a": null}]}),
                json!([1.0, {"a": null}]),
            ),
            (json!({"const": [1, {"a": null}]}), json!([1, {}])),
            (
                json!({"required": ["a"], "properties": {"a": {"minimum": 2}}}),
                json!({"a": 2}),
            ),
            (
                json!({"required": ["a"], "properties": {"a": {"minimum": 2}}}),
                json!({"b": 2}),
            ),
            (object.clone(), json!({"a": "s", "n1": 1})),
            (object.clone(), json!({"n1": "x"})),
            (object, json!({"z": 1})),
            (
                json!({"additionalProperties": {"type": "integer"}}),
                json!({"a": 1}),
            ),
            (
                json!({"additionalProperties": {"type": "integer"}}),
                json!({"a": "1"}),
            ),
            (
                json!({"propertyNames": {"pattern": "^[a-z]+$"}}),
                json!({"ab": 1}),
            ),
            (
                json!({"propertyNames": {"pattern": "^[a-z]+$"}}),
                json!({"A": 1}),
            ),
            (json!({"minProperties": 1, "maxProperties": 2}), json!({})),
            (
                json!({"minProperties": 1, "maxProperties": 2}),
                json!({"a": 1, "b": 2}),
            ),
            (json!({"dependencies": {"a": ["b"]}}), json!({"a": 1})),
            (
                json!({"dependencies": {"a": ["b"]}}),
                json!({"a": 1, "b": 1}),
            ),
            (
                json!({"dependencies": {"a": {"maxProperties": 1}}}),
                json!({"a": 1, "b": 1}),
            ),
            (
                json!({"dependencies": {"a": {"maxProperties": 1}}}),
                json!({"b": 1, "c": 1}),
            ),
            (json!({"items": {"type": "string"}}), json!(["a", "b"])),
            (json!({"items": {"type": "string"}}), json!(["a", 1])),
            (
                json!({"items": [{"type": "string"}], "additionalItems": false}),
                json!(["a"]),
            ),
            (
                json!({"items": [{"type": "string"}], "additionalItems": false}),
                json!(["a", 1]),
            ),
            (
                json!({"items": [true], "additionalItems": {"type": "null"}}),
                json!([1, null]),
            ),
            (json!({"contains": {"type": "null"}}), json!([1, null])),
            (json!({"contains": {"type": "null"}}), json!([1])),
            (json!({"minItems": 2, "maxItems": 3}), json!([1])),
            (json!({"minItems": 2, "maxItems": 3}), json!([1, 2])),
            (json!({"uniqueItems": true}), json!([1, 1.0])),
            (
                json!({"uniqueItems": true}),
                json!([[1], [2], {"a": 1}, {"a": 2}]),
            ),
            (json!({"minLength": 2, "maxLength": 3}), json!("éé")),
            (json!({"minLength": 2, "maxLength": 3}), json!("é")),
            (json!({"maxLength": 3}), json!("abcd")),
            (json!({"pattern": "^\\d{3}-[a-z]+$"}), json!("123-abc")),
            (json!({"pattern": "^\\d{3}-[a-z]+$"}), json!("12-abc")),
            (json!({"minimum": 1, "maximum": 2}), json!(2)),
            (json!({"minimum": 1, "maximum": 2}), json!(2.01)),
            (json!({"exclusiveMinimum": 1}), json!(1)),
            (json!({"exclusiveMaximum": 1}), json!(0.99)),
            (json!({"multipleOf": 0.25}), json!(1.75)),
            (json!({"multipleOf": 4}), json!(10)),
            (
                json!({"allOf": [{"type": "string"}, {"maxLength": 1}]}),
                json!("ab"),
            ),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
                json!(null),
            ),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
                json!(1),
            ),
            (
                json!({"oneOf": [{"minimum": 0}, {"maximum": 10}]}),
                json!(5),
            ),
            (
                json!({"oneOf": [{"minimum": 0}, {"maximum": 10}]}),
                json!(-5),
            ),
            (json!({"not": {"const": 1}}), json!(1)),
            (
                json!({"if": {"minimum": 0}, "then": {"multipleOf": 2}, "else": {"const": -1}}),
                json!(3),
            ),
            (
                json!({"if": {"minimum": 0}, "then": {"multipleOf": 2}, "else": {"const": -1}}),
                json!(-1),
            ),
            (
                json!({"if": {"minimum": 0}, "then": {"multipleOf": 2}, "else": {"const": -1}}),
                json!(-2),
            ),
            (tree.clone(), json!({"kids": [{"kids": []}, {}]})),
            (tree, json!({"kids": [{"kids": [1]}]})),
            (
                json!({"properties": {"a": {"$ref": "#/properties/b"}, "b": {"type": "integer"}}}),
                json!({"a": "x"}),
            ),
            (json!(false), json!(1)),
            (json!({"properties": {"a": false}}), json!({"b": 1})),
        ]
    }

    #[test]
    fn agrees_with_jsonschema_draft7() {
        let table = differential_table();
        assert!(table.len() >= 40);
        let (valid, invalid) = agree(table, |_| jsonschema::Draft::Draft7, false);
        assert!(
            valid >= 15 && invalid >= 15,
            "{valid} valid, {invalid} invalid"
        );
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        fn scalar() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                (-4i64..5).prop_map(Value::from),
                (-4i64..5).prop_map(|n| json!(n as f64 + 0.5)),
                "[abc]{0,3}".prop_map(Value::from),
            ]
        }

        fn instance() -> impl Strategy<Value = Value> {
            scalar().prop_recursive(3, 24, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                    prop::collection::btree_map("[abc]", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn leaf_schema() -> impl Strategy<Value = Value> {
            let kinds = [
                "null", "boolean", "integer", "number", "string", "array", "object",
            ];
            prop_oneof![
                prop::sample::select(kinds.to_vec()).prop_map(|t| json!({"type": t})),
                prop::sample::subsequence(kinds.to_vec(), 1..3).prop_map(|t| json!({"type": t})),
                (
                    prop::sample::select(vec![
                        "minimum",
                        "maximum",
                        "exclusiveMinimum",
                        "exclusiveMaximum"
                    ]),
                    -3i64..4
                )
                    .prop_map(|(k, n)| json!({ k: n })),
                (1i64..4).prop_map(|n| json!({"multipleOf": n})),
                (
                    prop::sample::select(vec![
                        "minLength",
                        "maxLength",
                        "minItems",
                        "maxItems",
                        "minProperties",
                        "maxProperties"
                    ]),
                    0u64..3
                )
                    .prop_map(|(k, n)| json!({ k: n })),
                prop::sample::select(vec!["^a", "b$", "a|c", "^[ab]*$"])
                    .prop_map(|p| json!({"pattern": p})),
                prop::collection::vec(scalar(), 1..3).prop_map(|e| json!({"enum": e})),
                scalar().prop_map(|c| json!({"const": c})),
                Just(json!({"uniqueItems": true})),
                prop::sample::subsequence(vec!["a", "b", "c"], 1..3)
                    .prop_map(|r| json!({"required": r})),
                Just(json!({"dependencies": {"a": ["b"]}})),
                any::<bool>().prop_map(Value::Bool),
            ]
        }

        fn schema() -> impl Strategy<Value = Value> {
            leaf_schema().prop_recursive(3, 16, 3, |s| {
                let list = prop::collection::vec(s.clone(), 1..3);
                prop_oneof![
                    prop::collection::btree_map("[abc]", s.clone(), 1..3)
                        .prop_map(|m| json!({"properties": m})),
                    s.clone().prop_map(
                        |a| json!({"properties": {"a": true}, "additionalProperties": a})
                    ),
                    s.clone()
                        .prop_map(|p| json!({"patternProperties": {"^b": p}})),
                    s.clone().prop_map(|p| json!({"propertyNames": p})),
                    s.clone().prop_map(|d| json!({"dependencies": {"a": d}})),
                    s.clone().prop_map(|i| json!({"items": i})),
                    (list.clone(), s.clone())
                        .prop_map(|(t, a)| json!({"items": t, "additionalItems": a})),
                    s.clone().prop_map(|c| json!({"contains": c})),
                    list.clone().prop_map(|l| json!({"allOf": l})),
                    list.clone().prop_map(|l| json!({"anyOf": l})),
                    list.prop_map(|l| json!({"oneOf": l})),
                    s.clone().prop_map(|n| json!({"not": n})),
                    (s.clone(), s.clone(), s)
                        .prop_map(|(i, t, e)| json!({"if": i, "then": t, "else": e})),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn agrees_with_jsonschema_on_generated_cases(
                schema in schema(),
                instances in prop::collection::vec(instance(), 1..6),
            ) {
                let ours = validator(schema.clone());
                let theirs = match jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft7)
                    .build(&schema)
                {
                    Ok(v) => v,
                    Err(e) => panic!("{schema}: {e}"),
                };
                for instance in &instances {
                    prop_assert_eq!(
                        ours.is_valid(instance),
                        theirs.is_valid(instance),
                        "{} / {}", schema, instance
                    );
                    prop_assert_eq!(ours.is_valid(instance), ours.mismatches(instance).is_empty());
                }
            }
        }
    }
}
