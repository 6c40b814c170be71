//! Borrowed serde DTOs of chat-completions responses and stream chunks.
//!
//! Private to the crate: the rest of the workspace sees only `ai_core` types. The
//! DTOs borrow from the event text and avoid heap allocations on the hot path: string
//! fields that may contain escapes (content, arguments) are kept as raw JSON and
//! unescaped by [`raw_text`] into a reusable buffer, and chunks are parsed by
//! streaming visitors ([`parse_chunk`]) that hand each piece to a [`ChunkSink`].

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A string that borrows from the input when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Str<'a>(pub(crate) Cow<'a, str>);

impl Str<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// Receives what a chunk (or a whole response) says, in the order it says it.
///
/// The chunk is never materialized: the visitors below hand each piece to the sink
/// as soon as it is parsed, so decoding a chunk allocates nothing and moves no large
/// structs around.
pub(crate) trait ChunkSink {
    /// `choices[0].delta.content` (or `message.content`), as raw JSON.
    fn content(&mut self, raw: &RawValue);
    /// `reasoning_content` or `reasoning` of the delta (or message), as raw JSON: at
    /// most one per delta (see [`DeltaSeed`]).
    fn reasoning(&mut self, raw: &RawValue);
    /// `refusal` of the delta (or message), as raw JSON.
    fn refusal(&mut self, raw: &RawValue);
    /// One element of `tool_calls`, with its position in the array.
    fn tool_call(&mut self, call: &ToolCallDto<'_>, position: usize);
    /// The legacy `function_call`.
    fn function_call(&mut self, function: &FunctionDto<'_>);
    /// A non-null `finish_reason` of choice 0.
    fn finish_reason(&mut self, reason: &str);
    /// A `usage` object.
    fn usage(&mut self, usage: &UsageDto);
    /// The `model` field.
    fn model(&mut self, model: &str);
    /// The `id` field (the response's id).
    fn id(&mut self, id: &str);
    /// A non-null top-level `error`, as raw JSON.
    fn error(&mut self, raw: &RawValue);
    /// A choice other than choice 0 was skipped.
    fn other_choice(&mut self);
}

/// Parses one chunk or response object, feeding `sink`.
pub(crate) fn parse_chunk<S: ChunkSink>(data: &str, sink: &mut S) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(data);
    ChunkSeed(sink).deserialize(&mut deserializer)?;
    deserializer.end()
}

/// Top-level members that the decoder acts on; an envelope never contains them.
/// (`x_groq` carries Groq's usage on the last chunk.)
const ACTED_ON: [&[u8]; 4] = [b"choices", b"usage", b"error", b"x_groq"];

/// Longest envelope worth remembering.
const MAX_ENVELOPE: usize = 1024;

/// Length of the chunk's envelope: the bytes from the opening `{` up to and
/// including the `,` before the first member the decoder acts on (`choices`, `usage`
/// or `error`), when there is at least one member before it and no key in it has an
/// escape. `data` must be a JSON object that was already parsed successfully, so the
/// scan does not validate.
pub(crate) fn envelope_len(data: &str) -> Option<usize> {
    let bytes = data.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut last_comma = None;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = i + 1 + memchr::memchr2(b'"', b'\\', bytes.get(i + 1..)?)?;
        if bytes[key_end] != b'"' {
            return None;
        }
        if ACTED_ON.contains(&&bytes[i + 1..key_end]) {
            return last_comma.map(|comma: usize| comma + 1);
        }
        i = skip_ws(bytes, key_end + 1);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i = skip_value(bytes, i + 1)?;
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b',') || i >= MAX_ENVELOPE {
            return None;
        }
        last_comma = Some(i);
        i += 1;
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Index just past the value starting at (or after whitespace from) `i`.
fn skip_value(bytes: &[u8], i: usize) -> Option<usize> {
    skip_value_within(bytes, i, usize::MAX)
}

/// [`skip_value`] for a value nested at most `max_depth` arrays and objects deep;
/// `None` for a deeper one. Like `skip_value` it does not validate: on malformed
/// JSON it returns some index or `None`.
fn skip_value_within(bytes: &[u8], i: usize, max_depth: usize) -> Option<usize> {
    let mut i = skip_ws(bytes, i);
    match *bytes.get(i)? {
        b'"' => skip_string(bytes, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match *bytes.get(i)? {
                    b'"' => {
                        i = skip_string(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        if depth > max_depth {
                            return None;
                        }
                    }
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(
                bytes.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            Some(i)
        }
    }
}

/// Index just past the string literal starting at `i` (a `"`).
fn skip_string(bytes: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        if bytes[i] == b'\\' {
            i += 2;
        } else {
            return Some(i + 1);
        }
    }
}

/// Deepest nesting of a delta parsed on its own by [`parse_delta`]: far below
/// serde_json's recursion limit even with the three levels a whole chunk adds
/// around it, so a delta parses alone exactly when it parses in its chunk.
const MAX_DELTA_DEPTH: usize = 64;

/// Where the delta of a chunk of the common shape sits: `head` is the length of the
/// bytes before the value of `choices[0].delta`, `tail` the offset of the bytes
/// after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeltaSpan {
    pub(crate) head: usize,
    pub(crate) tail: usize,
}

/// The delta's place in `data`, a chunk that was parsed successfully, when the
/// chunk has the shape every content chunk of a stream has and the bytes around the
/// delta do nothing:
/// - before `choices`, members other than `usage`, `error` and `x_groq` (or those
///   as `null`);
/// - `"choices": [{`, then members of the choice up to `delta`, `index` as `0`
///   among them (so the delta applies as it is parsed), `finish_reason` only as
///   `null`, no `message`;
/// - after the delta only members of the choice other than `index`, `delta` and
///   `message` (`finish_reason` only as `null`), the end of the only choice, and
///   top-level members other than `choices`, `usage`, `error` and `x_groq` (or
///   those as `null`).
///
/// No key may hold an escape; whitespace is allowed where JSON allows it. `None`
/// otherwise.
///
/// A later chunk with the same head bytes then differs only in its delta and its
/// tail: identical bytes parse to identical values, and these act on nothing (the
/// usage model is the first non-empty `model` of the stream, which this chunk
/// already offered), so when its tail acts on nothing either only the delta needs
/// parsing ([`delta_of`], [`inert_tail_start`]).
pub(crate) fn delta_span(data: &[u8]) -> Option<DeltaSpan> {
    let mut i = skip_ws(data, 0);
    if data.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    // Members before `choices`.
    loop {
        let (key, value) = member(data, i)?;
        if key == b"choices" {
            i = value;
            break;
        }
        if ACTED_ON.contains(&key) && !is_null(data, value) {
            return None;
        }
        i = skip_ws(data, skip_value(data, value)?);
        if data.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
    // `[{`, members of the choice up to `delta`: `index` as `0` among them.
    i = expect(data, i, b'[')?;
    i = expect(data, i, b'{')?;
    let mut index_0 = false;
    let head = loop {
        let (key, value) = member(data, i)?;
        let inert = match key {
            b"delta" if index_0 => break value,
            b"index" => {
                index_0 = data.get(value) == Some(&b'0');
                index_0
            }
            b"delta" | b"message" => false,
            b"finish_reason" => is_null(data, value),
            _ => true,
        };
        if !inert {
            return None;
        }
        i = expect(data, skip_value(data, value)?, b',')?;
    };
    let tail = skip_value(data, head)?;
    // This chunk's `model`, wherever it is, was just taken or ignored: the same bytes
    // in a later chunk do nothing.
    inert_tail(data, tail, false, true)?;
    Some(DeltaSpan { head, tail })
}

/// The end of the delta value starting at `head` in `data`, when the bytes after
/// it are a tail that acts on nothing (see [`delta_span`]) and is valid JSON the way
/// the whole parse would find it. For a chunk whose tail differs from the learned
/// one; the delta itself is left to its parse. `model_known`: the session has its
/// model, so a `model` string in the tail does nothing either.
pub(crate) fn inert_tail_start(data: &[u8], head: usize, model_known: bool) -> Option<usize> {
    let end = skip_value_within(data, head, MAX_DELTA_DEPTH)?;
    inert_tail(data, end, true, model_known)?;
    Some(end)
}

/// Checks the bytes from `i`, just after the delta value, to the end of `data`:
/// the rest of the only choice and of the chunk, acting on nothing. With
/// `validate` (bytes not parsed before) every key is checked for control
/// characters and every value by serde_json, as the whole parse would check them.
/// A `model` string does nothing when `model_known` (the first non-empty one is
/// the session's).
fn inert_tail(data: &[u8], mut i: usize, validate: bool, model_known: bool) -> Option<()> {
    i = skip_ws(data, i);
    while data.get(i) == Some(&b',') {
        let (key, value) = member(data, i + 1)?;
        let inert = match key {
            b"index" | b"delta" | b"message" => false,
            b"finish_reason" => is_null(data, value),
            _ => true,
        };
        if !inert {
            return None;
        }
        i = skip_ws(data, checked_value_end(data, key, value, validate)?);
    }
    i = expect(data, i, b'}')?;
    i = expect(data, i, b']')?;
    while data.get(i) == Some(&b',') {
        let (key, value) = member(data, i + 1)?;
        let end = checked_value_end(data, key, value, validate)?;
        let inert = match key {
            // A string without escapes: the whole parse reads it as a string, which
            // is stricter about escapes than skipping it.
            b"model" => {
                is_null(data, value)
                    || (model_known
                        && data.get(value) == Some(&b'"')
                        && memchr::memchr(b'\\', &data[value..end]).is_none())
            }
            _ if ACTED_ON.contains(&key) => is_null(data, value),
            _ => true,
        };
        if !inert {
            return None;
        }
        i = skip_ws(data, end);
    }
    i = expect(data, i, b'}')?;
    (i == data.len()).then_some(())
}

/// The end of a member's value that starts at `value`, checked (with `validate`)
/// as the whole parse would check it.
fn checked_value_end(data: &[u8], key: &[u8], value: usize, validate: bool) -> Option<usize> {
    if validate && key.iter().any(|&b| b < 0x20) {
        return None;
    }
    if is_null(data, value) {
        return Some(value + 4);
    }
    let end = skip_value_within(data, value, MAX_DELTA_DEPTH)?;
    if validate && serde_json::from_slice::<IgnoredAny>(data.get(value..end)?).is_err() {
        return None;
    }
    Some(end)
}

/// The member at (or after whitespace from) `i`: its key (without quotes; `None`
/// when it has an escape) and the index where its value starts.
fn member(data: &[u8], i: usize) -> Option<(&[u8], usize)> {
    let i = skip_ws(data, i);
    if data.get(i) != Some(&b'"') {
        return None;
    }
    let key_end = i + 1 + memchr::memchr2(b'"', b'\\', data.get(i + 1..)?)?;
    if data[key_end] != b'"' {
        return None;
    }
    let colon = skip_ws(data, key_end + 1);
    if data.get(colon) != Some(&b':') {
        return None;
    }
    Some((&data[i + 1..key_end], skip_ws(data, colon + 1)))
}

/// The index after `byte` at (or after whitespace from) `i`, whitespace after it
/// skipped too.
fn expect(data: &[u8], i: usize, byte: u8) -> Option<usize> {
    let i = skip_ws(data, i);
    (data.get(i) == Some(&byte)).then(|| skip_ws(data, i + 1))
}

fn is_null(data: &[u8], at: usize) -> bool {
    data.get(at..at + 4) == Some(b"null")
        && !matches!(data.get(at + 4), Some(b) if b.is_ascii_alphanumeric())
}

/// The delta of a chunk whose head and tail matched a [`DeltaSpan`] learned before:
/// the bytes between them, when they hold exactly one value (not too deep) and are
/// UTF-8. `None` sends the chunk down the whole parse.
pub(crate) fn delta_of(middle: &[u8]) -> Option<&str> {
    if skip_value_within(middle, 0, MAX_DELTA_DEPTH)? != middle.len() {
        return None;
    }
    std::str::from_utf8(middle).ok()
}

/// Parses a delta alone (see [`delta_span`]), feeding `sink` as the whole chunk
/// would.
pub(crate) fn parse_delta<S: ChunkSink>(
    delta: &str,
    sink: &mut S,
) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(delta);
    Nullable(DeltaSeed(sink)).deserialize(&mut deserializer)?;
    deserializer.end()
}

/// A sink that acts on nothing: for parsing a chunk only to find its error.
pub(crate) struct Inert;

impl ChunkSink for Inert {
    fn content(&mut self, _: &RawValue) {}
    fn reasoning(&mut self, _: &RawValue) {}
    fn refusal(&mut self, _: &RawValue) {}
    fn tool_call(&mut self, _: &ToolCallDto<'_>, _: usize) {}
    fn function_call(&mut self, _: &FunctionDto<'_>) {}
    fn finish_reason(&mut self, _: &str) {}
    fn usage(&mut self, _: &UsageDto) {}
    fn model(&mut self, _: &str) {}
    fn id(&mut self, _: &str) {}
    fn error(&mut self, _: &RawValue) {}
    fn other_choice(&mut self) {}
}

/// Applies `seed` to a value that may be `null` (then nothing happens).
struct Nullable<T>(T);

impl<'de, T: DeserializeSeed<'de, Value = ()>> DeserializeSeed<'de> for Nullable<T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: DeserializeSeed<'de, Value = ()>> Visitor<'de> for Nullable<T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.deserialize(deserializer)
    }
}

struct ChunkSeed<'s, S>(&'s mut S);

impl<'de, S: ChunkSink> DeserializeSeed<'de> for ChunkSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, S: ChunkSink> Visitor<'de> for ChunkSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a chat completion object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let sink = self.0;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_str() {
                "choices" => map.next_value_seed(Nullable(ChoicesSeed(&mut *sink)))?,
                "usage" => {
                    if let Some(usage) = map.next_value::<Option<UsageDto>>()? {
                        sink.usage(&usage);
                    }
                }
                "x_groq" => {
                    if let Some(XGroqDto { usage: Some(usage) }) =
                        map.next_value::<Option<XGroqDto>>()?
                    {
                        sink.usage(&usage);
                    }
                }
                "error" => {
                    if let Some(raw) = map.next_value::<Option<&'de RawValue>>()?
                        && raw.get().trim_ascii() != "null"
                    {
                        sink.error(raw);
                    }
                }
                "model" => {
                    if let Some(model) = map.next_value::<Option<Str<'de>>>()? {
                        sink.model(model.as_str());
                    }
                }
                "id" => {
                    if let Some(id) = map.next_value::<Option<Str<'de>>>()? {
                        sink.id(id.as_str());
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ChoicesSeed<'s, S>(&'s mut S);

impl<'de, S: ChunkSink> DeserializeSeed<'de> for ChoicesSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, S: ChunkSink> Visitor<'de> for ChoicesSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of choices")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let sink = self.0;
        while seq.next_element_seed(ChoiceSeed(&mut *sink))?.is_some() {}
        Ok(())
    }
}

/// One choice. Only choice 0 (or a choice without index) is applied. When `index`
/// comes before `delta`, as every provider sends it, the delta is applied while it
/// is parsed; otherwise it is kept as raw JSON and applied once the index is known.
struct ChoiceSeed<'s, S>(&'s mut S);

impl<'de, S: ChunkSink> DeserializeSeed<'de> for ChoiceSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, S: ChunkSink> Visitor<'de> for ChoiceSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a choice object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let sink = self.0;
        let mut index: Option<u32> = None;
        let mut deferred: Option<&'de RawValue> = None;
        let mut finish: Option<Str<'de>> = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_str() {
                "index" => index = map.next_value()?,
                "delta" | "message" => match index {
                    Some(0) => map.next_value_seed(Nullable(DeltaSeed(&mut *sink)))?,
                    Some(_) => {
                        map.next_value::<IgnoredAny>()?;
                    }
                    None => deferred = Some(map.next_value()?),
                },
                "finish_reason" => finish = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if index.unwrap_or(0) != 0 {
            sink.other_choice();
            return Ok(());
        }
        if let Some(raw) = deferred {
            let mut deserializer = serde_json::Deserializer::from_str(raw.get());
            Nullable(DeltaSeed(&mut *sink))
                .deserialize(&mut deserializer)
                .map_err(de::Error::custom)?;
        }
        if let Some(reason) = finish {
            sink.finish_reason(reason.as_str());
        }
        Ok(())
    }
}

struct DeltaSeed<'s, S>(&'s mut S);

impl<'de, S: ChunkSink> DeserializeSeed<'de> for DeltaSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, S: ChunkSink> Visitor<'de> for DeltaSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a delta or message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let sink = self.0;
        // Servers moving from `reasoning_content` to `reasoning` (vLLM) send both
        // with the same text in one delta: only the first one with text counts.
        let mut reasoning_taken = false;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_str() {
                "content" => {
                    if let Some(raw) = map.next_value::<Option<&'de RawValue>>()? {
                        sink.content(raw);
                    }
                }
                "reasoning_content" | "reasoning" => {
                    if let Some(raw) = map.next_value::<Option<&'de RawValue>>()?
                        && !reasoning_taken
                        && !matches!(raw.get().trim_ascii(), "null" | "\"\"")
                    {
                        reasoning_taken = true;
                        sink.reasoning(raw);
                    }
                }
                "refusal" => {
                    if let Some(raw) = map.next_value::<Option<&'de RawValue>>()? {
                        sink.refusal(raw);
                    }
                }
                "tool_calls" => map.next_value_seed(Nullable(ToolCallsSeed(&mut *sink)))?,
                "function_call" => {
                    if let Some(function) = map.next_value::<Option<FunctionDto<'de>>>()? {
                        sink.function_call(&function);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct ToolCallsSeed<'s, S>(&'s mut S);

impl<'de, S: ChunkSink> DeserializeSeed<'de> for ToolCallsSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, S: ChunkSink> Visitor<'de> for ToolCallsSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tool calls")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut position = 0;
        while let Some(call) = seq.next_element::<ToolCallDto<'de>>()? {
            self.0.tool_call(&call, position);
            position += 1;
        }
        Ok(())
    }
}

/// One tool-call delta (or a whole call in a response).
#[derive(Debug, Deserialize)]
pub(crate) struct ToolCallDto<'a> {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(borrow, default)]
    pub(crate) id: Option<Str<'a>>,
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(crate) function: Option<FunctionDto<'a>>,
    /// Provider extras on the call (Gemini's `{"google": {"thought_signature": ..}}`),
    /// as raw JSON.
    #[serde(borrow, default)]
    pub(crate) extra_content: Option<&'a RawValue>,
}

/// The function part of a tool call.
#[derive(Debug, Deserialize)]
pub(crate) struct FunctionDto<'a> {
    #[serde(borrow, default)]
    pub(crate) name: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(crate) arguments: Option<&'a RawValue>,
}

/// Groq's extension member; its `usage` (on the last chunk) is the turn's usage.
#[derive(Debug, Deserialize)]
pub(crate) struct XGroqDto {
    #[serde(default)]
    pub(crate) usage: Option<UsageDto>,
}

/// Token usage as providers report it.
#[derive(Debug, Deserialize)]
pub(crate) struct UsageDto {
    #[serde(default, alias = "input_tokens")]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(default, alias = "output_tokens")]
    pub(crate) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) total_tokens: Option<u64>,
    /// `cached_tokens` inside (OpenAI, Groq, xAI, llama.cpp, DeepSeek).
    #[serde(default, alias = "input_tokens_details")]
    pub(crate) prompt_tokens_details: Option<TokenDetailsDto>,
    /// `reasoning_tokens` inside.
    #[serde(default, alias = "output_tokens_details")]
    pub(crate) completion_tokens_details: Option<TokenDetailsDto>,
    /// DeepSeek's own name for cached prompt tokens (beside the details).
    #[serde(default)]
    pub(crate) prompt_cache_hit_tokens: Count,
    /// What the call cost in US dollars, when the server says so (OpenRouter,
    /// LiteLLM with `include_cost_in_streaming_usage`).
    #[serde(default)]
    pub(crate) cost: Option<serde_json::Value>,
}

impl UsageDto {
    /// Prompt tokens served from the cache, when reported.
    pub(crate) fn cached_tokens(&self) -> Option<u64> {
        self.prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens.0)
    }

    /// Completion tokens spent on reasoning, when reported.
    pub(crate) fn reasoning_tokens(&self) -> Option<u64> {
        self.completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
    }
}

/// `prompt_tokens_details` / `completion_tokens_details`: only the counts the
/// decoder reports (the others, e.g. audio tokens, are ignored). Read leniently: a
/// details member of an unexpected shape is no count, never a malformed chunk.
#[derive(Debug, Default)]
pub(crate) struct TokenDetailsDto {
    pub(crate) cached_tokens: Option<u64>,
    pub(crate) reasoning_tokens: Option<u64>,
}

impl<'de> Deserialize<'de> for TokenDetailsDto {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DetailsVisitor;
        impl<'de> Visitor<'de> for DetailsVisitor {
            type Value = TokenDetailsDto;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a token details object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut details = TokenDetailsDto::default();
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    match key.as_str() {
                        "cached_tokens" => details.cached_tokens = map.next_value::<Count>()?.0,
                        "reasoning_tokens" => {
                            details.reasoning_tokens = map.next_value::<Count>()?.0;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(details)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TokenDetailsDto::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(TokenDetailsDto::default())
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(TokenDetailsDto::default())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(TokenDetailsDto::default())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(TokenDetailsDto::default())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(TokenDetailsDto::default())
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(TokenDetailsDto::default())
            }
        }
        deserializer.deserialize_any(DetailsVisitor)
    }
}

/// A token count read leniently: a non-negative integer (or an integral float) is a
/// count; anything else (null, a string, a negative number) is none.
#[derive(Debug, Default)]
pub(crate) struct Count(Option<u64>);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl<'de> Visitor<'de> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a token count")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
                Ok(Count(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
                Ok(Count(u64::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Count, E> {
                // Integral and in range only; the cast cannot then lose anything.
                if v.fract() == 0.0 && (0.0..1e15).contains(&v) {
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    return Ok(Count(Some(v as u64)));
                }
                Ok(Count(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Count, E> {
                Ok(Count(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Count, E> {
                Ok(Count(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Count, E> {
                Ok(Count(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Count(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Count(None))
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

/// What a raw JSON value holding text turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RawText<'a> {
    /// `null`.
    Null,
    /// A string, unescaped.
    Str(&'a str),
    /// Any other JSON value, as raw JSON text.
    Other(&'a str),
}

/// Reads a raw JSON value as text: a string is unescaped (borrowed when it has no
/// escapes, otherwise written into `scratch`), `null` is [`RawText::Null`] and any
/// other value is returned as its JSON text.
pub(crate) fn raw_text<'r>(raw: &'r RawValue, scratch: &'r mut String) -> RawText<'r> {
    let text = raw.get().trim_ascii();
    if text == "null" {
        return RawText::Null;
    }
    let Some(inner) = text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return RawText::Other(text);
    };
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        return RawText::Str(inner);
    }
    scratch.clear();
    unescape_into(inner, scratch);
    RawText::Str(scratch)
}

/// Unescapes the inside of a JSON string literal. The input comes from serde_json,
/// which validated it; anything unexpected still becomes U+FFFD rather than a panic.
pub(crate) fn unescape_into(inner: &str, out: &mut String) {
    let bytes = inner.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let Some(offset) = memchr::memchr(b'\\', &bytes[i..]) else {
            out.push_str(&inner[i..]);
            return;
        };
        out.push_str(&inner[i..i + offset]);
        i += offset + 1;
        let Some(&escape) = bytes.get(i) else {
            out.push('\u{fffd}');
            return;
        };
        i += 1;
        match escape {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let Some(high) = hex4(bytes, i) else {
                    out.push('\u{fffd}');
                    continue;
                };
                i += 4;
                if (0xD800..0xDC00).contains(&high) {
                    let low = if bytes.get(i) == Some(&b'\\') && bytes.get(i + 1) == Some(&b'u') {
                        hex4(bytes, i + 2).filter(|low| (0xDC00..0xE000).contains(low))
                    } else {
                        None
                    };
                    match low {
                        Some(low) => {
                            i += 6;
                            let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        None => out.push('\u{fffd}'),
                    }
                } else {
                    out.push(char::from_u32(high).unwrap_or('\u{fffd}'));
                }
            }
            _ => {
                // Not a JSON escape; keep the character after the backslash. `i` may
                // sit inside a multi-byte character, so resync on a char boundary.
                out.push('\u{fffd}');
                while i < bytes.len() && !inner.is_char_boundary(i) {
                    i += 1;
                }
            }
        }
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let mut value = 0u32;
    for &digit in digits {
        value = value * 16 + char::from(digit).to_digit(16)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unescape(json: &str) -> String {
        let raw: &RawValue = serde_json::from_str(json).unwrap();
        let mut scratch = String::new();
        match raw_text(raw, &mut scratch) {
            RawText::Str(s) => s.to_owned(),
            other => panic!("not a string: {other:?}"),
        }
    }

    #[test]
    fn unescape_matches_serde_json() {
        for json in [
            r#""plain""#,
            r#""{\"city\": \"Paris\"}""#,
            r#""tab\there\nnew \\ slash \/ \b \f \r""#,
            r#""\u00e9\u20ac \ud83e\udd80 é""#,
            r#""""#,
        ] {
            let expected: String = serde_json::from_str(json).unwrap();
            assert_eq!(unescape(json), expected, "{json}");
        }
    }

    #[test]
    fn lone_surrogates_become_replacement() {
        let mut out = String::new();
        unescape_into(r"a\ud800b\udc00c\ud800\u0041", &mut out);
        assert_eq!(out, "a\u{fffd}b\u{fffd}c\u{fffd}A");
        let mut out = String::new();
        unescape_into(r"x\u12\", &mut out);
        assert!(out.starts_with('x'));
    }

    #[test]
    fn raw_text_kinds() {
        let mut scratch = String::new();
        let raw: &RawValue = serde_json::from_str("null").unwrap();
        assert_eq!(raw_text(raw, &mut scratch), RawText::Null);
        let raw: &RawValue = serde_json::from_str(r#"{"a": 1}"#).unwrap();
        assert_eq!(raw_text(raw, &mut scratch), RawText::Other(r#"{"a": 1}"#));
    }

    #[derive(Default, Debug, PartialEq)]
    struct Recorder(Vec<String>);

    impl ChunkSink for Recorder {
        fn content(&mut self, raw: &RawValue) {
            self.0.push(format!("content {}", raw.get()));
        }
        fn reasoning(&mut self, raw: &RawValue) {
            self.0.push(format!("reasoning {}", raw.get()));
        }
        fn refusal(&mut self, raw: &RawValue) {
            self.0.push(format!("refusal {}", raw.get()));
        }
        fn tool_call(&mut self, call: &ToolCallDto<'_>, position: usize) {
            let borrowed = matches!(
                call.id.as_ref().map(|s| &s.0),
                Some(Cow::Borrowed(_)) | None
            );
            self.0.push(format!(
                "call #{position} index {:?} borrowed {borrowed}",
                call.index
            ));
        }
        fn function_call(&mut self, _: &FunctionDto<'_>) {
            self.0.push("function_call".into());
        }
        fn finish_reason(&mut self, reason: &str) {
            self.0.push(format!("finish {reason}"));
        }
        fn usage(&mut self, usage: &UsageDto) {
            self.0.push(format!("usage {:?}", usage.total_tokens));
        }
        fn model(&mut self, model: &str) {
            self.0.push(format!("model {model}"));
        }
        fn id(&mut self, _: &str) {}
        fn error(&mut self, raw: &RawValue) {
            self.0.push(format!("error {}", raw.get()));
        }
        fn other_choice(&mut self) {
            self.0.push("other choice".into());
        }
    }

    fn record(json: &str) -> Vec<String> {
        let mut recorder = Recorder::default();
        parse_chunk(json, &mut recorder).unwrap();
        recorder.0
    }

    #[test]
    fn envelope_is_the_members_before_choices() {
        let data = r#"{"id":"c-1","object":"chat.completion.chunk","created":17,"meta":{"a":[1,{"b":"}"}]},"s":"x\"y","n":null, "choices":[],"usage":null}"#;
        let len = envelope_len(data).unwrap();
        assert_eq!(
            &data[..len],
            r#"{"id":"c-1","object":"chat.completion.chunk","created":17,"meta":{"a":[1,{"b":"}"}]},"s":"x\"y","n":null,"#
        );
        assert_eq!(envelope_len(r#"{"choices":[],"id":"x"}"#), None);
        assert_eq!(envelope_len(r#"{"id":"x"}"#), None);
        assert_eq!(envelope_len(r#"{"id":"x","usage":{}}"#), Some(10));
        assert_eq!(envelope_len(r#"{"i\u0064":"x","choices":[]}"#), None);
        assert_eq!(
            envelope_len(r#"{"a":true,"b":-1.5e3 ,"error":null}"#),
            Some(22)
        );
        assert_eq!(envelope_len("[1]"), None);
    }

    #[test]
    fn chunk_pieces_arrive_in_order_and_only_for_choice_0() {
        let json = r#"{"id":"x","model":"m","error":null,"choices":[
            {"index":1,"delta":{"content":"other"},"finish_reason":"stop"},
            {"delta":{"content":"late index","tool_calls":null},"index":0},
            {"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\""}},{"index":1}]},"finish_reason":null}
        ],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        assert_eq!(
            record(json),
            [
                "model m",
                "other choice",
                "content \"late index\"",
                "content \"hi\"",
                "call #0 index Some(0) borrowed true",
                "call #1 index Some(1) borrowed true",
                "usage Some(3)",
            ]
        );
        assert_eq!(
            record(r#"{"choices":null,"usage":null}"#),
            Vec::<String>::new()
        );
        assert_eq!(
            record(r#"{"error":{"message":"m"}}"#),
            [r#"error {"message":"m"}"#]
        );
        let mut recorder = Recorder::default();
        assert!(parse_chunk(r#"{"choices":[{"index":"0"}]}"#, &mut recorder).is_err());
        assert!(parse_chunk(r#"{"choices":[]} trailing"#, &mut recorder).is_err());
        assert!(parse_chunk(r#"[1]"#, &mut recorder).is_err());
    }
}
