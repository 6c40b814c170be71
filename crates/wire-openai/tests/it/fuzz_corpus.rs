//! The fuzz entry point runs on the corpus and on mangled variants of it, so "the
//! fuzz target compiles and holds" is checked by `cargo test`, without cargo-fuzz.

use std::fs;

use wire_openai::fuzzing::decode_arbitrary;

use crate::common::fixtures;

#[test]
fn fuzz_entry_holds_on_the_corpus_and_mutations() {
    for (_, path) in fixtures("stream", ".sse")
        .into_iter()
        .chain(fixtures("response", ".json"))
    {
        let bytes = fs::read(path).unwrap();
        decode_arbitrary(&bytes);
        // Truncations, a flipped byte and a doubled stream.
        for end in [
            0,
            1,
            bytes.len() / 3,
            bytes.len() / 2,
            bytes.len().saturating_sub(1),
        ] {
            decode_arbitrary(&bytes[..end]);
        }
        let mut flipped = bytes.clone();
        for i in (0..flipped.len()).step_by(97) {
            flipped[i] ^= 0x20;
        }
        decode_arbitrary(&flipped);
        let doubled = [bytes.as_slice(), bytes.as_slice()].concat();
        decode_arbitrary(&doubled);
    }
    decode_arbitrary(b"");
    decode_arbitrary(b"\r\r\n\n\xff\xfe data: [DONE]");
    decode_arbitrary(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":4294967295,\"function\":{\"name\":\"x\"}},{\"function\":{\"name\":\"y\"}}]}}]}\n\n");
}

fn corpus() -> &'static Vec<Vec<u8>> {
    static CORPUS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| {
        fixtures("stream", ".sse")
            .into_iter()
            .map(|(_, path)| fs::read(path).unwrap())
            .collect()
    })
}

proptest::proptest! {
    /// Fixtures with random bytes replaced, inserted and deleted: the fuzz entry
    /// point holds (no panic; whole and chunked decoding agree).
    #[test]
    fn mutated_fixtures_never_break_the_decoder(
        which in proptest::prelude::any::<proptest::sample::Index>(),
        edits in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), 0u8..3, proptest::prelude::any::<u8>()),
            1..12,
        ),
    ) {
        let mut bytes = corpus()[which.index(corpus().len())].clone();
        for (at, kind, byte) in edits {
            let at = at.index(bytes.len() + 1);
            match kind {
                0 if at < bytes.len() => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => {}
            }
        }
        decode_arbitrary(&bytes);
    }
}

/// Pieces of chunks that share their head (the bytes before the delta) with the
/// first chunk of a stream: deltas, members of the choice after the delta, and
/// members of the chunk after `choices`, some of which act and some of which are
/// malformed.
const DELTAS: &[&str] = &[
    r#"{"content":"a"}"#,
    r#"{"content":"b\n\u00e9\ud83e\udd80"}"#,
    r#"{"reasoning_content":"r","content":null}"#,
    r#"{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}]}"#,
    r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\": \"x\\\"y\"}"}}]}"#,
    r#"{}"#,
    r#"null"#,
    r#"{"content":"a"},"finish_reason":"stop""#,
    r#"{"content":"a"}}"#,
    r#"{"content":"#,
];
const CHOICE_MEMBERS: &[&str] = &[
    r#""logprobs":null"#,
    r#""logprobs":{"content":[{"token":"a","logprob":-0.1}]}"#,
    r#""finish_reason":null"#,
    r#""finish_reason":"stop""#,
    r#""finish_reason":"length""#,
    r#""index":1"#,
    r#""delta":{"content":"again"}"#,
    r#""stop_reason":null"#,
];
const CHUNK_MEMBERS: &[&str] = &[
    r#""usage":null"#,
    r#""usage":{"prompt_tokens":3,"completion_tokens":4}"#,
    r#""model":"m""#,
    r#""model":"other""#,
    r#""model":"\u006d""#,
    r#""obfuscation":"x7Q""#,
    r#""error":null"#,
    r#""error":{"message":"boom"}"#,
    r#""x_groq":{"id":"q"}"#,
    r#""choices":null"#,
];

fn chunk_strategy() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let pick = |list: &'static [&'static str]| proptest::sample::select(list);
    (
        pick(DELTAS),
        proptest::collection::vec(pick(CHOICE_MEMBERS), 0..3),
        any::<bool>(),
        proptest::collection::vec(pick(CHUNK_MEMBERS), 0..3),
        proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..3),
    )
        .prop_map(|(delta, choice, second_choice, members, edits)| {
            let mut chunk = format!(
                r#"data: {{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{{"index":0,"delta":{delta}"#
            );
            for member in choice {
                chunk.push(',');
                chunk.push_str(member);
            }
            chunk.push('}');
            if second_choice {
                chunk.push_str(r#",{"index":1,"delta":{"content":"other"}}"#);
            }
            chunk.push(']');
            for member in members {
                chunk.push(',');
                chunk.push_str(member);
            }
            chunk.push('}');
            let mut bytes = chunk.into_bytes();
            // Byte edits after the head only, where the decoder decides alone.
            let head = bytes.iter().position(|&b| b == b'[').unwrap_or(0);
            for (at, byte) in edits {
                let at = head + at.index(bytes.len() - head);
                bytes[at] = byte;
            }
            bytes.extend_from_slice(b"\n\n");
            bytes
        })
}

proptest::proptest! {
    /// Chunks that share their head with the first chunk of a stream, whatever
    /// follows their delta: the decoder, which parses such a delta alone when the
    /// rest acts on nothing, decodes them as a decoder parsing every chunk whole
    /// (the fuzz entry compares the two).
    #[test]
    fn chunks_sharing_a_head_decode_as_whole_chunks(
        chunks in proptest::collection::vec(chunk_strategy(), 1..6),
        done in proptest::prelude::any::<bool>(),
    ) {
        let mut stream = br#"data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}"#.to_vec();
        stream.extend_from_slice(b"\n\n");
        for chunk in chunks {
            stream.extend_from_slice(&chunk);
        }
        if done {
            stream.extend_from_slice(b"data: [DONE]\n\n");
        }
        decode_arbitrary(&stream);
    }
}
