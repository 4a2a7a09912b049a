//! The API server's label syntax, with its messages
//! (k8s.io/apimachinery `pkg/util/validation/validation.go`:
//! `IsQualifiedName` for a key, `IsValidLabelValue` for a value,
//! `IsDNS1123Subdomain` for a key's prefix; `RegexError` words them).
//! `ValidateLabels` (`pkg/apis/meta/v1/validation`) turns each into
//! `metadata.labels: Invalid value: "<it>": <message>`, a 422.

const NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
                        start and end with an alphanumeric character";
const NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
                         characters, '-', '_' or '.', and must start and end with an \
                         alphanumeric character";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
                             alphanumeric characters, '-' or '.', and must start and end with \
                             an alphanumeric character";
const SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let e: Vec<String> = examples.iter().map(|x| format!("'{x}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        e.join(" or ")
    )
}

fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(|p| {
        let b = p.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    })
}

/// `IsQualifiedName`'s first message, if `key` is not a label key.
pub fn key_error(key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Some("prefix part must be non-empty".into());
            }
            if prefix.len() > 253 {
                return Some("prefix part must be no more than 253 characters".into());
            }
            if !is_subdomain(prefix) {
                return Some(format!(
                    "prefix part {}",
                    regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"])
                ));
            }
            *name
        }
        _ => {
            return Some(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(NAME_MSG, NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
        }
    };
    if name.is_empty() {
        Some("name part must be non-empty".into())
    } else if name.len() > 63 {
        Some("name part must be no more than 63 characters".into())
    } else if !is_name(name) {
        Some(format!(
            "name part {}",
            regex_error(NAME_MSG, NAME_FMT, &["MyName", "my.name", "123-abc"])
        ))
    } else {
        None
    }
}

/// `IsValidLabelValue`'s first message, if `value` is not a label value.
pub fn value_error(value: &str) -> Option<String> {
    if value.len() > 63 {
        Some("must be no more than 63 characters".into())
    } else if !value.is_empty() && !is_name(value) {
        Some(regex_error(
            VALUE_MSG,
            &format!("({NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_as_the_api_server_does() {
        for ok in ["kured", "example.com/maint", "a.b_c-d", "x/y"] {
            assert_eq!(key_error(ok), None, "{ok}");
        }
        for bad in [
            "",
            "-x",
            "a/b/c",
            "/x",
            "Example.com/x",
            "a b",
            &"k".repeat(64),
        ] {
            assert!(key_error(bad).is_some(), "{bad}");
        }
        assert_eq!(value_error(""), None);
        assert_eq!(value_error("rebooting"), None);
        assert_eq!(
            value_error("a b").unwrap(),
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  \
             or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert!(value_error(&"v".repeat(64)).is_some());
    }
}
