//! The fixture tests of the wire crates, written once: a folder of fixtures with its
//! insta snapshots, streams fed to a decoder in pieces, JSON views of what a decoder
//! produced, and the request input of the encoder goldens.
//!
//! Everything here speaks `ai_core` types only; a wire's test hands in its own
//! decoder or encoder as a closure, so this crate never depends on a wire crate.
//! Snapshots are pretty JSON with sorted keys, named after their case, in the
//! fixture folder's `snapshots` folder.

// Test helpers: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use ai_core::completion::{
    CompletionDelta, CompletionError, CompletionFinal, CompletionRequest, ModelSettings, ToolChoice,
};
use ai_core::message::MessageToolCall;
use ai_core::{Message, RunContext, ToolEffect, ToolId, ToolSpec};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What a decoder made of a stream: its deltas and its result.
pub type Decoded = (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
);

/// A folder of fixtures, each `<case><suffix>`, whose insta snapshots are
/// `snapshots/<case>.snap` in it.
#[derive(Debug, Clone)]
pub struct Fixtures {
    dir: PathBuf,
    suffix: &'static str,
    at_least: usize,
}

impl Fixtures {
    /// The fixtures in `dir` whose file names end with `suffix` (e.g. `.sse`).
    pub fn new(dir: impl Into<PathBuf>, suffix: &'static str) -> Self {
        Self {
            dir: dir.into(),
            suffix,
            at_least: 1,
        }
    }

    /// The same fixtures, of which there must be at least `count`: a corpus that
    /// shrank fails [`Fixtures::cases`].
    #[must_use]
    pub fn at_least(self, count: usize) -> Self {
        Self {
            at_least: count,
            ..self
        }
    }

    /// The fixture folder.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of fixture `case`.
    #[must_use]
    pub fn path(&self, case: &str) -> PathBuf {
        self.dir.join(format!("{case}{}", self.suffix))
    }

    /// The bytes of fixture `case`.
    ///
    /// # Panics
    /// When the file cannot be read.
    #[must_use]
    pub fn read(&self, case: &str) -> Vec<u8> {
        fs::read(self.path(case)).unwrap()
    }

    /// The snapshot folder.
    #[must_use]
    pub fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("snapshots")
    }

    /// Every fixture as (case, file), sorted by case.
    ///
    /// # Panics
    /// When the folder cannot be read or holds fewer fixtures than it must.
    #[must_use]
    pub fn cases(&self) -> Vec<(String, PathBuf)> {
        let mut out: Vec<(String, PathBuf)> = fs::read_dir(&self.dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter_map(|path| {
                let case = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(self.suffix)?
                    .to_owned();
                Some((case, path))
            })
            .collect();
        out.sort();
        assert!(
            out.len() >= self.at_least,
            "fixture corpus {} shrank: {} fixtures, at least {} expected",
            self.dir.display(),
            out.len(),
            self.at_least
        );
        out
    }

    /// Every fixture as (case, bytes), sorted by case.
    ///
    /// # Panics
    /// As [`Fixtures::cases`], and when a fixture cannot be read.
    #[must_use]
    pub fn bodies(&self) -> Vec<(String, Vec<u8>)> {
        self.cases()
            .into_iter()
            .map(|(case, path)| (case, fs::read(path).unwrap()))
            .collect()
    }

    /// insta settings for the snapshot of one case: stored in the snapshot folder
    /// under the case's name, with `description` and, when given, `input` recorded
    /// as the input file.
    #[must_use]
    pub fn settings(&self, description: &str, input: Option<&Path>) -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(self.snapshot_dir());
        settings.set_prepend_module_to_snapshot(false);
        if let Some(input) = input {
            settings.set_input_file(input);
        }
        settings.set_description(description);
        settings.set_omit_expression(true);
        settings
    }

    /// Asserts that `value` is the snapshot of `case` (see [`Fixtures::settings`]).
    ///
    /// # Panics
    /// When it is not (insta's mismatch).
    pub fn assert_snapshot(
        &self,
        case: &str,
        description: &str,
        input: Option<&Path>,
        value: &Value,
    ) {
        let rendered = snapshot_json(value);
        self.settings(description, input)
            .bind(|| insta::assert_snapshot!(case, rendered));
    }

    /// Runs `check` on every case, failing with all failing cases, not just the first,
    /// then fails on a stale snapshot (see [`Fixtures::assert_no_stale_snapshots`]).
    ///
    /// # Panics
    /// When a check or the stale-snapshot rule fails.
    pub fn check_each(&self, check: impl Fn(&str, &Path)) {
        check_all_cases(&self.cases(), check);
        self.assert_no_stale_snapshots();
    }

    /// Every file in the snapshot folder is the snapshot (`.snap`, or a pending
    /// `.snap.new`) of a fixture: insta itself never notices a snapshot whose fixture
    /// is gone.
    ///
    /// # Panics
    /// On a stale snapshot or any other file there.
    pub fn assert_no_stale_snapshots(&self) {
        let inputs: Vec<String> = self.cases().into_iter().map(|(case, _)| case).collect();
        let dir = self.snapshot_dir();
        for entry in fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let case = name
                .strip_suffix(".snap")
                .or_else(|| name.strip_suffix(".snap.new"))
                .unwrap_or_else(|| panic!("unexpected file {}/{name}", dir.display()));
            assert!(
                inputs.iter().any(|c| c == case),
                "stale snapshot {}/{name}: no fixture {case}{}; delete it",
                dir.display(),
                self.suffix
            );
        }
    }

    /// Every stream fixture decoded whole by `decode` is its snapshot, shown as
    /// `rendering` shows it and described as `<shown_as>/<case><suffix>`; no snapshot
    /// is stale.
    ///
    /// # Panics
    /// When a case does not match its snapshot or a snapshot is stale.
    pub fn assert_stream_snapshots(
        &self,
        shown_as: &str,
        rendering: StreamRendering,
        decode: impl Fn(&[u8]) -> Decoded,
    ) {
        self.check_each(|case, path| {
            let decoded = decode(&fs::read(path).unwrap());
            self.assert_snapshot(
                case,
                &format!(
                    "{shown_as}/{case}{}: deltas and the assembled turn (or the error)",
                    self.suffix
                ),
                None,
                &rendering.decoded_json(&decoded),
            );
        });
    }
}

impl Fixtures {
    /// Every encoder golden's input, encoded by `encode` (the snapshot value:
    /// see [`body_or_error`]), is its snapshot, described as
    /// `<shown_as>/<case><suffix>`; no snapshot is stale.
    ///
    /// # Panics
    /// When an input is no [`EncodeInput`], a case does not match its snapshot or
    /// a snapshot is stale.
    pub fn assert_encode_snapshots<O: DeserializeOwned>(
        &self,
        shown_as: &str,
        encode: impl Fn(EncodeInput<O>) -> Value,
    ) {
        self.check_each(|case, path| {
            self.assert_snapshot(
                case,
                &format!(
                    "{shown_as}/{case}{}: the request body (or the error)",
                    self.suffix
                ),
                None,
                &encode(read_input(case, path)),
            );
        });
    }
}

/// Runs `check` on every case and fails with all failing cases, not just the first.
/// (insta panics on a mismatch; locally it also writes `<case>.snap.new`, on CI
/// nothing.)
///
/// # Panics
/// When a check fails, or on CI with an environment that would accept snapshots.
pub fn check_all_cases(cases: &[(String, PathBuf)], check: impl Fn(&str, &Path)) {
    crate::refuse_snapshot_updates_on_ci();
    let mut failures = Vec::new();
    for (case, path) in cases {
        let run = std::panic::AssertUnwindSafe(|| check(case, path));
        if let Err(panic) = std::panic::catch_unwind(run) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{case}: {message}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n(accept deliberate changes with `INSTA_UPDATE=always cargo test -p <crate> --test it`, never on CI)",
        failures.join("\n")
    );
}

/// The snapshot text of a JSON value: pretty-printed by `serde_json` (so numbers
/// read as they go on the wire) with sorted keys (key order is not an expectation).
///
/// # Panics
/// Never in practice (a `Value` always serializes).
#[must_use]
pub fn snapshot_json(value: &Value) -> String {
    let mut value = value.clone();
    value.sort_all_objects();
    serde_json::to_string_pretty(&value).unwrap()
}

/// A fixture's JSON input, read and parsed.
///
/// # Panics
/// When the file cannot be read or is no `T`.
#[must_use]
pub fn read_input<T: DeserializeOwned>(case: &str, path: &Path) -> T {
    serde_json::from_str(&fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{case}: bad input: {e}"))
}

/// `body` cut at `cuts` (each taken modulo `body.len() + 1`, so any number is
/// a cut; in any order): the pieces, in order.
#[must_use]
pub fn cut<'b>(body: &'b [u8], cuts: &[usize]) -> Vec<&'b [u8]> {
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(body.len());
    let mut at = 0;
    ends.into_iter()
        .map(|end| {
            let piece = &body[at..end];
            at = end;
            piece
        })
        .collect()
}

/// Feeds `body` to `decoder` in the pieces [`cut`] makes, then finishes it. A
/// failed feed ends the decode with its error.
pub fn decode_in_pieces<D, E: Into<CompletionError>>(
    mut decoder: D,
    body: &[u8],
    cuts: &[usize],
    mut feed: impl FnMut(&mut D, &[u8], &mut Vec<CompletionDelta>) -> Result<(), E>,
    finish: impl FnOnce(D, &mut Vec<CompletionDelta>) -> Result<CompletionFinal, CompletionError>,
) -> Decoded {
    let mut deltas = Vec::new();
    for piece in cut(body, cuts) {
        if let Err(error) = feed(&mut decoder, piece, &mut deltas) {
            return (deltas, Err(error.into()));
        }
    }
    let result = finish(decoder, &mut deltas);
    (deltas, result)
}

/// How [`Fixtures::assert_stream_fixtures`] cuts the fixtures: `draws` random
/// draws of a fixture and up to `max_cuts` cut points; with `exact_deltas` the
/// deltas must be the same as whole, else only their joined text.
#[derive(Debug, Clone, Copy)]
pub struct Cuts {
    /// How many draws.
    pub draws: u32,
    /// The most cut points in one draw.
    pub max_cuts: usize,
    /// Whether the deltas themselves must match, not only their text (a wire
    /// whose every chunk is one whole event).
    pub exact_deltas: bool,
}

impl Cuts {
    /// 64 draws of up to 24 cuts, comparing the deltas' text.
    pub const TEXT: Cuts = Cuts {
        draws: 64,
        max_cuts: 24,
        exact_deltas: false,
    };
}

/// Whether `decode` makes the same of `body` whole and cut at `cuts`: the same
/// result as `rendering` shows it, and deltas that carry the same text (with
/// `exact_deltas`, the same deltas).
///
/// # Errors
/// What differs, for a property test to report.
pub fn check_cuts(
    rendering: StreamRendering,
    decode: impl Fn(&[u8], &[usize]) -> Decoded,
    body: &[u8],
    cuts: &[usize],
    exact_deltas: bool,
) -> Result<(), String> {
    let (whole_deltas, whole) = decode(body, &[]);
    let (cut_deltas, cut) = decode(body, cuts);
    let (whole, cut) = (rendering.result_json(&whole), rendering.result_json(&cut));
    if whole != cut {
        return Err(format!(
            "cut at {cuts:?}, the result differs: {whole} != {cut}"
        ));
    }
    let same = if exact_deltas {
        whole_deltas == cut_deltas
    } else {
        joined(&whole_deltas) == joined(&cut_deltas)
    };
    if !same {
        return Err(format!(
            "cut at {cuts:?}, the deltas differ: {whole_deltas:?} != {cut_deltas:?}"
        ));
    }
    Ok(())
}

impl Fixtures {
    /// A wire's stream fixtures, each decoded by `decode` (a body and where to
    /// cut it): decoded whole, each is its snapshot
    /// ([`Fixtures::assert_stream_snapshots`]); cut as `cuts` says, each decodes
    /// as it does whole ([`Fixtures::assert_cuts_do_not_matter`]).
    ///
    /// # Panics
    /// At the first check that fails.
    pub fn assert_stream_fixtures(
        &self,
        shown_as: &str,
        rendering: StreamRendering,
        decode: impl Fn(&[u8], &[usize]) -> Decoded,
        cuts: Cuts,
    ) {
        self.assert_stream_snapshots(shown_as, rendering, |body| decode(body, &[]));
        self.assert_cuts_do_not_matter(
            rendering,
            decode,
            cuts.exact_deltas,
            (cuts.draws, cuts.max_cuts),
        );
    }

    /// Checks, over `cases` random draws (a fixture and up to `max_cuts` cut
    /// points), that `decode` gives a body cut in pieces the same result as
    /// the whole body ([`check_cuts`]), panicking with the smallest failing
    /// draw proptest finds.
    pub fn assert_cuts_do_not_matter(
        &self,
        rendering: StreamRendering,
        decode: impl Fn(&[u8], &[usize]) -> Decoded,
        exact_deltas: bool,
        (cases, max_cuts): (u32, usize),
    ) {
        use proptest::test_runner::{Config, TestCaseError, TestRunner};
        let bodies = self.bodies();
        let mut runner = TestRunner::new(Config::with_cases(cases));
        let draw = (
            0..bodies.len(),
            proptest::collection::vec(0usize..100_000, 0..max_cuts),
        );
        let result = runner.run(&draw, |(index, cuts)| {
            check_cuts(rendering, &decode, &bodies[index].1, &cuts, exact_deltas)
                .map_err(|why| TestCaseError::fail(format!("{}: {why}", bodies[index].0)))
        });
        if let Err(failure) = result {
            panic!("{failure}");
        }
    }
}

/// The assistant message the loop makes of a decoded turn: its text (when there
/// is any), reasoning, calls (with what the provider needs back on them) and
/// blocks.
#[must_use]
pub fn assistant_message(turn: &CompletionFinal) -> Message {
    Message::Assistant {
        content: Some(turn.text.clone()).filter(|t| !t.is_empty()),
        reasoning: turn.reasoning.clone(),
        tool_calls: turn
            .tool_calls
            .iter()
            .map(|call| MessageToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                raw: call.raw.clone(),
            })
            .collect(),
        blocks: turn.blocks.clone(),
    }
}

/// The text, reasoning, refusal and argument deltas each joined: equal for two
/// decodes whose deltas carry the same text however it was split.
#[must_use]
pub fn joined(deltas: &[CompletionDelta]) -> Value {
    let (mut text, mut reasoning, mut refusal, mut args) =
        (String::new(), String::new(), String::new(), String::new());
    for delta in deltas {
        match delta {
            CompletionDelta::Text(t) => text.push_str(t),
            CompletionDelta::Reasoning(t) => reasoning.push_str(t),
            CompletionDelta::Refusal(t) => refusal.push_str(t),
            CompletionDelta::ToolCallArgs { fragment, .. } => args.push_str(fragment),
            _ => {}
        }
    }
    json!([text, reasoning, refusal, args])
}

/// How a wire's stream snapshots show a decode: text, reasoning and tool-call deltas
/// always by name, the kinds below by name when set (otherwise as
/// `{"other": "<Debug>"}`), the result as `final`, a truncated stream's `partial`,
/// or the error's text.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamRendering {
    /// Refusal deltas as `{"refusal": …}`.
    pub refusal: bool,
    /// Reasoning signature deltas as `{"signature": …}`.
    pub signature: bool,
    /// Usage deltas as `{"usage": …}`.
    pub usage: bool,
    /// Provider errors as `{"error": "provider", "code": …, "message": …}`.
    pub provider_errors: bool,
}

impl StreamRendering {
    /// Only text, reasoning and tool-call deltas by name; provider errors as text.
    pub const PLAIN: Self = Self {
        refusal: false,
        signature: false,
        usage: false,
        provider_errors: false,
    };

    /// One delta.
    #[must_use]
    pub fn delta_json(&self, delta: &CompletionDelta) -> Value {
        match delta {
            CompletionDelta::Text(t) => json!({"text": t}),
            CompletionDelta::Reasoning(t) => json!({"reasoning": t}),
            CompletionDelta::Refusal(t) if self.refusal => json!({"refusal": t}),
            CompletionDelta::ReasoningSignature(s) if self.signature => json!({"signature": s}),
            CompletionDelta::ToolCallStart { index, id, name } => {
                json!({"tool_call_start": {"index": index, "id": id, "name": name}})
            }
            CompletionDelta::ToolCallArgs { index, fragment } => {
                json!({"tool_call_args": {"index": index, "fragment": fragment}})
            }
            CompletionDelta::Usage(usage) if self.usage => json!({ "usage": usage }),
            other => json!({"other": format!("{other:?}")}),
        }
    }

    /// The result of a decode.
    #[must_use]
    pub fn result_json(&self, result: &Result<CompletionFinal, CompletionError>) -> Value {
        match result {
            Ok(turn) => json!({"final": turn}),
            Err(CompletionError::TruncatedStream { partial }) => {
                json!({"error": "truncated_stream", "partial": partial})
            }
            Err(CompletionError::Provider { code, message }) if self.provider_errors => {
                json!({"error": "provider", "code": code, "message": message})
            }
            Err(error) => json!({"error": error.to_string()}),
        }
    }

    /// A whole decode: `{"deltas": [...], "result": ...}`.
    #[must_use]
    pub fn decoded_json(&self, (deltas, result): &Decoded) -> Value {
        json!({
            "deltas": deltas.iter().map(|d| self.delta_json(d)).collect::<Vec<_>>(),
            "result": self.result_json(result),
        })
    }
}

/// The snapshot value of an encoding: `{"body": …}` or `{"error": "<its text>"}`.
#[must_use]
pub fn body_or_error<E: std::fmt::Display>(encoded: Result<Value, E>) -> Value {
    match encoded {
        Ok(body) => json!({ "body": body }),
        Err(error) => json!({ "error": error.to_string() }),
    }
}

/// The input of an encoder golden: a request and the wire's encode options `O`.
#[derive(Debug, Deserialize)]
pub struct EncodeInput<O> {
    /// The request.
    pub request: RequestInput,
    /// The wire's options.
    pub options: O,
}

/// A [`CompletionRequest`] as the encoder goldens write it. `settings` is
/// [`ModelSettings`] as JSON; the older `max_tokens` / `temperature` keys beside it
/// fill the same fields.
#[derive(Debug, Deserialize)]
pub struct RequestInput {
    model: String,
    messages: Vec<Message>,
    tools: Vec<ToolInput>,
    tool_choice: ToolChoice,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    settings: ModelSettings,
}

#[derive(Debug, Deserialize)]
struct ToolInput {
    id: ToolId,
    description: String,
    input_schema: Value,
    effect: ToolEffect,
}

impl RequestInput {
    /// The request, in run `run-1` of trace `trace-1`.
    #[must_use]
    pub fn into_request(self) -> CompletionRequest {
        CompletionRequest {
            model: self.model,
            messages: self.messages,
            tools: self
                .tools
                .into_iter()
                .map(|t| ToolSpec::new(t.id, t.description, t.input_schema, t.effect))
                .collect(),
            tool_choice: self.tool_choice,
            context: RunContext::new("run-1", "trace-1"),
            settings: ModelSettings {
                max_tokens: self.max_tokens.or(self.settings.max_tokens),
                temperature: self.temperature.or(self.settings.temperature),
                ..self.settings
            },
        }
    }
}
