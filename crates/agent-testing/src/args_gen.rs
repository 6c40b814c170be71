//! Generates tool arguments that satisfy an input schema (the P0 draft-07 subset),
//! deterministically for a seed.
//!
//! Supported: `type` (a name, or an array from which the first non-`null` type is
//! used), `const`, `default` (used as is), `enum` (picked by seed), objects (required
//! properties always, optional ones only when asked for, never extra keys except to
//! reach `minProperties` where `additionalProperties` allows it; array-form
//! `dependencies`), arrays (`items` as a schema or a tuple, `additionalItems`,
//! `minItems`/`maxItems`, `uniqueItems`), strings (`minLength`/`maxLength`, common
//! `format`s such as `date-time`), integers and numbers (`minimum`/`maximum`, both
//! forms of exclusive bounds, `multipleOf`), `boolean`, `null`, and local `$ref`s
//! (`#`, `#/definitions/..`, `#/$defs/..`) up to a depth limit.
//!
//! Limitations: a string `pattern` is not inverted: the first `examples` value (or
//! `default`/`enum`, which take precedence anyway) is used when present, else `"a"`
//! repeated `max(minLength, 1)` times, which may not match. Schema-form
//! `dependencies`, `contains`, `propertyNames` and `maxProperties` are ignored.
//! Recursion deeper than [`MAX_DEPTH`] yields `null`; past [`MINIMAL_DEPTH`] arrays get
//! `minItems` items and optional properties are omitted, so recursive schemas end.
//!
//! Property-name hints make generated calls read well in demos: a string property
//! (without `enum`/`format`/`pattern`) named `timezone` gets `"UTC"`, `path` gets
//! `"."` and `url` gets `"https://example.com"`, when the hint fits the length bounds.

use serde_json::{Map, Value};

/// Deepest nesting (objects, arrays and `$ref` hops) that is generated.
const MAX_DEPTH: usize = 32;
/// Nesting past which only what the schema requires is generated.
const MINIMAL_DEPTH: usize = 8;
/// Default span of generated numbers when a bound is missing.
const SPAN: i128 = 100;

/// A tiny deterministic PRNG (SplitMix64); not for cryptography.
#[derive(Debug, Clone)]
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A value in `lo..=hi` (`lo` when the range is empty).
    fn between(&mut self, lo: i128, hi: i128) -> i128 {
        if hi <= lo {
            return lo;
        }
        let span = u64::try_from(hi - lo).unwrap_or(u64::MAX - 1);
        lo + i128::from(self.below(span.saturating_add(1)))
    }
}

/// FNV-1a of `text`: a stable per-name salt for seeds.
pub(crate) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xCBF2_9CE4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// Generates a value valid for `schema` (see the module docs for what is supported).
/// The same `seed` always gives the same value; `include_optional` also fills
/// optional object properties.
pub(crate) fn generate(schema: &Value, seed: u64, include_optional: bool) -> Value {
    let mut generator = Generator {
        root: schema,
        rng: SplitMix64::new(seed),
        include_optional,
    };
    generator.value(schema, None, 0)
}

struct Generator<'a> {
    root: &'a Value,
    rng: SplitMix64,
    include_optional: bool,
}

fn non_negative(map: &Map<String, Value>, key: &str) -> Option<usize> {
    map.get(key)
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// The type to generate: the first non-`null` entry of `type`, else one inferred
/// from the keywords present (`None`: anything goes).
fn type_of(map: &Map<String, Value>) -> Option<&str> {
    match map.get("type") {
        Some(Value::String(name)) => return Some(name),
        Some(Value::Array(names)) => {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            return names
                .iter()
                .find(|name| **name != "null")
                .or(names.first())
                .copied();
        }
        _ => {}
    }
    let has = |keys: &[&str]| keys.iter().any(|key| map.contains_key(*key));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
    ]) {
        Some("object")
    } else if has(&["items", "minItems", "maxItems", "uniqueItems"]) {
        Some("array")
    } else if has(&["minLength", "maxLength", "pattern", "format"]) {
        Some("string")
    } else if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        Some("number")
    } else {
        None
    }
}

/// Whether `value` is an instance of the schema's `type` (true when it has none).
fn fits_type(map: &Map<String, Value>, value: &Value) -> bool {
    let fits = |name: &str| match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    };
    match map.get("type") {
        Some(Value::String(name)) => fits(name),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).any(fits),
        _ => true,
    }
}

/// Lower or upper bound: value and whether it is exclusive.
type Bound = Option<(f64, bool)>;

/// The tightest lower and upper bounds, from `minimum`/`maximum` and both the
/// draft-04 (boolean) and draft-06+ (numeric) forms of the exclusive keywords.
fn bounds(map: &Map<String, Value>) -> (Bound, Bound) {
    let number = |key: &str| map.get(key).and_then(Value::as_f64);
    let flag = |key: &str| map.get(key) == Some(&Value::Bool(true));
    let mut lo = number("minimum").map(|v| (v, flag("exclusiveMinimum")));
    if let Some(x) = number("exclusiveMinimum") {
        lo = match lo {
            Some((v, e)) if v > x || (v == x && e) => Some((v, e)),
            _ => Some((x, true)),
        };
    }
    let mut hi = number("maximum").map(|v| (v, flag("exclusiveMaximum")));
    if let Some(x) = number("exclusiveMaximum") {
        hi = match hi {
            Some((v, e)) if v < x || (v == x && e) => Some((v, e)),
            _ => Some((x, true)),
        };
    }
    (lo, hi)
}

/// A range of multipliers `k` (value = `k * step`) inside the bounds, narrowed to at
/// most [`SPAN`] + 1 choices near the lower bound (or near zero when unbounded).
fn k_range(lo: Bound, hi: Bound, step: f64) -> (i128, i128) {
    let first = lo.map(|(v, exclusive)| {
        let q = v / step;
        if exclusive && q.fract() == 0.0 {
            q as i128 + 1
        } else {
            q.ceil() as i128
        }
    });
    let last = hi.map(|(v, exclusive)| {
        let q = v / step;
        if exclusive && q.fract() == 0.0 {
            q as i128 - 1
        } else {
            q.floor() as i128
        }
    });
    match (first, last) {
        (Some(a), Some(b)) => (a, b.min(a.saturating_add(SPAN))),
        (Some(a), None) => (a, a.saturating_add(SPAN)),
        (None, Some(b)) if b >= 0 => ((b - SPAN).max(0), b),
        (None, Some(b)) => (b.saturating_sub(SPAN), b),
        (None, None) => (0, SPAN),
    }
}

fn within(value: f64, lo: Bound, hi: Bound) -> bool {
    let above = lo.is_none_or(|(v, e)| if e { value > v } else { value >= v });
    let below = hi.is_none_or(|(v, e)| if e { value < v } else { value <= v });
    value.is_finite() && above && below
}

/// Formats with a fixed, valid example (`date-time`, `uuid` are generated).
fn format_example(format: &str) -> Option<&'static str> {
    Some(match format {
        "date" => "2024-01-15",
        "time" => "12:00:00Z",
        "email" | "idn-email" => "user@example.com",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "uri" | "uri-reference" | "iri" | "iri-reference" | "url" => "https://example.com",
        "json-pointer" => "/a",
        "regex" => ".*",
        _ => return None,
    })
}

/// A value for a string property, hinted by its name.
fn name_hint(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "timezone" | "time_zone" | "tz" => Some("UTC"),
        "path" => Some("."),
        "url" => Some("https://example.com"),
        _ => None,
    }
}

const WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
];

impl<'a> Generator<'a> {
    fn value(&mut self, schema: &Value, name: Option<&str>, depth: usize) -> Value {
        let Some(map) = schema.as_object() else {
            // `true` accepts anything; `false` accepts nothing.
            return Value::Null;
        };
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            // Draft-07: siblings of `$ref` are ignored.
            return match self.resolve(reference) {
                Some(target) => self.value(target, name, depth + 1),
                None => Value::Null,
            };
        }
        if let Some(value) = map.get("const") {
            return value.clone();
        }
        if let Some(value) = map.get("default") {
            return value.clone();
        }
        if let Some(Value::Array(options)) = map.get("enum") {
            let options: Vec<&Value> = options.iter().filter(|v| fits_type(map, v)).collect();
            if !options.is_empty() {
                let pick = self.rng.below(options.len() as u64) as usize;
                return options.get(pick).map_or(Value::Null, |v| (*v).clone());
            }
        }
        match type_of(map) {
            Some("object") => self.object(map, depth),
            Some("array") => self.array(map, depth),
            Some("string") => self.string(map, name),
            Some("integer") => self.integer(map),
            Some("number") => self.number(map),
            Some("boolean") => Value::Bool(self.rng.next_u64() & 1 == 1),
            _ => Value::Null,
        }
    }

    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        ai_core::schema::resolve_local_ref(self.root, reference)
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Value {
        let empty = Map::new();
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let additional = map.get("additionalProperties");
        let optional = self.include_optional && depth < MINIMAL_DEPTH;

        let mut wanted: Vec<String> = properties
            .keys()
            .filter(|key| optional || required.contains(&key.as_str()))
            .cloned()
            .collect();
        for name in &required {
            if !wanted.iter().any(|w| w == name) {
                wanted.push((*name).to_owned());
            }
        }
        // Array-form `dependencies`: a present key brings the keys it names.
        if let Some(dependencies) = map.get("dependencies").and_then(Value::as_object) {
            let mut i = 0;
            while i < wanted.len() {
                if let Some(Value::Array(names)) = wanted.get(i).and_then(|w| dependencies.get(w)) {
                    for dependency in names.iter().filter_map(Value::as_str) {
                        if !wanted.iter().any(|w| w == dependency) {
                            wanted.push(dependency.to_owned());
                        }
                    }
                }
                i += 1;
            }
        }
        // Reach `minProperties` with optional properties, then extra keys if allowed.
        let min = non_negative(map, "minProperties").unwrap_or(0);
        for key in properties.keys() {
            if wanted.len() >= min {
                break;
            }
            if !wanted.contains(key) {
                wanted.push(key.clone());
            }
        }
        let extras_allowed = additional != Some(&Value::Bool(false));
        let mut extra = 0;
        while extras_allowed && wanted.len() < min {
            let key = format!("extra_{extra}");
            extra += 1;
            if !properties.contains_key(&key) && !wanted.contains(&key) {
                wanted.push(key);
            }
        }

        let mut out = Map::new();
        for key in wanted {
            let schema = properties
                .get(&key)
                .or(additional.filter(|a| a.is_object()));
            let value = match schema {
                Some(schema) => self.value(schema, Some(&key), depth + 1),
                None => Value::Null,
            };
            out.insert(key, value);
        }
        Value::Object(out)
    }

    fn array(&mut self, map: &Map<String, Value>, depth: usize) -> Value {
        let min = non_negative(map, "minItems").unwrap_or(0);
        let max = non_negative(map, "maxItems").unwrap_or(usize::MAX).max(min);
        let unique = map.get("uniqueItems") == Some(&Value::Bool(true));
        let items = map.get("items");
        let mut out: Vec<Value> = Vec::new();
        if let Some(Value::Array(tuple)) = items {
            let count = min.max(tuple.len()).min(max);
            let additional = map.get("additionalItems");
            for i in 0..count {
                let value = match tuple.get(i).or(additional) {
                    Some(schema) => self.value(schema, None, depth + 1),
                    None => Value::from(i),
                };
                out.push(value);
            }
            return Value::Array(out);
        }
        let wanted = if depth >= MINIMAL_DEPTH {
            min
        } else {
            min.max(1.min(max))
        };
        for i in 0..wanted {
            let Some(schema) = items else {
                out.push(Value::from(i));
                continue;
            };
            let mut value = self.value(schema, None, depth + 1);
            let mut attempts = 0;
            while unique && out.contains(&value) && attempts < 16 {
                value = self.value(schema, None, depth + 1);
                attempts += 1;
            }
            out.push(value);
        }
        Value::Array(out)
    }

    fn string(&mut self, map: &Map<String, Value>, name: Option<&str>) -> Value {
        let min = non_negative(map, "minLength").unwrap_or(0);
        let max = non_negative(map, "maxLength")
            .unwrap_or(usize::MAX)
            .max(min);
        let fits = |text: &str| (min..=max).contains(&text.chars().count());

        if let Some(format) = map.get("format").and_then(Value::as_str) {
            let generated = match format {
                "date-time" => Some(self.date_time()),
                "uuid" => Some(self.uuid()),
                other => format_example(other).map(str::to_owned),
            };
            if let Some(text) = generated.filter(|t| fits(t)) {
                return Value::String(text);
            }
        }
        if map.contains_key("pattern") {
            let example = map
                .get("examples")
                .and_then(Value::as_array)
                .and_then(|examples| examples.iter().find_map(Value::as_str));
            if let Some(example) = example {
                return Value::String(example.to_owned());
            }
            return Value::String("a".repeat(min.max(1).min(max)));
        }
        if let Some(hint) = name.and_then(name_hint).filter(|h| fits(h)) {
            return Value::String(hint.to_owned());
        }
        let word = WORDS
            .get(self.rng.below(WORDS.len() as u64) as usize)
            .copied()
            .unwrap_or("alpha");
        let mut text: String = word.chars().take(max).collect();
        while text.chars().count() < min {
            text.push('a');
        }
        Value::String(text)
    }

    fn integer(&mut self, map: &Map<String, Value>) -> Value {
        let (lo, hi) = bounds(map);
        // The smallest positive integer step that is a multiple of `multipleOf`.
        let step = match map.get("multipleOf").and_then(Value::as_f64) {
            Some(m) if m > 0.0 && m.is_finite() => (1..=1000u32)
                .map(|n| f64::from(n) * m)
                .find(|v| v.fract() == 0.0)
                .unwrap_or(1.0),
            _ => 1.0,
        };
        let (a, b) = k_range(lo, hi, step);
        let k = self.rng.between(a, b);
        let value = (k as f64 * step) as i128;
        let value = i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX });
        Value::from(value)
    }

    fn number(&mut self, map: &Map<String, Value>) -> Value {
        let (lo, hi) = bounds(map);
        if let Some(step) = map
            .get("multipleOf")
            .and_then(Value::as_f64)
            .filter(|m| *m > 0.0 && m.is_finite())
        {
            let (a, b) = k_range(lo, hi, step);
            return Value::from(self.rng.between(a, b) as f64 * step);
        }
        let k = self.rng.between(0, SPAN) as f64;
        let value = match (lo, hi) {
            (None, None) => k + 0.5,
            (Some((v, _)), None) => v + 0.5 + k,
            (None, Some((v, _))) => v - 0.5 - k,
            (Some((l, _)), Some((h, _))) => l + (h - l) * (1.0 + (k % 99.0)) / 100.0,
        };
        if within(value, lo, hi) {
            return Value::from(value);
        }
        // Fall back to the midpoint, then to a bound itself.
        let fallback = match (lo, hi) {
            (Some((l, _)), Some((h, _))) => [l + (h - l) / 2.0, l, h],
            (Some((l, _)), None) => [l + 1.0, l, l],
            (None, Some((h, _))) => [h - 1.0, h, h],
            (None, None) => [0.0, 0.0, 0.0],
        };
        let value = fallback
            .into_iter()
            .find(|v| within(*v, lo, hi))
            .unwrap_or(fallback[0]);
        Value::from(value)
    }

    /// An RFC 3339 timestamp in 2024, in UTC.
    fn date_time(&mut self) -> String {
        let month = 1 + self.rng.below(12);
        let day = 1 + self.rng.below(28);
        let hour = self.rng.below(24);
        let minute = self.rng.below(60);
        let second = self.rng.below(60);
        format!("2024-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
    }

    /// A version-4-shaped UUID.
    fn uuid(&mut self) -> String {
        let high = self.rng.next_u64();
        let low = self.rng.next_u64();
        let high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
        let low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            high >> 32,
            (high >> 16) & 0xFFFF,
            high & 0xFFFF,
            low >> 48,
            low & 0xFFFF_FFFF_FFFF
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validator(schema: &Value) -> ai_core::schema::ValueSchema {
        ai_core::schema::ValueSchema::compile(schema).unwrap()
    }

    /// Schemas (name, schema) covering the supported subset.
    fn schemas() -> Vec<(&'static str, Value)> {
        vec![
            ("empty object", json!({"type": "object", "properties": {}})),
            (
                "current time",
                json!({"type": "object", "properties": {"timezone": {"type": "string"}},
                       "required": ["timezone"], "additionalProperties": false}),
            ),
            (
                "scalars with bounds",
                json!({"type": "object", "additionalProperties": false,
                "required": ["i", "n", "s", "b", "z", "m", "e", "neg", "f", "tiny"],
                "properties": {
                  "i": {"type": "integer", "minimum": 3, "maximum": 9},
                  "n": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                  "s": {"type": "string", "minLength": 12, "maxLength": 14},
                  "b": {"type": "boolean"},
                  "z": {"type": "null"},
                  "m": {"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 30},
                  "e": {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 7},
                  "neg": {"type": "integer", "maximum": -1000},
                  "f": {"type": "number", "multipleOf": 0.25, "minimum": 1.1},
                  "tiny": {"type": "string", "maxLength": 2}
                }}),
            ),
            (
                "enums, const and nullable",
                json!({"type": "object", "additionalProperties": false,
                "required": ["unit", "mode", "maybe", "level", "note"],
                "properties": {
                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
                  "mode": {"const": "fast"},
                  "maybe": {"type": ["string", "null"], "maxLength": 3},
                  "level": {"type": ["null", "integer"], "enum": [null, 1, 2, 3]},
                  "note": {"type": "string", "default": "n/a"}
                }}),
            ),
            (
                "nested objects and arrays of objects",
                json!({"type": "object", "additionalProperties": false,
                "required": ["owner", "items"],
                "properties": {
                  "owner": {"type": "object", "additionalProperties": false,
                    "required": ["name", "address"],
                    "properties": {
                      "name": {"type": "string", "minLength": 1},
                      "address": {"type": "object", "required": ["city"],
                        "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}
                    }},
                  "items": {"type": "array", "minItems": 2, "maxItems": 4,
                    "items": {"type": "object", "additionalProperties": false,
                      "required": ["sku", "qty"],
                      "properties": {
                        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$",
                                "examples": ["ABC-123"]},
                        "qty": {"type": "integer", "minimum": 1}
                      }}},
                  "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
                }}),
            ),
            (
                "unique booleans and tuples",
                json!({"type": "object", "required": ["flags", "pair"], "properties": {
                  "flags": {"type": "array", "items": {"type": "boolean"},
                            "minItems": 2, "uniqueItems": true},
                  "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                           "additionalItems": false}
                }}),
            ),
            (
                "refs to definitions and $defs",
                json!({"type": "object", "additionalProperties": false,
                  "required": ["a", "b"],
                  "properties": {"a": {"$ref": "#/definitions/point"},
                                 "b": {"$ref": "#/$defs/color"}},
                  "definitions": {"point": {"type": "object", "required": ["x", "y"],
                    "additionalProperties": false,
                    "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
                  "$defs": {"color": {"type": "string", "enum": ["red", "green"]}}}),
            ),
            (
                "recursive ref",
                json!({"type": "object", "required": ["root"],
                  "properties": {"root": {"$ref": "#/definitions/node"}},
                  "definitions": {"node": {"type": "object", "required": ["value", "children"],
                    "additionalProperties": false,
                    "properties": {"value": {"type": "integer"},
                      "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                      "next": {"$ref": "#/definitions/node"}}}}}),
            ),
            (
                "formats",
                json!({"type": "object", "additionalProperties": false,
                "required": ["when", "day", "id", "mail", "site", "ip", "path", "url"],
                "properties": {
                  "when": {"type": "string", "format": "date-time"},
                  "day": {"type": "string", "format": "date"},
                  "id": {"type": "string", "format": "uuid"},
                  "mail": {"type": "string", "format": "email"},
                  "site": {"type": "string", "format": "uri"},
                  "ip": {"type": "string", "format": "ipv4"},
                  "path": {"type": "string"},
                  "url": {"type": "string"}
                }}),
            ),
            (
                "min properties and dependencies",
                json!({"type": "object", "minProperties": 3, "required": ["a"],
                  "dependencies": {"a": ["c"]},
                  "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                                 "c": {"type": "boolean"}},
                  "additionalProperties": {"type": "integer"}}),
            ),
            (
                "untyped and inferred",
                json!({"type": "object", "required": ["any", "inferred", "list"],
                  "properties": {"any": {}, "inferred": {"minLength": 4},
                                 "list": {"minItems": 3, "uniqueItems": true}}}),
            ),
        ]
    }

    #[test]
    fn generated_values_validate_for_every_schema_seed_and_mode() {
        for (name, schema) in schemas() {
            let validator = validator(&schema);
            for seed in 0..64 {
                for optional in [false, true] {
                    let value = generate(&schema, seed, optional);
                    let errors = validator.check(&value).err();
                    assert!(
                        errors.is_none(),
                        "{name} (seed {seed}, optional {optional}): {value} -> {errors:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn same_seed_same_value_and_seeds_vary() {
        for (name, schema) in schemas() {
            assert_eq!(
                generate(&schema, 42, true),
                generate(&schema, 42, true),
                "{name}"
            );
        }
        let schema = json!({"type": "object", "required": ["n", "s"],
            "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}});
        let values: std::collections::HashSet<String> = (0..16)
            .map(|seed| generate(&schema, seed, false).to_string())
            .collect();
        assert!(values.len() > 1, "{values:?}");
    }

    #[test]
    fn draft_04_boolean_exclusive_bounds_are_honoured() {
        // Not valid draft-07 (so not validated here), but MCP servers send it.
        let schema = json!({"type": "object", "required": ["x", "y"], "properties": {
            "x": {"type": "integer", "minimum": 0, "exclusiveMinimum": true,
                  "maximum": 2, "exclusiveMaximum": true},
            "y": {"type": "number", "minimum": 0, "exclusiveMinimum": true,
                  "maximum": 0.5, "exclusiveMaximum": true}}});
        for seed in 0..32 {
            let value = generate(&schema, seed, false);
            assert_eq!(value["x"], json!(1));
            let y = value["y"].as_f64().unwrap();
            assert!(y > 0.0 && y < 0.5, "{y}");
        }
    }

    #[test]
    fn optional_properties_are_omitted_unless_asked_for() {
        let schema = json!({"type": "object", "required": ["a"],
            "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}});
        let minimal = generate(&schema, 1, false);
        assert_eq!(minimal.as_object().map(|m| m.len()), Some(1));
        let full = generate(&schema, 1, true);
        assert!(full.get("a").is_some() && full.get("b").is_some());
    }

    #[test]
    fn name_hints_make_demo_arguments_readable() {
        let schema = json!({"type": "object", "required": ["timezone", "path", "url"],
            "properties": {"timezone": {"type": "string"}, "path": {"type": "string"},
                           "url": {"type": "string"}}});
        assert_eq!(
            generate(&schema, 9, false),
            json!({"timezone": "UTC", "path": ".", "url": "https://example.com"})
        );
        // An enum wins over the hint.
        let schema = json!({"type": "object", "required": ["timezone"],
            "properties": {"timezone": {"type": "string", "enum": ["Europe/Paris"]}}});
        assert_eq!(
            generate(&schema, 9, false),
            json!({"timezone": "Europe/Paris"})
        );
    }

    #[test]
    fn pattern_falls_back_to_examples_or_repeated_a() {
        let schema = json!({"type": "object", "required": ["code", "other"],
            "properties": {
                "code": {"type": "string", "pattern": "^x+$", "examples": ["xxx"]},
                "other": {"type": "string", "pattern": "^[a-z]+$", "minLength": 3}}});
        assert_eq!(
            generate(&schema, 0, false),
            json!({"code": "xxx", "other": "aaa"})
        );
    }

    #[test]
    fn unresolvable_refs_and_false_schemas_give_null() {
        let schema = json!({"type": "object", "required": ["a"],
            "properties": {"a": {"$ref": "https://example.com/schema.json"}}});
        assert_eq!(generate(&schema, 0, false), json!({"a": null}));
        assert_eq!(generate(&json!(false), 0, false), Value::Null);
    }

    #[test]
    fn splitmix_is_deterministic() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        for _ in 0..100 {
            let v = a.between(-3, 3);
            assert!((-3..=3).contains(&v));
        }
    }
}
