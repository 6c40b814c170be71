//! Fetching URLs: the `HttpFetch` capability and the address rules it must enforce.
//!
//! The trait knows no HTTP client. The address classification here is pure
//! (`std::net` only) so that it is unit-tested; the real adapter in `bootstrap`
//! resolves every host, checks every address with [`check_address`], connects to the
//! checked address only (no second lookup) and re-checks each redirect.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use ai_core::CancellationToken;
use futures::future::BoxFuture;

/// One fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// An `http` or `https` URL.
    pub url: String,
    /// Most body bytes kept.
    pub max_bytes: usize,
    /// Time limit for the whole fetch, redirects included.
    pub timeout: Duration,
}

/// A fetched response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchResponse {
    /// The URL of the final (non-redirect) response.
    pub final_url: String,
    /// HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body, at most `max_bytes`.
    pub body: Vec<u8>,
    /// Whether the body was cut at `max_bytes`.
    pub truncated: bool,
    /// How many redirects were followed.
    pub redirects: u32,
}

/// Why an address may not be contacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockReason {
    /// 127.0.0.0/8, ::1, or a `localhost` name.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 100.64/10 (carrier-grade NAT).
    SharedAddressSpace,
    /// 224/4, ff00::/8.
    Multicast,
    /// 0/8, ::.
    Unspecified,
    /// ::ffff:0:0/96, ::ffff:0:0:0/96 and other IPv6 forms that embed an IPv4
    /// address.
    Ipv4Embedded,
    /// Known cloud metadata endpoints.
    CloudMetadata,
    /// Broadcast, documentation, benchmarking, reserved and deprecated ranges.
    Reserved,
}

impl BlockReason {
    /// A short, stable description.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::SharedAddressSpace => "shared (CGNAT)",
            Self::Multicast => "multicast",
            Self::Unspecified => "unspecified",
            Self::Ipv4Embedded => "IPv4-embedded IPv6",
            Self::CloudMetadata => "cloud metadata",
            Self::Reserved => "reserved",
        }
    }
}

/// Why a fetch failed. Messages never echo the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL is malformed or not http/https.
    #[error("invalid URL: {0}")]
    InvalidUrl(&'static str),
    /// The host resolves to an address that policy refuses.
    #[error("the destination address is not allowed ({})", .0.as_str())]
    Blocked(BlockReason),
    /// More than the allowed number of redirects.
    #[error("too many redirects")]
    TooManyRedirects,
    /// The fetch outlived its timeout.
    #[error("the fetch timed out")]
    Timeout,
    /// The call was cancelled.
    #[error("the fetch was cancelled")]
    Cancelled,
    /// The host name did not resolve.
    #[error("the host name could not be resolved")]
    Unresolved,
    /// Any other network failure (no URL in the message).
    #[error("network failure: {0}")]
    Network(String),
}

/// Fetches URLs under the address rules. Object-safe.
pub trait HttpFetch: Send + Sync {
    /// Fetches one URL, following and re-checking redirects.
    fn fetch(
        &self,
        request: FetchRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<FetchResponse, FetchError>>;
}

const fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

fn in_v4(ip: u32, net: u32, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    ip & mask == net & mask
}

/// Classifies an IPv4 address; `None` means publicly routable.
pub fn classify_v4(ip: Ipv4Addr) -> Option<BlockReason> {
    let n = u32::from(ip);
    const METADATA: [u32; 3] = [
        v4(169, 254, 169, 254), // AWS, GCP, Azure, OpenStack
        v4(168, 63, 129, 16),   // Azure wire server
        v4(100, 100, 100, 200), // Alibaba
    ];
    if METADATA.contains(&n) {
        return Some(BlockReason::CloudMetadata);
    }
    let table: [(u32, u32, BlockReason); 16] = [
        (v4(0, 0, 0, 0), 8, BlockReason::Unspecified),
        (v4(10, 0, 0, 0), 8, BlockReason::Private),
        (v4(100, 64, 0, 0), 10, BlockReason::SharedAddressSpace),
        (v4(127, 0, 0, 0), 8, BlockReason::Loopback),
        (v4(169, 254, 0, 0), 16, BlockReason::LinkLocal),
        (v4(172, 16, 0, 0), 12, BlockReason::Private),
        (v4(192, 0, 0, 0), 24, BlockReason::Reserved),
        (v4(192, 0, 2, 0), 24, BlockReason::Reserved),
        (v4(192, 88, 99, 0), 24, BlockReason::Reserved),
        (v4(192, 168, 0, 0), 16, BlockReason::Private),
        (v4(198, 18, 0, 0), 15, BlockReason::Reserved),
        (v4(198, 51, 100, 0), 24, BlockReason::Reserved),
        (v4(203, 0, 113, 0), 24, BlockReason::Reserved),
        (v4(224, 0, 0, 0), 4, BlockReason::Multicast),
        (v4(240, 0, 0, 0), 4, BlockReason::Reserved),
        (v4(255, 255, 255, 255), 32, BlockReason::Reserved),
    ];
    table
        .iter()
        .find(|(net, prefix, _)| in_v4(n, *net, *prefix))
        .map(|(_, _, reason)| *reason)
}

fn in_v6(ip: u128, net: u128, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    ip & mask == net & mask
}

/// Classifies an IPv6 address; `None` means publicly routable. Every form that embeds
/// an IPv4 address (mapped, translated, compatible, NAT64, 6to4, Teredo) is refused
/// outright.
pub fn classify_v6(ip: Ipv6Addr) -> Option<BlockReason> {
    let n = u128::from(ip);
    if ip.is_unspecified() {
        return Some(BlockReason::Unspecified);
    }
    if ip.is_loopback() {
        return Some(BlockReason::Loopback);
    }
    let table: [(u128, u32, BlockReason); 12] = [
        (
            0xfd00_0ec2_0000_0000_0000_0000_0000_0254,
            128,
            BlockReason::CloudMetadata,
        ),
        (
            0x0000_0000_0000_0000_0000_ffff_0000_0000,
            96,
            BlockReason::Ipv4Embedded,
        ),
        (
            0x0000_0000_0000_0000_ffff_0000_0000_0000,
            96,
            BlockReason::Ipv4Embedded,
        ), // IPv4-translated (RFC 2765, SIIT): ::ffff:0:a.b.c.d
        (0, 96, BlockReason::Ipv4Embedded), // IPv4-compatible (deprecated)
        (
            0x0064_ff9b_0000_0000_0000_0000_0000_0000,
            96,
            BlockReason::Ipv4Embedded,
        ),
        (
            0x0064_ff9b_0001_0000_0000_0000_0000_0000,
            48,
            BlockReason::Ipv4Embedded,
        ),
        (
            0x2002_0000_0000_0000_0000_0000_0000_0000,
            16,
            BlockReason::Ipv4Embedded,
        ),
        (
            0x2001_0000_0000_0000_0000_0000_0000_0000,
            32,
            BlockReason::Ipv4Embedded,
        ),
        (
            0xfc00_0000_0000_0000_0000_0000_0000_0000,
            7,
            BlockReason::Private,
        ),
        (
            0xfe80_0000_0000_0000_0000_0000_0000_0000,
            10,
            BlockReason::LinkLocal,
        ),
        (
            0xfec0_0000_0000_0000_0000_0000_0000_0000,
            10,
            BlockReason::Reserved,
        ),
        (
            0xff00_0000_0000_0000_0000_0000_0000_0000,
            8,
            BlockReason::Multicast,
        ),
    ];
    if in_v6(n, 0x2001_0db8_0000_0000_0000_0000_0000_0000, 32) {
        return Some(BlockReason::Reserved); // documentation
    }
    table
        .iter()
        .find(|(net, prefix, _)| in_v6(n, *net, *prefix))
        .map(|(_, _, reason)| *reason)
}

/// Classifies an address; `None` means publicly routable.
pub fn classify(ip: IpAddr) -> Option<BlockReason> {
    match ip {
        IpAddr::V4(ip) => classify_v4(ip),
        IpAddr::V6(ip) => classify_v6(ip),
    }
}

/// Whether a host name is a `localhost` name (RFC 6761), refused before resolution.
pub fn is_localhost_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// A malformed allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid network allowlist entry `{0}`")]
pub struct AllowlistError(pub String);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Host(String, Option<u16>),
    Net(IpAddr, u32, Option<u16>),
}

/// Destinations that may be contacted even though their address is refused by
/// default: host names (`intranet.example`), addresses (`127.0.0.1`), CIDRs
/// (`10.0.0.0/8`), each optionally with a port (`127.0.0.1:8080`, `[::1]:80`,
/// `intranet.example:8443`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetAllowlist {
    rules: Vec<Rule>,
}

impl NetAllowlist {
    /// Nothing allowlisted (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses entries.
    pub fn parse<I, S>(entries: I) -> Result<Self, AllowlistError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut rules = Vec::new();
        for entry in entries {
            rules.push(parse_rule(entry.as_ref().trim())?);
        }
        Ok(Self { rules })
    }

    /// Whether `addr`, reached through `host` (the URL's host), is allowlisted.
    pub fn allows(&self, host: &str, addr: SocketAddr) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        self.rules.iter().any(|rule| match rule {
            Rule::Host(h, port) => h == host && port.is_none_or(|p| p == addr.port()),
            Rule::Net(net, prefix, port) => {
                port.is_none_or(|p| p == addr.port())
                    && match (net, addr.ip()) {
                        (IpAddr::V4(n), IpAddr::V4(a)) => {
                            in_v4(u32::from(a), u32::from(*n), *prefix)
                        }
                        (IpAddr::V6(n), IpAddr::V6(a)) => {
                            in_v6(u128::from(a), u128::from(*n), *prefix)
                        }
                        _ => false,
                    }
            }
        })
    }
}

fn parse_rule(entry: &str) -> Result<Rule, AllowlistError> {
    let bad = || AllowlistError(entry.to_owned());
    if entry.is_empty() {
        return Err(bad());
    }
    if let Some((net, prefix)) = entry.split_once('/') {
        let ip: IpAddr = net.parse().map_err(|_| bad())?;
        let prefix: u32 = prefix.parse().map_err(|_| bad())?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        return Ok(Rule::Net(ip, prefix, None));
    }
    if let Ok(ip) = entry.parse::<IpAddr>() {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        return Ok(Rule::Net(ip, max, None));
    }
    if let Ok(sock) = entry.parse::<SocketAddr>() {
        let max = if sock.is_ipv4() { 32 } else { 128 };
        return Ok(Rule::Net(sock.ip(), max, Some(sock.port())));
    }
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) => (h, Some(p.parse::<u16>().map_err(|_| bad())?)),
        None => (entry, None),
    };
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if !valid {
        return Err(bad());
    }
    Ok(Rule::Host(
        host.trim_end_matches('.').to_ascii_lowercase(),
        port,
    ))
}

/// Checks one resolved address for `host`: refused addresses pass only when
/// allowlisted.
pub fn check_address(
    host: &str,
    addr: SocketAddr,
    allowlist: &NetAllowlist,
) -> Result<(), BlockReason> {
    match classify(addr.ip()) {
        Some(reason) if !allowlist.allows(host, addr) => Err(reason),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_refused_ranges() {
        let cases: &[(&str, Option<BlockReason>)] = &[
            ("127.0.0.1", Some(BlockReason::Loopback)),
            ("127.255.0.9", Some(BlockReason::Loopback)),
            ("10.1.2.3", Some(BlockReason::Private)),
            ("172.16.0.1", Some(BlockReason::Private)),
            ("172.31.255.255", Some(BlockReason::Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(BlockReason::Private)),
            ("169.254.169.254", Some(BlockReason::CloudMetadata)),
            ("169.254.1.1", Some(BlockReason::LinkLocal)),
            ("100.64.0.1", Some(BlockReason::SharedAddressSpace)),
            ("100.127.255.255", Some(BlockReason::SharedAddressSpace)),
            ("100.128.0.1", None),
            ("0.0.0.0", Some(BlockReason::Unspecified)),
            ("224.0.0.1", Some(BlockReason::Multicast)),
            ("255.255.255.255", Some(BlockReason::Reserved)),
            ("8.8.8.8", None),
            ("::1", Some(BlockReason::Loopback)),
            ("::", Some(BlockReason::Unspecified)),
            ("::ffff:127.0.0.1", Some(BlockReason::Ipv4Embedded)),
            ("::ffff:8.8.8.8", Some(BlockReason::Ipv4Embedded)),
            ("::ffff:0:127.0.0.1", Some(BlockReason::Ipv4Embedded)),
            ("::ffff:0:a00:1", Some(BlockReason::Ipv4Embedded)),
            ("::ffff:0:8.8.8.8", Some(BlockReason::Ipv4Embedded)),
            ("fd00:ec2::254", Some(BlockReason::CloudMetadata)),
            ("fc00::1", Some(BlockReason::Private)),
            ("fe80::1", Some(BlockReason::LinkLocal)),
            ("ff02::1", Some(BlockReason::Multicast)),
            ("64:ff9b::7f00:1", Some(BlockReason::Ipv4Embedded)),
            ("2002:7f00:1::", Some(BlockReason::Ipv4Embedded)),
            ("2606:4700::1111", None),
        ];
        for (ip, want) in cases {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(classify(ip), *want, "{ip}");
        }
    }

    #[test]
    fn allowlist_matches_hosts_addresses_cidrs_and_ports() {
        let list =
            NetAllowlist::parse(["127.0.0.1:8080", "10.0.0.0/8", "Intra.Example", "[::1]:80"])
                .unwrap();
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(list.allows("127.0.0.1", at("127.0.0.1:8080")));
        assert!(!list.allows("127.0.0.1", at("127.0.0.1:8081")));
        assert!(list.allows("x", at("10.9.9.9:1")));
        assert!(list.allows("intra.example.", at("192.168.0.1:443")));
        assert!(list.allows("[::1]", at("[::1]:80")));
        assert!(!list.allows("other", at("192.168.0.1:443")));
        assert!(check_address("h", at("8.8.8.8:80"), &NetAllowlist::none()).is_ok());
        assert_eq!(
            check_address("h", at("127.0.0.1:80"), &NetAllowlist::none()),
            Err(BlockReason::Loopback)
        );
        assert!(NetAllowlist::parse(["10.0.0.0/33"]).is_err());
        assert!(NetAllowlist::parse(["bad host"]).is_err());
    }

    #[test]
    fn localhost_names() {
        assert!(is_localhost_name("localhost"));
        assert!(is_localhost_name("LocalHost."));
        assert!(is_localhost_name("evil.localhost"));
        assert!(!is_localhost_name("localhost.example"));
    }
}
