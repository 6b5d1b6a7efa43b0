//! Strings iopath did not write — a process's `comm`, a cgroup's path, a pod folder's name, a
//! file name — made safe for the sink they reach. A comm of `\e[2J` cleared root's terminal from
//! `top --batch`, one with a newline forged a row, and a cgroup named `a,x="y"` made the whole
//! exposition unparsable. The rule: such a string is made `visible` where it enters (every text
//! sink then shows it as it is, control characters spelled out), and escaped again by each
//! sink's own syntax (Prometheus label values here, HTML in `report::html`).

use std::borrow::Cow;

/// `s` with every control character (C0, DEL, C1) written out as `\xNN` or `\u{NNNN}`, and a
/// backslash as `\\` so that what is shown cannot be mistaken for an escape it was not.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x100 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A Prometheus / OpenMetrics label value: backslash, double quote and newline escaped, as both
/// text formats require (prometheus-client writes label values as they are).
pub fn label_value(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A Kubernetes DNS label (RFC 1123: a namespace): 1-63 of [a-z0-9-], alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A Kubernetes object name (RFC 1123 subdomain: a pod): DNS labels joined by dots, 253 at most.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_spelled_out() {
        assert_eq!(visible("fio"), "fio");
        assert_eq!(visible("a\nb"), "a\\x0ab");
        assert_eq!(visible("\u{1b}[2J\u{1b}[31m"), "\\x1b[2J\\x1b[31m");
        assert_eq!(visible("tab\there"), "tab\\x09here");
        assert_eq!(visible("c1\u{9b}x"), "c1\\x9bx");
        assert_eq!(visible("back\\slash"), "back\\\\slash");
        assert!(!visible("\u{7f}\r\u{0}").chars().any(char::is_control));
    }

    #[test]
    fn label_values_escape_what_the_exposition_format_needs() {
        assert_eq!(label_value("/db"), "/db");
        assert_eq!(label_value("a,x=\"y\""), "a,x=\\\"y\\\"");
        assert_eq!(label_value("a\\b"), "a\\\\b");
        assert_eq!(label_value("x\"} 1\ninjected 666"), "x\\\"} 1\\ninjected 666");
    }

    #[test]
    fn kubernetes_names() {
        assert!(is_dns_label("kube-system") && is_dns_label("a") && is_dns_label("ns1"));
        for bad in ["", "-a", "a-", "A", "a_b", "ns_x\"} 1", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        assert!(is_dns_subdomain("web-7d4b9c-xk2p") && is_dns_subdomain("coredns.v1"));
        assert!(!is_dns_subdomain("pod\n1") && !is_dns_subdomain("a..b") && !is_dns_subdomain("x\"}"));
    }
}
