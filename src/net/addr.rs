//! Which IP addresses an untrusted URL may reach: the public internet only. Everything a
//! stranger could use to probe the inside — loopback, private and shared (CGNAT) ranges,
//! link-local, unique-local, multicast, unspecified, documentation and reserved ranges, cloud
//! metadata endpoints — is refused, and an IPv6 address that carries an IPv4 one (mapped,
//! compatible, NAT64, 6to4) is judged by the IPv4 address inside.
//!
//! Must not: do I/O (the resolver and the literal check call this); allow a range by default
//! that is not globally routable.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use ipnet::{IpNet, Ipv6Net};

/// Why an address is not reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    Metadata,
    Loopback,
    Private,
    Shared,
    LinkLocal,
    UniqueLocal,
    Multicast,
    Unspecified,
    Documentation,
    Reserved,
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Blocked::Metadata => "a cloud metadata address",
            Blocked::Loopback => "a loopback address",
            Blocked::Private => "a private network address",
            Blocked::Shared => "a shared (carrier-grade NAT) address",
            Blocked::LinkLocal => "a link-local address",
            Blocked::UniqueLocal => "a unique-local address",
            Blocked::Multicast => "a multicast address",
            Blocked::Unspecified => "an unspecified address",
            Blocked::Documentation => "a documentation address",
            Blocked::Reserved => "a reserved address",
        })
    }
}

/// The ranges refused, most specific first (metadata endpoints sit inside wider ranges and
/// get their own name). IPv6 prefixes that embed an IPv4 address are handled in `classify`.
const TABLE: &[(&str, Blocked)] = &[
    // AWS, GCP, Azure, OpenStack, DigitalOcean; Alibaba; Oracle; AWS over IPv6.
    ("169.254.169.254/32", Blocked::Metadata),
    ("100.100.100.200/32", Blocked::Metadata),
    ("192.0.0.192/32", Blocked::Metadata),
    ("fd00:ec2::254/128", Blocked::Metadata),
    ("0.0.0.0/8", Blocked::Unspecified),
    ("10.0.0.0/8", Blocked::Private),
    ("100.64.0.0/10", Blocked::Shared),
    ("127.0.0.0/8", Blocked::Loopback),
    ("169.254.0.0/16", Blocked::LinkLocal),
    ("172.16.0.0/12", Blocked::Private),
    ("192.0.0.0/24", Blocked::Reserved),
    ("192.0.2.0/24", Blocked::Documentation),
    ("192.88.99.0/24", Blocked::Reserved),
    ("192.168.0.0/16", Blocked::Private),
    ("198.18.0.0/15", Blocked::Reserved),
    ("198.51.100.0/24", Blocked::Documentation),
    ("203.0.113.0/24", Blocked::Documentation),
    ("224.0.0.0/4", Blocked::Multicast),
    ("240.0.0.0/4", Blocked::Reserved),
    ("::/128", Blocked::Unspecified),
    ("::1/128", Blocked::Loopback),
    ("64:ff9b:1::/48", Blocked::Private),
    ("100::/64", Blocked::Reserved),
    ("2001::/23", Blocked::Reserved),
    ("2001:db8::/32", Blocked::Documentation),
    ("3fff::/20", Blocked::Documentation),
    ("fc00::/7", Blocked::UniqueLocal),
    ("fe80::/10", Blocked::LinkLocal),
    ("fec0::/10", Blocked::LinkLocal),
    ("ff00::/8", Blocked::Multicast),
];

fn table() -> &'static [(IpNet, Blocked)] {
    static PARSED: OnceLock<Vec<(IpNet, Blocked)>> = OnceLock::new();
    PARSED.get_or_init(|| {
        TABLE
            .iter()
            .map(|(net, why)| (net.parse().expect("a CIDR in the table"), *why))
            .collect()
    })
}

/// `Ok` for an address on the public internet, else why not.
pub fn classify(ip: IpAddr) -> Result<(), Blocked> {
    let ip = match ip {
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    match table().iter().find(|(net, _)| net.contains(&ip)) {
        Some((_, why)) => Err(*why),
        None => Ok(()),
    }
}

/// The IPv4 address an IPv6 one stands for: IPv4-mapped `::ffff:a.b.c.d`, the deprecated
/// IPv4-compatible `::a.b.c.d`, NAT64's well-known `64:ff9b::/96` and 6to4's `2002::/16`.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    static PREFIXES: OnceLock<[Ipv6Net; 3]> = OnceLock::new();
    let [compatible, nat64, six_to_four] = PREFIXES.get_or_init(|| {
        ["::/96", "64:ff9b::/96", "2002::/16"].map(|p| p.parse().expect("a prefix"))
    });
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let o = v6.octets();
    // `::` and `::1` are IPv6's own; every other address of ::/96 is an IPv4 one.
    if (compatible.contains(&v6) && !matches!(v6.segments(), [0, 0, 0, 0, 0, 0, 0, 0 | 1]))
        || nat64.contains(&v6)
    {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    six_to_four
        .contains(&v6)
        .then(|| Ipv4Addr::new(o[2], o[3], o[4], o[5]))
}

/// The table's IPv4 networks, for a test that walks their edges.
#[cfg(test)]
fn v4_nets() -> Vec<ipnet::Ipv4Net> {
    table()
        .iter()
        .filter_map(|(n, _)| match n {
            IpNet::V4(n) => Some(*n),
            IpNet::V6(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_classified() {
        use Blocked::*;
        let cases: &[(&str, Result<(), Blocked>)] = &[
            ("93.184.215.14", Ok(())),
            ("1.1.1.1", Ok(())),
            ("8.8.8.8", Ok(())),
            ("149.154.167.220", Ok(())),
            ("2606:4700:4700::1111", Ok(())),
            ("2a00:1450:4001:80b::200e", Ok(())),
            ("127.0.0.1", Err(Loopback)),
            ("127.255.255.254", Err(Loopback)),
            ("::1", Err(Loopback)),
            ("10.0.0.1", Err(Private)),
            ("172.16.0.1", Err(Private)),
            ("172.31.255.255", Err(Private)),
            ("172.32.0.1", Ok(())),
            ("192.168.1.1", Err(Private)),
            ("100.64.0.1", Err(Shared)),
            ("100.127.255.255", Err(Shared)),
            ("100.128.0.1", Ok(())),
            ("169.254.1.1", Err(LinkLocal)),
            ("fe80::1", Err(LinkLocal)),
            ("fec0::1", Err(LinkLocal)),
            ("fc00::1", Err(UniqueLocal)),
            ("fd12:3456::1", Err(UniqueLocal)),
            ("224.0.0.1", Err(Multicast)),
            ("239.255.255.250", Err(Multicast)),
            ("ff02::1", Err(Multicast)),
            ("0.0.0.0", Err(Unspecified)),
            ("0.1.2.3", Err(Unspecified)),
            ("::", Err(Unspecified)),
            ("255.255.255.255", Err(Reserved)),
            ("240.0.0.1", Err(Reserved)),
            ("198.18.0.1", Err(Reserved)),
            ("192.0.2.10", Err(Documentation)),
            ("2001:db8::1", Err(Documentation)),
            // Cloud metadata, by name even inside wider ranges.
            ("169.254.169.254", Err(Metadata)),
            ("fd00:ec2::254", Err(Metadata)),
            ("100.100.100.200", Err(Metadata)),
            ("192.0.0.192", Err(Metadata)),
            // IPv4 inside IPv6: judged by the IPv4 address.
            ("::ffff:127.0.0.1", Err(Loopback)),
            ("::ffff:169.254.169.254", Err(Metadata)),
            ("::ffff:10.1.2.3", Err(Private)),
            ("::ffff:8.8.8.8", Ok(())),
            ("::127.0.0.1", Err(Loopback)),
            ("::10.0.0.1", Err(Private)),
            ("64:ff9b::7f00:1", Err(Loopback)),
            ("64:ff9b::a9fe:a9fe", Err(Metadata)),
            ("64:ff9b::808:808", Ok(())),
            ("2002:7f00:1::1", Err(Loopback)),
            ("2002:c0a8:101::1", Err(Private)),
            ("2002:808:808::1", Ok(())),
            ("64:ff9b:1::1", Err(Private)),
            ("2001::1", Err(Reserved)),
        ];
        for (text, want) in cases {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(classify(ip), *want, "{text}");
        }
    }

    /// Each IPv4 range is refused at its first and its last address, also when written as an
    /// IPv4-mapped IPv6 address.
    #[test]
    fn ranges_hold_their_edges() {
        for net in v4_nets() {
            for ip in [net.network(), net.broadcast()] {
                assert!(classify(IpAddr::V4(ip)).is_err(), "{net}: {ip}");
                let mapped = ip.to_ipv6_mapped();
                assert_eq!(
                    classify(IpAddr::V6(mapped)),
                    classify(IpAddr::V4(ip)),
                    "{mapped}"
                );
            }
        }
    }
}
