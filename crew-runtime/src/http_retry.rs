//! When a failed request of an HTTP model client is worth another try, and
//! how long to wait first: shared by the OpenAI-compatible and the Anthropic
//! clients, and (the waits) by the announcements' channels.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// OpenAI's own, finer-grained `Retry-After`, in milliseconds.
const RETRY_AFTER_MS: &str = "retry-after-ms";

/// Whether a server that answered `status` may answer better later: rate
/// limits and server errors (Anthropic's 529, overloaded, among them).
/// Every other status is the request's fault and would fail again.
#[cfg_attr(
    not(any(feature = "openai", feature = "anthropic")),
    allow(dead_code, reason = "the channels use the waits only")
)]
pub(crate) fn is_retryable_status(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// How long the server asks the client to wait, from `retry-after-ms` or
/// `Retry-After` (seconds or an HTTP date, a date in the past meaning now).
/// `None` when it does not say, or says it in a form that cannot be read.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(millis) = text(RETRY_AFTER_MS).and_then(|ms| ms.parse::<f64>().ok())
        && let Ok(wait) = Duration::try_from_secs_f64(millis / 1000.0)
    {
        return Some(wait);
    }
    let value = text(RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait before retry number `retry` (0 for the first): `base` doubled
/// at each retry, never more than `cap`.
pub(crate) fn backoff(base: Duration, retry: u32, cap: Duration) -> Duration {
    let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
    base.checked_mul(factor).unwrap_or(cap).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn retry_after_reads_seconds_dates_and_milliseconds() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT")
            .unwrap_or(SystemTime::UNIX_EPOCH);

        let read = |pairs| retry_after(&headers(pairs), now);

        assert_eq!(read(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            read(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            read(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(
            read(&[("retry-after-ms", "1500"), ("retry-after", "2")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(read(&[("retry-after", "soon")]), None);
        assert_eq!(read(&[("retry-after", "-1")]), None);
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let base = Duration::from_millis(500);
        let cap = Duration::from_secs(3);

        let waits: Vec<Duration> = (0..5).map(|retry| backoff(base, retry, cap)).collect();

        assert_eq!(
            waits,
            [500, 1000, 2000, 3000, 3000].map(Duration::from_millis)
        );
        assert_eq!(backoff(base, 40, cap), cap, "no overflow");
    }

    #[test]
    fn rate_limits_and_server_errors_are_retried_and_nothing_else() {
        let retried = |code| StatusCode::from_u16(code).is_ok_and(is_retryable_status);

        assert!(retried(429));
        assert!(retried(500));
        assert!(retried(503));
        assert!(retried(529), "Anthropic's overloaded");
        assert!(!retried(400));
        assert!(!retried(401));
        assert!(!retried(404));
    }
}
