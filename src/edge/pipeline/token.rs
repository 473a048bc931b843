//! The edge's own bearer tokens (the admin API's, the egress routes'): a request is let in
//! when it carries `Authorization: Bearer <token>`, compared in constant time; a client that
//! presented wrong ones too often ([`Guesses`]) gets `429` and its credential is not even
//! compared, so guessing a token is slow.

use super::reply::Reply;
use crate::core::time::{Instant, Span};
use crate::edge::guesses::Guesses;
use crate::edge::headers;
use crate::edge::identity::ClientIp;
use crate::edge::tenants::same_secret;
use alloc::format;

/// Why a request was not let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    /// No `Authorization` header: `401`, not counted as a try.
    Missing,
    /// A wrong credential: `401`, counted as a failed try of its client.
    Wrong,
    /// Its client failed too often: `429`, the next try compared after `wait`.
    TooManyTries {
        /// Until the next try is compared.
        wait: Span,
    },
}

impl TokenRefusal {
    /// The answer: a bare `401` with `WWW-Authenticate: Bearer`, or `429` with `Retry-After`
    /// (whole seconds, at least 1).
    pub fn reply(&self) -> Reply {
        match *self {
            TokenRefusal::Missing | TokenRefusal::Wrong => {
                let mut reply = Reply::problem(401, headers::problem(401, "Unauthorized", "", None, None), None);
                reply.set("www-authenticate", "Bearer".into());
                reply
            }
            TokenRefusal::TooManyTries { wait } => {
                let retry = Span::from_secs(wait.as_secs_ceil().max(1));
                let detail = format!(
                    "Too many wrong tokens from this client; the next try is compared in {} s.",
                    retry.as_secs_ceil()
                );
                Reply::problem(429, headers::problem(429, "Too Many Requests", &detail, None, Some(retry)), Some(retry))
            }
        }
    }
}

/// Let in a request whose `Authorization` header is `presented`, from the client `ip`, when
/// it is `Bearer <token>`; a wrong one is counted in `guesses` at `now`.
///
/// # Errors
/// Why not ([`TokenRefusal`]).
pub fn authorise(
    guesses: &mut Guesses,
    presented: Option<&str>,
    token: &str,
    ip: Option<ClientIp>,
    now: Instant,
) -> Result<(), TokenRefusal> {
    let Some(presented) = presented else { return Err(TokenRefusal::Missing) };
    guesses.may_try(ip, now).map_err(|wait| TokenRefusal::TooManyTries { wait })?;
    let authorised = presented
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("bearer "))
        .is_some_and(|_| same_secret(presented[7..].trim(), token));
    if authorised {
        return Ok(());
    }
    guesses.failed(ip, now);
    Err(TokenRefusal::Wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_right_bearer_token_lets_in_and_wrong_ones_are_counted_until_429() {
        let mut guesses = Guesses::new(7);
        let ip = Some(ClientIp::V4(core::net::Ipv4Addr::new(198, 51, 100, 7)));
        let now = Instant::from_secs(10);
        assert_eq!(authorise(&mut guesses, Some("Bearer s3cret"), "s3cret", ip, now), Ok(()));
        assert_eq!(authorise(&mut guesses, Some("bearer  s3cret "), "s3cret", ip, now), Ok(()), "any case, trimmed");
        assert_eq!(authorise(&mut guesses, None, "s3cret", ip, now), Err(TokenRefusal::Missing));
        let mut wrong = 0;
        let refusal = loop {
            match authorise(&mut guesses, Some("Bearer guess"), "s3cret", ip, now) {
                Err(TokenRefusal::Wrong) => wrong += 1,
                other => break other,
            }
            assert!(wrong <= crate::edge::guesses::GUESSES_PER_MINUTE, "wrong tries are limited per minute");
        };
        let Err(TokenRefusal::TooManyTries { wait }) = refusal else { panic!("{refusal:?}") };
        assert!(wrong >= 1);
        assert_eq!(
            authorise(&mut guesses, Some("Bearer s3cret"), "s3cret", ip, now),
            Err(TokenRefusal::TooManyTries { wait }),
            "not even the right token is compared meanwhile"
        );
        let other = Some(ClientIp::V4(core::net::Ipv4Addr::new(203, 0, 113, 9)));
        assert_eq!(authorise(&mut guesses, Some("Bearer s3cret"), "s3cret", other, now), Ok(()), "per client");
        let reply = TokenRefusal::TooManyTries { wait }.reply();
        assert_eq!(reply.status, 429);
        assert!(reply.header("retry-after").is_some_and(|s| s != "0"));
        assert_eq!(TokenRefusal::Wrong.reply().header("www-authenticate"), Some("Bearer"));
    }
}
