//! Export that never holds up a run: ended spans wait in a bounded queue that a
//! background thread sends in batches over OTLP/HTTP (protobuf). When the
//! collector is down or slow the queue fills, and a span that finds it full is
//! dropped and counted, with a warning when the count first grows and at every
//! power of two after. A metric export that fails is counted and warned of the
//! same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

/// Counts shared by the processor and the exporter.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Spans handed to the batch processor and not yet exported (or lost).
    pending: AtomicUsize,
    /// Spans dropped because the queue was full.
    dropped: AtomicU64,
    /// Spans an export request failed to deliver.
    failed: AtomicU64,
    /// Metric export requests that failed (each one period's data points).
    failed_metric_exports: AtomicU64,
}

impl Counts {
    /// Spans dropped or lost so far.
    pub(crate) fn lost(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    /// Metric export requests that failed so far.
    pub(crate) fn failed_metric_exports(&self) -> u64 {
        self.failed_metric_exports.load(Ordering::Relaxed)
    }

    /// Spans waiting for export (or in an export request not yet answered).
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
}

/// Adds `n` to `counter`: the new total when it is worth a warning (the first
/// count, and whenever the total reaches or passes a power of two), else `None`.
fn count(counter: &AtomicU64, n: u64) -> Option<u64> {
    let before = counter.fetch_add(n, Ordering::Relaxed);
    let after = before.saturating_add(n);
    let next = before.saturating_add(1).checked_next_power_of_two();
    (n > 0 && next.is_some_and(|power| power <= after)).then_some(after)
}

/// The batch processor behind a bounded count: `on_end` never waits.
#[derive(Debug)]
pub(crate) struct Bounded<P> {
    pub(crate) inner: P,
    pub(crate) counts: Arc<Counts>,
    pub(crate) max_queue: usize,
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let admitted = self
            .counts
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
                (pending < self.max_queue).then_some(pending + 1)
            })
            .is_ok();
        if admitted {
            self.inner.on_end(span);
            return;
        }
        if let Some(dropped) = count(&self.counts.dropped, 1) {
            tracing::warn!(
                dropped,
                "telemetry export is behind (collector down or slow): spans dropped"
            );
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// An exporter that releases the spans it was given from the pending count and
/// counts those it could not deliver.
#[derive(Debug)]
pub(crate) struct Counted<E> {
    pub(crate) inner: E,
    pub(crate) counts: Arc<Counts>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let size = batch.len();
        let result = self.inner.export(batch).await;
        let _ = self
            .counts
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
                Some(pending.saturating_sub(size))
            });
        if let Err(error) = &result
            && let Some(lost) = count(&self.counts.failed, size as u64)
        {
            tracing::warn!(%error, lost, "telemetry export failed: spans lost");
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A metric exporter that counts the exports it could not deliver, with a
/// warning at the first and at every power of two after (the reader sends one
/// period's data points per export; a lost one is not sent again).
#[derive(Debug)]
pub(crate) struct CountedMetrics<E> {
    pub(crate) inner: E,
    pub(crate) counts: Arc<Counts>,
}

impl<E: PushMetricExporter> PushMetricExporter for CountedMetrics<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        if let Err(error) = &result
            && let Some(failed) = count(&self.counts.failed_metric_exports, 1)
        {
            tracing::warn!(%error, failed, "telemetry export failed: metrics lost");
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_worth_a_warning_first_and_at_each_power_of_two_it_reaches() {
        let counter = AtomicU64::new(0);
        let warned: Vec<Option<u64>> = [1, 1, 1, 1, 3, 2, 0].map(|n| count(&counter, n)).into();
        assert_eq!(
            warned,
            [Some(1), Some(2), None, Some(4), None, Some(9), None]
        );
    }
}
