//! `html_to_text` on adversarial pages (runs of `&`, `&#`, `&amp;`, open tags) of
//! 256 KiB and 2 MiB: the time per byte stays flat (linear), where the old entity
//! decoder was quadratic. Run with `cargo bench -p toolwright-ai-tools --bench html`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use ai_tools::builtin::html_to_text;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn pages(c: &mut Criterion) {
    let mut group = c.benchmark_group("html_to_text");
    group.sample_size(10);
    for unit in ["&", "&#", "&amp;", "<a", "<p>x &amp; y</p>"] {
        for size in [256 * 1024, 2 * 1024 * 1024] {
            let page = unit.repeat(size / unit.len());
            group.throughput(Throughput::Bytes(page.len() as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("{unit:?}"), size / 1024),
                &page,
                |b, page| b.iter(|| black_box(html_to_text(black_box(page)))),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, pages);
criterion_main!(benches);
