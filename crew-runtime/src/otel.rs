//! The runtime's spans, and the audit trail's records as span events,
//! exported through OpenTelemetry (OTLP over HTTP, protobuf bodies).
//!
//! A crew already traces itself with `tracing`, named after the GenAI
//! semantic conventions: `crew.kickoff` (`gen_ai.operation.name =
//! invoke_workflow`), `invoke_agent` per task, `chat` per model call and
//! `execute_tool` per tool call (`gen_ai.tool.name`). With an attached
//! [`AuditTrail`](crate::audit::AuditTrail) (feature `audit`), each record
//! is also a `tracing` event of target `crew_runtime::audit`, so it shows
//! up as an event of the span it was recorded in. [`OtlpExport`] sends all
//! of that to a collector:
//!
//! ```no_run
//! use crew_runtime::otel::OtlpExport;
//!
//! # fn run() -> Result<(), crew_runtime::otel::OtelError> {
//! let telemetry = OtlpExport::http("http://collector:4318")
//!     .service_name("support-desk")
//!     .install()?;
//! // … kick off crews …
//! telemetry.shutdown()?; // sends what is still waiting
//! # Ok(())
//! # }
//! ```
//!
//! Spans are sent in batches from a thread of the exporter's own, never
//! from a crew's call path: a collector that is slow or unreachable never
//! stalls nor fails a crew. Batches that cannot be sent are dropped and
//! logged through `tracing` (targets `opentelemetry_sdk`,
//! `opentelemetry-otlp`), and a full queue drops new spans.
//!
//! Plain `http://` only: the exporter's client is built without TLS (it is
//! the reqwest that the MCP client already builds, without a second TLS
//! stack). Send to a collector on the host or in the cluster, and let it
//! forward over TLS.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use tracing::Subscriber;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

/// How long one export request may take, unless told otherwise.
///
/// ```
/// assert_eq!(crew_runtime::otel::DEFAULT_TIMEOUT, std::time::Duration::from_secs(10));
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The path of the traces of an OTLP/HTTP collector, after its base URL.
const TRACES_PATH: &str = "/v1/traces";

/// The `tracing` layer that turns spans into OpenTelemetry spans, for a
/// subscriber of your own ([`OtlpExport::layer`]).
///
/// ```
/// use crew_runtime::otel::OtelLayer;
/// use tracing_subscriber::Registry;
/// fn takes(_layer: OtelLayer<Registry>) {}
/// ```
pub type OtelLayer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, Tracer>;

/// Why the export cannot be set up or finished.
///
/// ```
/// use crew_runtime::otel::{OtelError, OtlpExport};
/// let error = OtlpExport::http("collector:4318").layer::<tracing_subscriber::Registry>().err();
/// assert!(matches!(error, Some(OtelError::InvalidEndpoint { .. })));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The collector's URL cannot be used.
    #[error("cannot export to `{endpoint}`: {problem}")]
    InvalidEndpoint {
        /// The URL given.
        endpoint: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The exporter could not be built (a header that HTTP refuses, …).
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
    /// [`OtlpExport::install`] found a global subscriber already set: add
    /// [`OtlpExport::layer`] to that one instead.
    #[error(
        "a global tracing subscriber is already set: add `OtlpExport::layer()` to it instead of `install()`"
    )]
    AlreadyInstalled,
    /// Flushing or shutting down the exporter failed (spans may be lost).
    #[error("the OTLP exporter could not finish: {0}")]
    Shutdown(String),
}

/// How to export: where to, as which service. Build it with
/// [`OtlpExport::http`], then [`install`](OtlpExport::install) it as the
/// global subscriber or take its [`layer`](OtlpExport::layer).
///
/// ```no_run
/// use std::time::Duration;
/// use crew_runtime::otel::OtlpExport;
///
/// # fn run() -> Result<(), crew_runtime::otel::OtelError> {
/// let _telemetry = OtlpExport::http("http://127.0.0.1:4318")
///     .service_name("support-desk")
///     .header("x-tenant", "acme")
///     .timeout(Duration::from_secs(3))
///     .install()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct OtlpExport {
    endpoint: String,
    service_name: Option<String>,
    headers: HashMap<String, String>,
    timeout: Duration,
}

impl fmt::Debug for OtlpExport {
    // Header values are often credentials: only their names are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.headers.keys().collect();
        names.sort();
        f.debug_struct("OtlpExport")
            .field("endpoint", &self.endpoint)
            .field("service_name", &self.service_name)
            .field("headers", &names)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl OtlpExport {
    /// Export to the OTLP/HTTP collector at `endpoint`, its base URL
    /// (`http://host:4318`); spans go to `/v1/traces` under it. A URL that
    /// already ends in `/v1/traces` is taken as it is.
    ///
    /// ```
    /// let export = crew_runtime::otel::OtlpExport::http("http://collector:4318");
    /// # drop(export);
    /// ```
    pub fn http(endpoint: impl Into<String>) -> OtlpExport {
        OtlpExport {
            endpoint: endpoint.into(),
            service_name: None,
            headers: HashMap::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The `service.name` of every span. Without it, OpenTelemetry's
    /// default: `OTEL_SERVICE_NAME`, else `unknown_service`.
    ///
    /// ```
    /// let export = crew_runtime::otel::OtlpExport::http("http://collector:4318").service_name("support-desk");
    /// # drop(export);
    /// ```
    pub fn service_name(mut self, name: impl Into<String>) -> OtlpExport {
        self.service_name = Some(name.into());
        self
    }

    /// A header sent with every export (a collector's API key, a tenant).
    ///
    /// ```
    /// let export = crew_runtime::otel::OtlpExport::http("http://collector:4318").header("x-api-key", "…");
    /// # drop(export);
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> OtlpExport {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// How long one export request may take ([`DEFAULT_TIMEOUT`] unless
    /// told otherwise); also bounds how long a shutdown waits for an
    /// unreachable collector.
    ///
    /// ```
    /// use std::time::Duration;
    /// let export = crew_runtime::otel::OtlpExport::http("http://collector:4318").timeout(Duration::from_secs(2));
    /// # drop(export);
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> OtlpExport {
        self.timeout = timeout;
        self
    }

    /// Sets the export up and makes a registry with its layer the global
    /// `tracing` subscriber. Keep the guard: dropping it (or
    /// [`OtelGuard::shutdown`]) sends what is still waiting and stops the
    /// export.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), crew_runtime::otel::OtelError> {
    /// let telemetry = crew_runtime::otel::OtlpExport::http("http://collector:4318").install()?;
    /// # drop(telemetry);
    /// # Ok(())
    /// # }
    /// ```
    pub fn install(self) -> Result<OtelGuard, OtelError> {
        let (layer, guard) = self.layer()?;
        let subscriber = tracing_subscriber::registry().with(layer);
        // Nothing exported yet: the guard's drop just stops the exporter.
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|_| OtelError::AlreadyInstalled)?;
        Ok(guard)
    }

    /// Sets the export up and returns its layer, for a subscriber of your
    /// own (next to a `fmt` layer, under a filter, or scoped with
    /// `tracing::subscriber::set_default`), and the guard that flushes it.
    ///
    /// ```no_run
    /// use tracing_subscriber::layer::SubscriberExt;
    ///
    /// # fn run() -> Result<(), crew_runtime::otel::OtelError> {
    /// let (layer, telemetry) = crew_runtime::otel::OtlpExport::http("http://collector:4318").layer()?;
    /// let subscriber = tracing_subscriber::registry().with(layer);
    /// let _scope = tracing::subscriber::set_default(subscriber);
    /// // … kick off crews on this thread …
    /// telemetry.shutdown()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn layer<S>(self) -> Result<(OtelLayer<S>, OtelGuard), OtelError>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let endpoint = traces_url(&self.endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .with_timeout(self.timeout)
            .with_headers(self.headers)
            .build()
            .map_err(|error| OtelError::Exporter(error.to_string()))?;
        let mut resource = Resource::builder();
        if let Some(name) = self.service_name {
            resource = resource.with_service_name(name);
        }
        // The SDK's batch processor runs on a thread of its own: it works
        // under any runtime (a current-thread one included) and a shutdown
        // never waits on the runtime it is called from.
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("crew-runtime");
        let layer = tracing_opentelemetry::layer().with_tracer(tracer);
        Ok((
            layer,
            OtelGuard {
                provider: Some(provider),
            },
        ))
    }
}

/// The base URL checked and turned into the URL of the traces.
fn traces_url(endpoint: &str) -> Result<String, OtelError> {
    let invalid = |problem: &str| OtelError::InvalidEndpoint {
        endpoint: endpoint.to_owned(),
        problem: problem.to_owned(),
    };
    let url = reqwest::Url::parse(endpoint.trim())
        .map_err(|error| invalid(&format!("{error} (write it as http://host:4318)")))?;
    match url.scheme() {
        "http" => {}
        "https" => {
            return Err(invalid(
                "https is not supported: the exporter is built without TLS (send to a local collector over http)",
            ));
        }
        _ => return Err(invalid("the URL must start with http://")),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("the URL must not have a query or a fragment"));
    }
    let base = url.as_str().trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        Ok(base.to_owned())
    } else {
        Ok(format!("{base}{TRACES_PATH}"))
    }
}

/// Keeps the export running; [`shutdown`](OtelGuard::shutdown) or drop it
/// to send what is still waiting and stop. Both block the calling thread
/// until the collector answered or the export's timeout passed.
///
/// ```no_run
/// # fn run() -> Result<(), crew_runtime::otel::OtelError> {
/// let telemetry = crew_runtime::otel::OtlpExport::http("http://collector:4318").install()?;
/// telemetry.flush()?;
/// telemetry.shutdown()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard stops the export"]
pub struct OtelGuard {
    provider: Option<SdkTracerProvider>,
}

impl OtelGuard {
    /// Sends every span ended so far, and waits for the collector.
    ///
    /// ```no_run
    /// # fn run(telemetry: crew_runtime::otel::OtelGuard) -> Result<(), crew_runtime::otel::OtelError> {
    /// telemetry.flush()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn flush(&self) -> Result<(), OtelError> {
        match &self.provider {
            Some(provider) => provider
                .force_flush()
                .map_err(|error| OtelError::Shutdown(error.to_string())),
            None => Ok(()),
        }
    }

    /// Sends what is still waiting and stops the export; spans ended later
    /// are not exported. An error says spans may have been lost.
    ///
    /// ```no_run
    /// # fn run(telemetry: crew_runtime::otel::OtelGuard) -> Result<(), crew_runtime::otel::OtelError> {
    /// telemetry.shutdown()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn shutdown(mut self) -> Result<(), OtelError> {
        match self.provider.take() {
            Some(provider) => provider
                .shutdown()
                .map_err(|error| OtelError::Shutdown(error.to_string())),
            None => Ok(()),
        }
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Nobody to tell: the SDK has logged why already.
            let _ = provider.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let ok = |url: &str| traces_url(url).expect("a good endpoint");
        assert_eq!(
            ok("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            ok("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            ok("http://collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(ok("http://h/otlp"), "http://h/otlp/v1/traces");
        for bad in [
            "",
            "collector:4318",
            "https://collector:4318",
            "ftp://collector",
            "http://",
            "http://c:4318/?a=b",
            "http://exa mple",
        ] {
            assert!(
                matches!(traces_url(bad), Err(OtelError::InvalidEndpoint { .. })),
                "{bad:?} was accepted"
            );
        }
    }
}
