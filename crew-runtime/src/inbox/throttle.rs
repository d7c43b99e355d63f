//! The sign-in throttle: failed sign-ins counted per account and per
//! client address in the store (so that every replica sees them), and
//! further attempts refused for a while once there were too many.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;

use super::State;
use crate::store::ThrottleRule;

/// How failed sign-ins are throttled. Failures are counted per account
/// (the name as typed, in the form the requester rule compares) and per
/// client address, in the store, so that every replica of the inbox
/// shares the count. Once a key has failed more than its allowance
/// within the [`window`](SignInThrottle::window), each further failure
/// refuses every attempt of that key (429 with `Retry-After`, no password
/// checked) for a delay that doubles from
/// [`first_lockout`](SignInThrottle::first_lockout) up to
/// [`max_lockout`](SignInThrottle::max_lockout). A success clears the
/// account's and the address's count.
///
/// The policy keeps a real approver in: an address's allowance (5) is
/// smaller than an account's (20), so that one guessing address is held
/// back long before the account it guesses is; a locked account opens
/// again after at most `max_lockout` (15 minutes) whatever was tried;
/// and a one-time sign-in token (`crew-inbox sign-in-token`) is held back
/// only by its address's lock, never by the account's.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::inbox::SignInThrottle;
///
/// let strict = SignInThrottle::default()
///     .failures_per_address(3)
///     .max_lockout(Duration::from_secs(600));
/// assert_eq!(strict.failures_per_address, 3);
/// assert_eq!(strict.failures_per_account, 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignInThrottle {
    /// Failures from one client address allowed before its attempts are
    /// refused for a while (5 unless set).
    pub failures_per_address: u32,
    /// Failures for one account allowed before its attempts are refused
    /// for a while (20 unless set).
    pub failures_per_account: u32,
    /// The first refusal's length; each further failure doubles it
    /// (1 second unless set).
    pub first_lockout: Duration,
    /// The longest refusal (15 minutes unless set).
    pub max_lockout: Duration,
    /// How long without a failure before a key's count starts again
    /// (1 hour unless set).
    pub window: Duration,
}

impl Default for SignInThrottle {
    /// 5 failures per address and 20 per account, then refusals from
    /// 1 second doubling to 15 minutes, counts kept for an hour.
    ///
    /// ```
    /// let throttle = crew_runtime::inbox::SignInThrottle::default();
    /// assert_eq!(throttle.max_lockout, std::time::Duration::from_secs(15 * 60));
    /// ```
    fn default() -> Self {
        SignInThrottle {
            failures_per_address: 5,
            failures_per_account: 20,
            first_lockout: Duration::from_secs(1),
            max_lockout: Duration::from_secs(15 * 60),
            window: Duration::from_secs(60 * 60),
        }
    }
}

impl SignInThrottle {
    /// Sets [`failures_per_address`](SignInThrottle::failures_per_address).
    ///
    /// ```
    /// let throttle = crew_runtime::inbox::SignInThrottle::default().failures_per_address(2);
    /// assert_eq!(throttle.failures_per_address, 2);
    /// ```
    pub fn failures_per_address(mut self, failures: u32) -> Self {
        self.failures_per_address = failures;
        self
    }

    /// Sets [`failures_per_account`](SignInThrottle::failures_per_account).
    ///
    /// ```
    /// let throttle = crew_runtime::inbox::SignInThrottle::default().failures_per_account(10);
    /// assert_eq!(throttle.failures_per_account, 10);
    /// ```
    pub fn failures_per_account(mut self, failures: u32) -> Self {
        self.failures_per_account = failures;
        self
    }

    /// Sets [`first_lockout`](SignInThrottle::first_lockout).
    ///
    /// ```
    /// use std::time::Duration;
    /// let throttle = crew_runtime::inbox::SignInThrottle::default().first_lockout(Duration::from_secs(2));
    /// assert_eq!(throttle.first_lockout, Duration::from_secs(2));
    /// ```
    pub fn first_lockout(mut self, lockout: Duration) -> Self {
        self.first_lockout = lockout;
        self
    }

    /// Sets [`max_lockout`](SignInThrottle::max_lockout).
    ///
    /// ```
    /// use std::time::Duration;
    /// let throttle = crew_runtime::inbox::SignInThrottle::default().max_lockout(Duration::from_secs(60));
    /// assert_eq!(throttle.max_lockout, Duration::from_secs(60));
    /// ```
    pub fn max_lockout(mut self, lockout: Duration) -> Self {
        self.max_lockout = lockout;
        self
    }

    /// Sets [`window`](SignInThrottle::window).
    ///
    /// ```
    /// use std::time::Duration;
    /// let throttle = crew_runtime::inbox::SignInThrottle::default().window(Duration::from_secs(600));
    /// assert_eq!(throttle.window, Duration::from_secs(600));
    /// ```
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The rule for a key allowed `failures` failures.
    pub(crate) fn rule(&self, failures: u32) -> ThrottleRule {
        ThrottleRule {
            free_failures: failures,
            first_lockout: self.first_lockout,
            max_lockout: self.max_lockout.max(self.first_lockout),
            window: self.window,
        }
    }
}

/// The client's address, as [`client_address`] finds it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client(pub(crate) Option<IpAddr>);

impl FromRequestParts<State> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Self::Rejection> {
        Ok(Client(client_address(parts, &state.trusted_proxies)))
    }
}

/// The throttle key of a client address.
pub(crate) fn address_key(address: IpAddr) -> String {
    format!("address:{}", canonical(address))
}

/// The throttle key of an account name as typed.
pub(crate) fn account_key(name: &str) -> String {
    format!("account:{}", crate::store::identity_key(name))
}

/// An IPv4 address mapped into IPv6 is the IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        IpAddr::V4(_) => address,
    }
}

/// The client's address: the connection's peer, or, when the peer is a
/// trusted proxy, the nearest address of `X-Forwarded-For` (else of
/// `Forwarded: for=`) that is not a trusted proxy. `None` when the router
/// is served without the peer's address (mounted in an app that does not
/// give it).
pub(crate) fn client_address(parts: &Parts, trusted: &[IpAddr]) -> Option<IpAddr> {
    let ConnectInfo(peer) = parts.extensions.get::<ConnectInfo<SocketAddr>>()?;
    let peer = canonical(peer.ip());
    let is_trusted = |address: &IpAddr| trusted.iter().any(|proxy| canonical(*proxy) == *address);
    if !is_trusted(&peer) {
        return Some(peer);
    }
    let chain = forwarded_chain(&parts.headers);
    // From the nearest hop outwards: the first one not a proxy of ours is
    // the client (what lies before it, anyone could have written).
    let client = chain.iter().rev().copied().find(|hop| !is_trusted(hop));
    Some(client.or_else(|| chain.first().copied()).unwrap_or(peer))
}

/// The addresses a proxy chain reported, farthest first.
fn forwarded_chain(headers: &HeaderMap) -> Vec<IpAddr> {
    let xff: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(parse_hop)
        .collect();
    if !xff.is_empty() {
        return xff;
    }
    headers
        .get_all("forwarded")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split([',', ';']))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(key, _)| key.trim().eq_ignore_ascii_case("for"))
        .filter_map(|(_, value)| parse_hop(value))
        .collect()
}

/// One hop: `1.2.3.4`, `1.2.3.4:567`, `"[::1]:80"`, `::1`.
fn parse_hop(text: &str) -> Option<IpAddr> {
    let text = text.trim().trim_matches('"');
    if let Ok(address) = text.parse::<IpAddr>() {
        return Some(canonical(address));
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Some(canonical(socket.ip()));
    }
    text.strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(inside, _)| inside.parse::<IpAddr>().ok())
        .map(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = Request::builder().uri("/login");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (mut parts, ()) = request.body(()).expect("a request").into_parts();
        let peer: SocketAddr = peer.parse().expect("an address");
        parts.extensions.insert(ConnectInfo(peer));
        parts
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn forwarded_headers_count_only_from_a_trusted_proxy() {
        let spoofed = parts("203.0.113.9:5000", &[("x-forwarded-for", "198.51.100.1")]);
        assert_eq!(client_address(&spoofed, &[]), Some(ip("203.0.113.9")));
        let proxied = parts(
            "10.0.0.2:5000",
            &[("x-forwarded-for", "6.6.6.6, 198.51.100.1, 10.0.0.3")],
        );
        let proxies = [ip("10.0.0.2"), ip("10.0.0.3")];
        // The client may have written 6.6.6.6; the proxy saw 198.51.100.1.
        assert_eq!(client_address(&proxied, &proxies), Some(ip("198.51.100.1")));
        let forwarded = parts(
            "10.0.0.2:5000",
            &[("forwarded", "for=\"[2001:db8::1]:4711\";proto=https")],
        );
        assert_eq!(
            client_address(&forwarded, &proxies),
            Some(ip("2001:db8::1"))
        );
        let bare = parts("10.0.0.2:5000", &[]);
        assert_eq!(client_address(&bare, &proxies), Some(ip("10.0.0.2")));
    }
}
