//! Whether a From address can be believed: the receiving server's DKIM / SPF / DMARC verdict
//! (RFC 8601 Authentication-Results) must pass for the From's own domain.
//!
//! Only the topmost Authentication-Results header is read: the receiving server adds its own
//! above everything the message arrived with, so a sender's forged header lies below it and
//! is never the one read here. A message without one fails (under `require_auth`).

/// Whether `results` (the topmost Authentication-Results value) vouches for `from`: DMARC
/// passed for its domain, or DKIM passed with a signing domain that is its domain (or a parent
/// of it), or SPF passed for an envelope sender of its domain.
pub fn vouches_for(results: Option<&str>, from: &str) -> bool {
    let Some(results) = results else {
        return false;
    };
    let Some(domain) = from.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()) else {
        return false;
    };
    let uncommented = strip_comments(results);
    // The first element is the authserv-id; the rest are `method=result prop=value …`.
    uncommented.split(';').skip(1).any(|res| {
        let mut words = res.split_whitespace();
        let Some((method, result)) = words.next().and_then(|w| w.split_once('=')) else {
            return false;
        };
        if !result.eq_ignore_ascii_case("pass") {
            return false;
        }
        let props: Vec<(String, String)> = words
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| {
                (
                    k.to_ascii_lowercase(),
                    v.trim_matches('"').to_ascii_lowercase(),
                )
            })
            .collect();
        let prop = |k: &str| props.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        match method.to_ascii_lowercase().as_str() {
            "dmarc" => prop("header.from").is_some_and(|d| d == domain),
            "dkim" => prop("header.d")
                .or_else(|| prop("header.i").map(|i| i.rsplit('@').next().unwrap_or(i)))
                .is_some_and(|d| domain == d || domain.ends_with(&format!(".{d}"))),
            "spf" => prop("smtp.mailfrom")
                .map(|m| m.rsplit('@').next().unwrap_or(m))
                .is_some_and(|d| d == domain),
            _ => false,
        }
    })
}

fn strip_comments(s: &str) -> String {
    let mut depth = 0usize;
    s.chars()
        .filter(|c| match c {
            '(' => {
                depth += 1;
                false
            }
            ')' => {
                depth = depth.saturating_sub(1);
                false
            }
            _ => depth == 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_must_pass_for_the_from_domain() {
        let from = "alice@example.org";
        let cases = [
            (
                "mx.example.net; dkim=pass header.d=example.org header.s=s1",
                true,
            ),
            (
                "mx.example.net; dkim=pass (good sig) header.d=mail.example.org",
                false,
            ),
            ("mx.example.net; dkim=pass header.d=evil.test", false),
            (
                "mx.example.net; spf=pass smtp.mailfrom=bounce@example.org",
                true,
            ),
            (
                "mx.example.net; spf=fail smtp.mailfrom=alice@example.org",
                false,
            ),
            ("mx.example.net; dmarc=pass header.from=example.org", true),
            (
                "mx.example.net; dmarc=fail header.from=example.org; dkim=none",
                false,
            ),
            ("mx.example.net; none", false),
            ("dkim=pass header.d=example.org", false),
        ];
        for (results, want) in cases {
            assert_eq!(vouches_for(Some(results), from), want, "{results}");
        }
        assert!(!vouches_for(None, from));
        assert!(vouches_for(
            Some("mx; dkim=pass header.d=example.org"),
            "bob@lists.example.org"
        ));
    }
}
