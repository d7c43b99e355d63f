//! Keeping the API key and a base URL's password out of every error text
//! and every `Debug` output of an HTTP model client: shared by the
//! OpenAI-compatible and the Anthropic clients.

use std::borrow::Cow;

use crate::llm::LlmError;

/// What replaces a secret in a text.
const REDACTED: &str = "<redacted>";

/// Secrets shorter than this are not searched for in text the server sent:
/// they would match ordinary words. The client never prints them itself.
const MIN_SCRUBBED_CHARS: usize = 4;

/// `url` with the password of its userinfo (`user:password@`) replaced by
/// `***`. Works on text that is not a valid URL too, since a URL that
/// cannot be parsed is exactly the one an error message quotes.
pub(crate) fn mask_password(url: &str) -> Cow<'_, str> {
    let Some((start, end)) = password_span(url) else {
        return Cow::Borrowed(url);
    };
    Cow::Owned(format!("{}***{}", &url[..start], &url[end..]))
}

/// The byte range of the password in `url`'s userinfo, if it has one.
fn password_span(url: &str) -> Option<(usize, usize)> {
    let authority_start = url.find("://")? + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    // The host follows the last `@`: a password may itself contain `@`.
    let userinfo = &authority[..authority.rfind('@')?];
    let colon = userinfo.find(':')?;
    Some((
        authority_start + colon + 1,
        authority_start + userinfo.len(),
    ))
}

/// The secrets one client holds, to be scrubbed from the texts of its
/// errors.
pub(crate) struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// The key and the base URL's password, the latter both as written and
    /// percent-decoded (a server may echo either).
    pub(crate) fn new(api_key: Option<&str>, base_url: &str) -> Secrets {
        let mut values: Vec<String> = Vec::new();
        if let Some(key) = api_key {
            values.push(key.to_owned());
        }
        if let Some((start, end)) = password_span(base_url) {
            let password = &base_url[start..end];
            values.push(password.to_owned());
            values.push(percent_decode(password));
        }
        values.retain(|value| value.chars().count() >= MIN_SCRUBBED_CHARS);
        // The longest first, so that a secret containing another is
        // replaced whole.
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
        values.dedup();
        Secrets { values }
    }

    /// `text` with every secret replaced.
    pub(crate) fn scrub(&self, text: String) -> String {
        self.values.iter().fold(text, |text, secret| {
            if text.contains(secret.as_str()) {
                text.replace(secret.as_str(), REDACTED)
            } else {
                text
            }
        })
    }

    /// `error` with every secret replaced in its texts.
    pub(crate) fn scrub_error(&self, error: LlmError) -> LlmError {
        match error {
            LlmError::Http { status, body } => LlmError::Http {
                status,
                body: self.scrub(body),
            },
            LlmError::Transport(reason) => LlmError::Transport(self.scrub(reason)),
            LlmError::InvalidResponse(reason) => LlmError::InvalidResponse(self.scrub(reason)),
            LlmError::Config(reason) => LlmError::Config(self.scrub(reason)),
            other => other,
        }
    }
}

/// `%XX` sequences decoded; anything else kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'%')
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_of_a_url_is_masked() {
        assert_eq!(
            mask_password("http://user:hunter2@localhost:8080/v1"),
            "http://user:***@localhost:8080/v1"
        );
        assert_eq!(
            mask_password("https://me:p@ss@example.com/v1?x=a@b"),
            "https://me:***@example.com/v1?x=a@b"
        );
        assert_eq!(
            mask_password("http://user@localhost/v1"),
            "http://user@localhost/v1"
        );
        assert_eq!(mask_password("localhost:1/v1"), "localhost:1/v1");
        assert_eq!(
            mask_password("ftp://a:b c@host"),
            "ftp://a:***@host",
            "a URL that does not parse is masked too"
        );
    }

    #[test]
    fn key_and_password_are_scrubbed_in_both_encodings() {
        let secrets = Secrets::new(Some("sk-live-1234"), "http://me:p%40ssword@host/v1");

        let text = secrets.scrub(
            "key sk-live-1234, password p%40ssword or p@ssword, user me, host host".to_owned(),
        );

        assert_eq!(
            text,
            "key <redacted>, password <redacted> or <redacted>, user me, host host"
        );
    }

    #[test]
    fn short_secrets_are_not_searched_for() {
        let secrets = Secrets::new(Some("ab"), "http://u:x@host/v1");

        assert_eq!(secrets.scrub("a tab".to_owned()), "a tab");
    }

    #[test]
    fn every_text_of_an_error_is_scrubbed() {
        let secrets = Secrets::new(Some("sk-secret"), "http://localhost/v1");

        for error in [
            LlmError::Http {
                status: 401,
                body: "bad key sk-secret".to_owned(),
            },
            LlmError::Transport("sk-secret".to_owned()),
            LlmError::InvalidResponse("sk-secret".to_owned()),
            LlmError::Config("sk-secret".to_owned()),
        ] {
            let scrubbed = secrets.scrub_error(error);
            assert!(
                !format!("{scrubbed} {scrubbed:?}").contains("sk-secret"),
                "{scrubbed:?}"
            );
        }
    }
}
