//! Fuzzes the streaming decoder, the SSE framer and the non-streaming decoder with
//! arbitrary bytes cut at input-derived points (see `wire_openai::fuzzing`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    wire_openai::fuzzing::decode_arbitrary(data);
});
