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
