//! The guarded client's DNS resolver: it resolves a name, keeps only public addresses, and
//! hands exactly those to the connector. The address checked is the address connected to, so
//! a name that answers a public address to a check and a private one to the connection (DNS
//! rebinding) has no second lookup to win.
//!
//! Must not: return an address `addr::classify` refuses; resolve IP literals (the connector
//! never asks: `Guard` checks those itself).

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::addr::{classify, Blocked};

/// The error a resolution ends with when every address of the name is refused; found again
/// in the reqwest error's sources to tell the person why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the host resolves to {0}")]
pub struct Refused(pub Blocked);

/// Resolves with the system resolver (tokio's `lookup_host`) and drops refused addresses.
#[derive(Debug, Default, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (public, first_refusal) = keep_public(all);
            match (public.is_empty(), first_refusal) {
                (true, Some(why)) => Err(Box::new(Refused(why)) as _),
                _ => Ok(Box::new(public.into_iter()) as Addrs),
            }
        })
    }
}

/// The public addresses of `all`, and why the first refused one was refused.
fn keep_public(all: Vec<SocketAddr>) -> (Vec<SocketAddr>, Option<Blocked>) {
    let mut refusal = None;
    let public = all
        .into_iter()
        .filter(|a| match classify(a.ip()) {
            Ok(()) => true,
            Err(why) => {
                refusal.get_or_insert(why);
                false
            }
        })
        .collect();
    (public, refusal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_kept() {
        let addrs = |list: &[&str]| -> Vec<SocketAddr> {
            list.iter()
                .map(|a| SocketAddr::new(a.parse().unwrap(), 0))
                .collect()
        };
        let (kept, why) = keep_public(addrs(&["10.0.0.1", "93.184.215.14", "::1"]));
        assert_eq!(kept, addrs(&["93.184.215.14"]));
        assert_eq!(why, Some(Blocked::Private));
        let (kept, why) = keep_public(addrs(&["127.0.0.1", "::1"]));
        assert!(kept.is_empty());
        assert_eq!(why, Some(Blocked::Loopback));
    }

    #[tokio::test]
    async fn localhost_resolves_to_nothing_reachable() {
        let name: Name = "localhost".parse().unwrap();
        let err = match PublicOnly.resolve(name).await {
            Ok(addrs) => panic!("resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e,
        };
        assert_eq!(
            err.downcast_ref::<Refused>(),
            Some(&Refused(Blocked::Loopback))
        );
    }
}
