//! The optional OpenTelemetry exporter (cargo feature `otel`): when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (e.g. `http://127.0.0.1:4318`), the
//! host's tracing spans — `request`, `run`, `evaluate`, `hook` of `hookbox
//! serve`, with their tenant, run and plugin ids — are exported as OTLP over
//! HTTP (protobuf, `ENDPOINT/v1/traces`), in batches from a background
//! thread, under the service name `hookbox`. `HOOKBOX_OTEL_LOG` filters
//! them like `HOOKBOX_LOG` (default `hookbox_server=debug`). Without the
//! variable, or without the feature, nothing is exported.

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The environment variable that turns the exporter on (the OpenTelemetry standard one).
pub(crate) const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The exporter's layer, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set and the
/// exporter could be built (else a line on stderr says why, and nothing is exported).
pub(crate) fn layer<S>() -> Option<Box<dyn Layer<S> + Send + Sync>>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let endpoint = std::env::var(ENDPOINT_ENV).ok().filter(|e| !e.trim().is_empty())?;
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = match opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(&url).build() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("hookbox: {ENDPOINT_ENV}: cannot export spans to {}: {e}", crate::escape::line(&url));
            return None;
        }
    };
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("hookbox").build();
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
    let tracer = provider.tracer("hookbox");
    let _ = PROVIDER.set(provider);
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKBOX_OTEL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("hookbox_server=debug"));
    Some(tracing_opentelemetry::layer().with_tracer(tracer).with_filter(filter).boxed())
}

/// Exports the spans still buffered and stops the exporter (at exit).
pub(crate) fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.shutdown()
    {
        eprintln!("hookbox: the OpenTelemetry exporter did not flush: {e}");
    }
}
