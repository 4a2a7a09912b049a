//! Test-only strategies for the property tests of every parser of what a
//! node, the API server or the hub sends (issue 38): text that looks like
//! the real thing closely enough to reach deep into a parser, mixed with
//! noise. Sizes are bounded and the case count is small, so that each
//! property runs in well under a second in CI; [`linear`] bounds the time
//! on a large input built by repetition.

use proptest::prelude::*;

/// How many cases each parser property runs.
pub const CASES: u32 = 64;

/// A config for the `proptest!` blocks: [`CASES`] cases.
pub fn config() -> ProptestConfig {
    ProptestConfig::with_cases(CASES)
}

/// Any text, up to a few hundred characters.
pub fn text() -> impl Strategy<Value = String> {
    "\\PC{0,300}"
}

/// JSON-ish text: the tokens kubectl's `-o json` is made of, with the
/// keys the parsers look for, in random order and nesting.
pub fn json_soup(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        "-?[0-9]{1,22}(\\.[0-9]{0,3})?",
        "\"[a-zA-Z0-9 ./:_-]{0,16}\"",
        prop::sample::select(keys).prop_map(|k| format!("\"{k}\":")),
    ];
    prop::collection::vec(token, 0..60).prop_map(|t| t.concat())
}

/// A JSON value of any shape with the given keys, always valid JSON, so
/// that a parser gets past `serde_json` into its own logic.
pub fn json_value(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        "[a-zA-Z0-9 .:/_-]{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::vec((prop::sample::select(keys), inner), 0..6).prop_map(|kv| {
                serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
    .prop_map(|v| v.to_string())
}

/// YAML-ish lines: `key: value`, list items, indentation, anchors and
/// aliases, flow collections, document markers.
pub fn yaml_soup(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    let line = prop_oneof![
        (
            0usize..6,
            prop::sample::select(keys),
            "[a-zA-Z0-9 ._-]{0,12}"
        )
            .prop_map(|(i, k, v)| format!("{}{k}: {v}", "  ".repeat(i))),
        (0usize..6, prop::sample::select(keys))
            .prop_map(|(i, k)| format!("{}{k}:", "  ".repeat(i))),
        (0usize..6, "[a-zA-Z0-9._-]{0,12}").prop_map(|(i, v)| format!("{}- {v}", "  ".repeat(i))),
        Just("---".to_string()),
        Just("a: &x [1, 2, {b: c}]".to_string()),
        Just("b: *x".to_string()),
        Just("c: |".to_string()),
        Just("  \"quoted\": 'single'".to_string()),
        "[^\n]{0,20}",
    ];
    prop::collection::vec(line, 0..30).prop_map(|l| l.join("\n"))
}

/// The CPU time this thread spent in `f`, with its result: what a bound on
/// "linear, not quadratic" can rest on while the rest of the suite (and
/// the other sessions' builds) share the cores. Wall time under such load
/// varies by 5x and more; a thread's own CPU time hardly moves.
pub fn cpu_time<T>(f: impl FnOnce() -> T) -> (T, std::time::Duration) {
    fn now() -> std::time::Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
    let started = now();
    let out = f();
    (out, now().saturating_sub(started))
}

/// Calls `parse` on `unit` repeated to about 1 MiB and fails if that takes
/// more than `limit` of this thread's CPU: a quadratic parser takes minutes
/// there, a linear one a fraction of a second even in a debug build.
pub fn linear(unit: &str, limit: std::time::Duration, parse: impl Fn(&str)) {
    let text = unit.repeat((1 << 20) / unit.len().max(1));
    let ((), took) = cpu_time(|| parse(&text));
    assert!(
        took < limit,
        "{:?}… ×{}: {took:?}",
        unit,
        text.len() / unit.len().max(1)
    );
}
