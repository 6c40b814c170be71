//! The fuzz entry point of the decoder, callable from tests and from the
//! cargo-fuzz target in `crates/wire-openai/fuzz/`.
//!
//! It knows nothing about libFuzzer; it only exercises the public decoding API.

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal};

use crate::decode::{
    Decoder, DecoderOptions, DeltaRef, IdMinting, decode_response, parsing_whole_chunks,
};
use crate::sse::{OwnedSseEvent, SseError, SseFramer};

/// Decodes arbitrary bytes as a stream, whole and cut into chunks, with owned and
/// with borrowed deltas, and with a reference decoder that parses every chunk whole
/// (no envelope or delta skipping), and checks that all give the same deltas and the
/// same result. Also runs the SSE framer and the non-streaming decoder on the
/// bytes. Never panics on any input unless the decoder breaks an invariant: that
/// panic is the fuzzer's finding.
///
/// # Panics
///
/// When chunked and whole decoding disagree, borrowed and owned deltas differ, the
/// reference decoder disagrees, or framing depends on chunking.
pub fn decode_arbitrary(data: &[u8]) {
    let whole = decode_in_chunks(data, &[data.len()]);
    let sizes = chunk_sizes(data);
    let chunked = decode_in_chunks(data, &sizes);
    assert_eq!(whole, chunked, "decoding depends on how the bytes are cut");
    let borrowed = decode_borrowed_in_chunks(data, &sizes);
    assert_eq!(whole, borrowed, "borrowed deltas differ from owned deltas");
    let reference = decode_whole_chunks(data, &sizes);
    assert_eq!(
        whole, reference,
        "skipping envelopes and the bytes around deltas changes the decoding"
    );

    let framed_whole = frame_in_chunks(data, &[data.len()]);
    let framed_chunked = frame_in_chunks(data, &sizes);
    assert_eq!(
        framed_whole, framed_chunked,
        "framing depends on how the bytes are cut"
    );

    let _ = decode_response(data, fuzz_options());
}

type Decoded = (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
);

/// Chunk sizes derived from the input itself (1 to 64 bytes), so a fuzzer explores
/// cut points along with contents.
fn chunk_sizes(data: &[u8]) -> Vec<usize> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ data.len() as u64;
    for &byte in data.iter().take(16) {
        state = state.rotate_left(5) ^ u64::from(byte);
    }
    let mut sizes = Vec::new();
    let mut total = 0;
    while total < data.len() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = 1 + (state % 64) as usize;
        sizes.push(size);
        total += size;
    }
    sizes
}

fn cut<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::with_capacity(sizes.len());
    let mut rest = data;
    for &size in sizes {
        let (head, tail) = rest.split_at(size.min(rest.len()));
        chunks.push(head);
        rest = tail;
    }
    if !rest.is_empty() {
        chunks.push(rest);
    }
    chunks
}

fn decode_in_chunks(data: &[u8], sizes: &[usize]) -> Decoded {
    feed_in_chunks(Decoder::with_options(fuzz_options()), data, sizes)
}

/// Like [`decode_in_chunks`] with the reference decoder, which parses every chunk
/// whole.
fn decode_whole_chunks(data: &[u8], sizes: &[usize]) -> Decoded {
    feed_in_chunks(parsing_whole_chunks(fuzz_options()), data, sizes)
}

/// The options of every decoder here: ids minted in sequence, so two decodes of
/// one stream compare equal.
fn fuzz_options() -> DecoderOptions {
    DecoderOptions {
        id_minting: IdMinting::Sequential,
        ..DecoderOptions::default()
    }
}

/// `data` cut at `sizes` and fed to `decoder`, taking the deltas owned.
fn feed_in_chunks(mut decoder: Decoder, data: &[u8], sizes: &[usize]) -> Decoded {
    let mut deltas = Vec::new();
    for chunk in cut(data, sizes) {
        if let Err(error) = decoder.feed(chunk, &mut deltas) {
            return (deltas, Err(error.into()));
        }
    }
    let result = decoder.finish_into(&mut deltas);
    (deltas, result)
}

/// Like [`decode_in_chunks`], taking the deltas borrowed and copying them only here.
fn decode_borrowed_in_chunks(data: &[u8], sizes: &[usize]) -> Decoded {
    let mut decoder = Decoder::with_options(fuzz_options());
    let mut deltas = Vec::new();
    let mut sink = |delta: DeltaRef<'_>| deltas.push(delta.into_owned());
    for chunk in cut(data, sizes) {
        if let Err(error) = decoder.feed_with(chunk, &mut sink) {
            return (deltas, Err(error.into()));
        }
    }
    let result = decoder.finish_with(&mut sink);
    (deltas, result)
}

fn frame_in_chunks(data: &[u8], sizes: &[usize]) -> Result<Vec<OwnedSseEvent>, SseError> {
    let mut framer = SseFramer::new();
    let mut events = Vec::new();
    for chunk in cut(data, sizes) {
        events.extend(framer.feed_owned(chunk)?);
    }
    framer.finish(|event| {
        events.push(event.to_owned_event());
        Ok::<(), SseError>(())
    })?;
    Ok(events)
}
